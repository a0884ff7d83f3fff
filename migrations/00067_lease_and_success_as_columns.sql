-- +goose Up

-- A task's lease and its success are columns of its row, not event rows
-- (#43): the happy path wrote two ax.task_event rows a task (a 'leased'
-- at the lease, a 'succeeded' at the result), 2 heap rows and 4 index
-- entries of the lease's and completion's cost. Now the lease sets
-- lease_event_id (an id from the events' sequence, so the event keeps its
-- place among the run's logs), worker_host and worker_ip beside agent_id
-- and leased_at, and a success sets end_event_id beside finished_at; the
-- view ax.all_task_events shows both as the event rows they were. A lease
-- whose row is about to take another (a retry, a lease lost and run
-- again, a release, an HTTP task handed to its target) is written down
-- as its event row first, with its id, so every attempt's lease stays
-- answerable; every outcome but a success still writes its event row.
ALTER TABLE ax.task ADD COLUMN worker_host text, ADD COLUMN worker_ip inet,
    ADD COLUMN lease_event_id bigint, ADD COLUMN end_event_id bigint;
ALTER TABLE ax.task_history ADD COLUMN worker_host text, ADD COLUMN worker_ip inet,
    ADD COLUMN lease_event_id bigint, ADD COLUMN end_event_id bigint;

-- Remade (no view reads it): retain_until stays its last column, as in
-- ax.all_executions (TestHistoryTablesMatchLiveTables).
DROP VIEW ax.all_tasks;
CREATE VIEW ax.all_tasks AS
SELECT t.id, t.execution_id, t.job_id, t.shard_index, t.shard_total, t.shard_param, t.state, t.priority,
       t.attempt, t.max_attempts, t.timeout_seconds, t.not_before, t.started_at, t.finished_at,
       t.cancel_requested_at, t.result, t.error, t.created_at, t.updated_at, t.agent_id, t.lease_token,
       t.lease_expires_at, t.leased_at, t.preferred_agent_id, t.fallback_agent_id, t.pinned, t.route_key,
       t.rate_class, t.agentless, t.log_bytes, t.lost_leases, t.error_code, t.concurrency_scope,
       t.concurrency_key, t.concurrency_limit, t.key_parked, t.worker_host, t.worker_ip, t.lease_event_id,
       t.end_event_id, NULL::timestamptz AS retain_until
FROM ax.task t
UNION ALL
SELECT t.id, t.execution_id, t.job_id, t.shard_index, t.shard_total, t.shard_param, t.state, t.priority,
       t.attempt, t.max_attempts, t.timeout_seconds, t.not_before, t.started_at, t.finished_at,
       t.cancel_requested_at, t.result, t.error, t.created_at, t.updated_at, t.agent_id, t.lease_token,
       t.lease_expires_at, t.leased_at, t.preferred_agent_id, t.fallback_agent_id, t.pinned, t.route_key,
       t.rate_class, t.agentless, t.log_bytes, t.lost_leases, t.error_code, t.concurrency_scope,
       t.concurrency_key, t.concurrency_limit, t.key_parked, t.worker_host, t.worker_ip, t.lease_event_id,
       t.end_event_id, t.retain_until
FROM ax.task_history t;

-- The message of a lease's event: whom the task was routed to.
CREATE FUNCTION ax.lease_message(p_preferred uuid, p_agent uuid) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN p_preferred IS NULL THEN 'unassigned'
                WHEN p_preferred = p_agent THEN 'routed here'
                ELSE 'taken over from agent ' || p_preferred END
$$;

-- Every event of every task: the rows of ax.task_event, and the leases
-- and successes held on the tasks' rows (live or in history), as the rows
-- they used to be. A success's duration runs from lease to result, as its
-- event recorded it.
CREATE VIEW ax.all_task_events AS
SELECT e.id, e.task_id, e.execution_id, e.shard_index, e.attempt, e.kind, e.state, e.agent_id, e.stream,
       e.message, e.at, e.worker_host, e.worker_ip, e.error_code, e.duration_ms
FROM ax.task_event e
UNION ALL
SELECT t.lease_event_id, t.id, t.execution_id, t.shard_index, t.attempt, 'state'::ax.task_event_kind,
       'leased'::ax.task_state, t.agent_id, NULL::text, ax.lease_message(t.preferred_agent_id, t.agent_id),
       t.leased_at, t.worker_host, t.worker_ip, NULL::text, NULL::bigint
FROM ax.all_tasks t
WHERE t.lease_event_id IS NOT NULL
UNION ALL
SELECT t.end_event_id, t.id, t.execution_id, t.shard_index, t.attempt, 'state'::ax.task_event_kind,
       'succeeded'::ax.task_state, t.agent_id, NULL::text, coalesce(t.error, ''), t.finished_at, t.worker_host,
       t.worker_ip, t.error_code, (extract(epoch FROM t.finished_at - t.leased_at) * 1000)::bigint
FROM ax.all_tasks t
WHERE t.end_event_id IS NOT NULL;

-- An agent's record reads its tasks' rows newest first: in history (an
-- entry per task an agent leased, made as the task moves there) and the
-- live rows that ended while their run goes on (a run of several shards).
-- Live rows get no entry at the lease: the lease's update already writes
-- four index entries (see TaskLeaseTake), and leased rows are found by
-- task_agent_idx.
CREATE INDEX task_history_agent_idx ON ax.task_history (agent_id, finished_at) WHERE lease_event_id IS NOT NULL;
CREATE INDEX task_agent_ended_idx ON ax.task (agent_id, finished_at)
    WHERE lease_event_id IS NOT NULL AND finished_at IS NOT NULL;

-- ax.agent_outcomes is agent p_agent's newest outcomes after p_since
-- whose state is one of p_states (succeeded, failed, timed_out), at most
-- p_limit, newest first: successes from its tasks' rows, the others (and
-- the successes written before migration 00067) from its events. Each
-- source reads at most p_limit rows, newest first through an index, so
-- a call costs the same however busy the agent was.
CREATE FUNCTION ax.agent_outcomes(p_agent uuid, p_since timestamptz, p_states ax.task_state[], p_limit integer)
RETURNS TABLE (at timestamptz, state ax.task_state, error_code text, duration_ms bigint)
LANGUAGE sql STABLE AS $$
    SELECT o.at, o.state, o.error_code, o.duration_ms
    FROM ((SELECT e.at, e.state, e.error_code, e.duration_ms
           FROM ax.task_event e
           WHERE e.agent_id = p_agent AND e.kind = 'state' AND e.state = ANY(p_states) AND e.at > p_since
           ORDER BY e.at DESC
           LIMIT p_limit)
          UNION ALL
          (SELECT t.finished_at, 'succeeded'::ax.task_state, t.error_code,
                  (extract(epoch FROM t.finished_at - t.leased_at) * 1000)::bigint
           FROM ax.task_history t
           WHERE 'succeeded' = ANY(p_states) AND t.agent_id = p_agent AND t.lease_event_id IS NOT NULL
             AND t.end_event_id IS NOT NULL AND t.finished_at > p_since
           ORDER BY t.finished_at DESC
           LIMIT p_limit)
          UNION ALL
          (SELECT t.finished_at, 'succeeded'::ax.task_state, t.error_code,
                  (extract(epoch FROM t.finished_at - t.leased_at) * 1000)::bigint
           FROM ax.task t
           WHERE 'succeeded' = ANY(p_states) AND t.agent_id = p_agent AND t.lease_event_id IS NOT NULL
             AND t.finished_at IS NOT NULL AND t.end_event_id IS NOT NULL AND t.finished_at > p_since
           ORDER BY t.finished_at DESC
           LIMIT p_limit)) o
    ORDER BY o.at DESC
    LIMIT p_limit
$$;

-- ax.agent_leases is agent p_agent's newest leases after p_since, at
-- most p_limit, newest first, and whether each was routed to it (or to
-- no one): from its tasks' rows (held now, ended, or in history; history
-- is read by end time, which bounds the lease time from above) and from
-- its events (the leases written down before their task's next attempt,
-- and those before migration 00067).
CREATE FUNCTION ax.agent_leases(p_agent uuid, p_since timestamptz, p_limit integer)
RETURNS TABLE (at timestamptz, routed boolean)
LANGUAGE sql STABLE AS $$
    SELECT o.at, o.routed
    FROM ((SELECT e.at, e.message IN ('routed here', 'unassigned') AS routed
           FROM ax.task_event e
           WHERE e.agent_id = p_agent AND e.kind = 'state' AND e.state = 'leased' AND e.at > p_since
           ORDER BY e.at DESC
           LIMIT p_limit)
          UNION ALL
          (SELECT t.leased_at, t.preferred_agent_id IS NULL OR t.preferred_agent_id = t.agent_id
           FROM ax.task_history t
           WHERE t.agent_id = p_agent AND t.lease_event_id IS NOT NULL AND t.finished_at > p_since
             AND t.leased_at > p_since
           ORDER BY t.finished_at DESC
           LIMIT p_limit)
          UNION ALL
          (SELECT t.leased_at, t.preferred_agent_id IS NULL OR t.preferred_agent_id = t.agent_id
           FROM ax.task t
           WHERE t.agent_id = p_agent AND t.lease_event_id IS NOT NULL AND t.finished_at IS NOT NULL
             AND t.finished_at > p_since AND t.leased_at > p_since
           ORDER BY t.finished_at DESC
           LIMIT p_limit)
          UNION ALL
          (SELECT t.leased_at, t.preferred_agent_id IS NULL OR t.preferred_agent_id = t.agent_id
           FROM ax.task t
           WHERE t.agent_id = p_agent AND t.state IN ('leased', 'running') AND t.lease_event_id IS NOT NULL
             AND t.leased_at > p_since
           ORDER BY t.leased_at DESC
           LIMIT p_limit)) o
    ORDER BY o.at DESC
    LIMIT p_limit
$$;

-- The history functions write the new columns (history_define_move
-- copies every column of ax.task); a success passed to history_end gets
-- its event's id there, as TaskComplete gives one to a success it writes
-- to the live row.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION ax.history_define_move() RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    ecols text;
    tcols text;
    ecols_ended text;
    tcols_ended text;
    end_body    text;
BEGIN
    SELECT string_agg(quote_ident(attname), ', ' ORDER BY attnum) INTO ecols
    FROM pg_attribute WHERE attrelid = 'ax.execution'::regclass AND attnum > 0 AND NOT attisdropped;
    SELECT string_agg(quote_ident(attname), ', ' ORDER BY attnum) INTO tcols
    FROM pg_attribute WHERE attrelid = 'ax.task'::regclass AND attnum > 0 AND NOT attisdropped;
    -- The execution's columns as history_end writes them: the final state
    -- and the end time are set, the rest is copied.
    SELECT string_agg(CASE attname WHEN 'state' THEN 'k.final_state::ax.execution_state'
                                   WHEN 'finished_at' THEN 'now()'
                                   WHEN 'updated_at' THEN 'now()'
                                   ELSE 'k.' || quote_ident(attname) END, ', ' ORDER BY attnum) INTO ecols_ended
    FROM pg_attribute WHERE attrelid = 'ax.execution'::regclass AND attnum > 0 AND NOT attisdropped;
    -- A task whose outcome is passed (f: a result that ends its run, not
    -- recorded on the live row) gets it; the others are copied as they are.
    SELECT string_agg(CASE attname
                        WHEN 'state' THEN 'coalesce(f.state::ax.task_state, t.state)'
                        WHEN 'result' THEN 'CASE WHEN f.id IS NULL THEN t.result ELSE f.result END'
                        WHEN 'error' THEN 'CASE WHEN f.id IS NULL THEN t.error ELSE nullif(f.error, '''') END'
                        WHEN 'error_code' THEN 'CASE WHEN f.id IS NULL THEN t.error_code ELSE nullif(f.code, '''') END'
                        WHEN 'finished_at' THEN 'CASE WHEN f.id IS NULL THEN t.finished_at ELSE now() END'
                        WHEN 'updated_at' THEN 'CASE WHEN f.id IS NULL THEN t.updated_at ELSE now() END'
                        WHEN 'lease_token' THEN 'CASE WHEN f.id IS NULL THEN t.lease_token END'
                        WHEN 'lease_expires_at' THEN 'CASE WHEN f.id IS NULL THEN t.lease_expires_at END'
                        WHEN 'end_event_id' THEN 'CASE WHEN f.id IS NULL THEN t.end_event_id
                                                       WHEN f.state = ''succeeded'' THEN nextval(''ax.task_event_id_seq'') END'
                        ELSE 't.' || quote_ident(attname) END, ', ' ORDER BY attnum) INTO tcols_ended
    FROM pg_attribute WHERE attrelid = 'ax.task'::regclass AND attnum > 0 AND NOT attisdropped;

    EXECUTE format($def$
CREATE OR REPLACE FUNCTION ax.history_move(p_ids uuid[], p_not_before timestamptz) RETURNS integer
LANGUAGE plpgsql AS $fn$
DECLARE
    busy   uuid[];
    ids    uuid[];
    keep   timestamptz[];
BEGIN
    -- Every read is by key from a bound array (= ANY): index lookups
    -- whatever the statistics say (see TaskComplete).
    busy := ARRAY(SELECT DISTINCT t.execution_id FROM ax.task t
                  WHERE t.execution_id = ANY(p_ids) AND t.state IN ('pending', 'leased', 'running'));
    SELECT coalesce(array_agg(e.id), '{}'),
           coalesce(array_agg(least(greatest(
               e.finished_at + CASE WHEN e.state IN ('failed', 'timed_out')
                                    THEN coalesce(make_interval(secs => j.history_failed_retention_seconds), s.failed_retention)
                                    ELSE coalesce(make_interval(secs => j.history_retention_seconds), s.finished_retention) END,
               p_not_before), s.made_until - interval '1 microsecond')), '{}')
    INTO ids, keep
    FROM ax.execution e
    LEFT JOIN ax.job j ON j.id = e.job_id
    CROSS JOIN ax.history_setting s
    WHERE e.id = ANY(p_ids) AND e.finished_at IS NOT NULL AND NOT (e.id = ANY(busy));
    IF cardinality(ids) = 0 THEN
        RETURN 0;
    END IF;
    INSERT INTO ax.task_history (%1$s, retain_until)
    SELECT %2$s, k.until
    FROM ax.task t JOIN unnest(ids, keep) AS k(id, until) ON k.id = t.execution_id
    WHERE t.execution_id = ANY(ids);
    DELETE FROM ax.task t WHERE t.execution_id = ANY(ids);
    INSERT INTO ax.execution_history (%3$s, retain_until)
    SELECT %4$s, k.until
    FROM ax.execution e JOIN unnest(ids, keep) AS k(id, until) ON k.id = e.id
    WHERE e.id = ANY(ids);
    DELETE FROM ax.execution e WHERE e.id = ANY(ids);
    RETURN cardinality(ids);
END $fn$
$def$, tcols, (SELECT string_agg('t.' || c, ', ') FROM unnest(string_to_array(tcols, ', ')) c),
       ecols, (SELECT string_agg('e.' || c, ', ') FROM unnest(string_to_array(ecols, ', ')) c));

    -- history_end and history_end_single share their body (end_body):
    -- %5$s is the function's name, %6$s what it reads before ending the
    -- runs, %7$s which runs it may end.
    end_body := $def$
CREATE OR REPLACE FUNCTION ax.%5$s(p_ids uuid[], p_states text[], p_task_ids uuid[], p_task_states text[],
                                   p_task_results jsonb[], p_task_errors text[], p_task_codes text[])
RETURNS uuid[]
LANGUAGE plpgsql AS $fn$
DECLARE
    busy  uuid[];
    ended uuid[];
    keep  timestamptz[];
BEGIN
%6$s
    -- The runs are deleted from the live table and written to history
    -- with their final state, in one statement.
    WITH gone AS (
        DELETE FROM ax.execution e
        WHERE e.id = ANY(p_ids) AND e.state IN ('pending', 'running') AND %7$s
        RETURNING e.*, p_states[array_position(p_ids, e.id)] AS final_state
    ), k AS (
        SELECT g.*, j.callback_url IS NOT NULL AS has_callback,
               least(now() + CASE WHEN g.final_state IN ('failed', 'timed_out')
                                  THEN coalesce(make_interval(secs => j.history_failed_retention_seconds), s.failed_retention)
                                  ELSE coalesce(make_interval(secs => j.history_retention_seconds), s.finished_retention) END,
                     s.made_until - interval '1 microsecond') AS until
        FROM gone g
        LEFT JOIN ax.job j ON j.id = g.job_id
        CROSS JOIN ax.history_setting s
    ), moved AS (
        INSERT INTO ax.execution_history (%1$s, retain_until)
        SELECT %2$s, k.until FROM k
        RETURNING id, retain_until
    ), outbox AS (
        INSERT INTO ax.callback (execution_id, job_id)
        SELECT k.id, k.job_id FROM k WHERE k.has_callback
        ON CONFLICT (execution_id) DO NOTHING
    )
    SELECT coalesce(array_agg(id), '{}'), coalesce(array_agg(retain_until), '{}') INTO ended, keep FROM moved;
    IF cardinality(ended) = 0 THEN
        RETURN ended;
    END IF;
    -- Their tasks follow (all ended, or ending with an outcome passed in).
    WITH tasks_gone AS (
        DELETE FROM ax.task t WHERE t.execution_id = ANY(ended)
        RETURNING t.*
    )
    INSERT INTO ax.task_history (%3$s, retain_until)
    SELECT %4$s, u.until
    FROM tasks_gone t
    JOIN unnest(ended, keep) AS u(id, until) ON u.id = t.execution_id
    LEFT JOIN unnest(p_task_ids, p_task_states, p_task_results, p_task_errors, p_task_codes)
              AS f(id, state, result, error, code) ON f.id = t.id;
    -- One NOTIFY per 200 ended executions (payload: their ids), as the
    -- execution_ended trigger sends for runs ended by an UPDATE.
    PERFORM pg_notify('ax_execution_ended', string_agg(id::text, ','))
    FROM (SELECT id, (row_number() OVER () - 1) / 200 AS chunk FROM unnest(ended) AS id) c
    GROUP BY chunk;
    RETURN ended;
END $fn$
$def$;
    EXECUTE format(end_body, ecols, ecols_ended, tcols, tcols_ended, 'history_end', $read$
    -- Every read is by key from a bound array (= ANY), never a join with
    -- the arrays or a subquery per row: with stale statistics either was
    -- planned as a scan of the table per row (see TaskComplete).
    busy := ARRAY(SELECT DISTINCT t.execution_id FROM ax.task t
                  WHERE t.execution_id = ANY(p_ids) AND t.state IN ('pending', 'leased', 'running')
                    AND NOT (t.id = ANY(p_task_ids)));$read$,
        'NOT (e.id = ANY(busy))');
    EXECUTE format(end_body, ecols, ecols_ended, tcols, tcols_ended, 'history_end_single', $read$
    -- No read of the runs' other tasks: a run of one shard has none (a
    -- run of several is left alone), and its task's outcome is passed in.$read$,
        'e.shard_count = 1');
END $$;
-- +goose StatementEnd
SELECT ax.history_define_move();

-- +goose Down

-- history_define_move as in 00040.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION ax.history_define_move() RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    ecols text;
    tcols text;
    ecols_ended text;
    tcols_ended text;
    end_body    text;
BEGIN
    SELECT string_agg(quote_ident(attname), ', ' ORDER BY attnum) INTO ecols
    FROM pg_attribute WHERE attrelid = 'ax.execution'::regclass AND attnum > 0 AND NOT attisdropped;
    SELECT string_agg(quote_ident(attname), ', ' ORDER BY attnum) INTO tcols
    FROM pg_attribute WHERE attrelid = 'ax.task'::regclass AND attnum > 0 AND NOT attisdropped;
    -- The execution's columns as history_end writes them: the final state
    -- and the end time are set, the rest is copied.
    SELECT string_agg(CASE attname WHEN 'state' THEN 'k.final_state::ax.execution_state'
                                   WHEN 'finished_at' THEN 'now()'
                                   WHEN 'updated_at' THEN 'now()'
                                   ELSE 'k.' || quote_ident(attname) END, ', ' ORDER BY attnum) INTO ecols_ended
    FROM pg_attribute WHERE attrelid = 'ax.execution'::regclass AND attnum > 0 AND NOT attisdropped;
    -- A task whose outcome is passed (f: a result that ends its run, not
    -- recorded on the live row) gets it; the others are copied as they are.
    SELECT string_agg(CASE attname
                        WHEN 'state' THEN 'coalesce(f.state::ax.task_state, t.state)'
                        WHEN 'result' THEN 'CASE WHEN f.id IS NULL THEN t.result ELSE f.result END'
                        WHEN 'error' THEN 'CASE WHEN f.id IS NULL THEN t.error ELSE nullif(f.error, '''') END'
                        WHEN 'error_code' THEN 'CASE WHEN f.id IS NULL THEN t.error_code ELSE nullif(f.code, '''') END'
                        WHEN 'finished_at' THEN 'CASE WHEN f.id IS NULL THEN t.finished_at ELSE now() END'
                        WHEN 'updated_at' THEN 'CASE WHEN f.id IS NULL THEN t.updated_at ELSE now() END'
                        WHEN 'lease_token' THEN 'CASE WHEN f.id IS NULL THEN t.lease_token END'
                        WHEN 'lease_expires_at' THEN 'CASE WHEN f.id IS NULL THEN t.lease_expires_at END'
                        ELSE 't.' || quote_ident(attname) END, ', ' ORDER BY attnum) INTO tcols_ended
    FROM pg_attribute WHERE attrelid = 'ax.task'::regclass AND attnum > 0 AND NOT attisdropped;

    EXECUTE format($def$
CREATE OR REPLACE FUNCTION ax.history_move(p_ids uuid[], p_not_before timestamptz) RETURNS integer
LANGUAGE plpgsql AS $fn$
DECLARE
    busy   uuid[];
    ids    uuid[];
    keep   timestamptz[];
BEGIN
    -- Every read is by key from a bound array (= ANY): index lookups
    -- whatever the statistics say (see TaskComplete).
    busy := ARRAY(SELECT DISTINCT t.execution_id FROM ax.task t
                  WHERE t.execution_id = ANY(p_ids) AND t.state IN ('pending', 'leased', 'running'));
    SELECT coalesce(array_agg(e.id), '{}'),
           coalesce(array_agg(least(greatest(
               e.finished_at + CASE WHEN e.state IN ('failed', 'timed_out')
                                    THEN coalesce(make_interval(secs => j.history_failed_retention_seconds), s.failed_retention)
                                    ELSE coalesce(make_interval(secs => j.history_retention_seconds), s.finished_retention) END,
               p_not_before), s.made_until - interval '1 microsecond')), '{}')
    INTO ids, keep
    FROM ax.execution e
    LEFT JOIN ax.job j ON j.id = e.job_id
    CROSS JOIN ax.history_setting s
    WHERE e.id = ANY(p_ids) AND e.finished_at IS NOT NULL AND NOT (e.id = ANY(busy));
    IF cardinality(ids) = 0 THEN
        RETURN 0;
    END IF;
    INSERT INTO ax.task_history (%1$s, retain_until)
    SELECT %2$s, k.until
    FROM ax.task t JOIN unnest(ids, keep) AS k(id, until) ON k.id = t.execution_id
    WHERE t.execution_id = ANY(ids);
    DELETE FROM ax.task t WHERE t.execution_id = ANY(ids);
    INSERT INTO ax.execution_history (%3$s, retain_until)
    SELECT %4$s, k.until
    FROM ax.execution e JOIN unnest(ids, keep) AS k(id, until) ON k.id = e.id
    WHERE e.id = ANY(ids);
    DELETE FROM ax.execution e WHERE e.id = ANY(ids);
    RETURN cardinality(ids);
END $fn$
$def$, tcols, (SELECT string_agg('t.' || c, ', ') FROM unnest(string_to_array(tcols, ', ')) c),
       ecols, (SELECT string_agg('e.' || c, ', ') FROM unnest(string_to_array(ecols, ', ')) c));

    -- history_end and history_end_single share their body (end_body):
    -- %5$s is the function's name, %6$s what it reads before ending the
    -- runs, %7$s which runs it may end.
    end_body := $def$
CREATE OR REPLACE FUNCTION ax.%5$s(p_ids uuid[], p_states text[], p_task_ids uuid[], p_task_states text[],
                                   p_task_results jsonb[], p_task_errors text[], p_task_codes text[])
RETURNS uuid[]
LANGUAGE plpgsql AS $fn$
DECLARE
    busy  uuid[];
    ended uuid[];
    keep  timestamptz[];
BEGIN
%6$s
    -- The runs are deleted from the live table and written to history
    -- with their final state, in one statement.
    WITH gone AS (
        DELETE FROM ax.execution e
        WHERE e.id = ANY(p_ids) AND e.state IN ('pending', 'running') AND %7$s
        RETURNING e.*, p_states[array_position(p_ids, e.id)] AS final_state
    ), k AS (
        SELECT g.*, j.callback_url IS NOT NULL AS has_callback,
               least(now() + CASE WHEN g.final_state IN ('failed', 'timed_out')
                                  THEN coalesce(make_interval(secs => j.history_failed_retention_seconds), s.failed_retention)
                                  ELSE coalesce(make_interval(secs => j.history_retention_seconds), s.finished_retention) END,
                     s.made_until - interval '1 microsecond') AS until
        FROM gone g
        LEFT JOIN ax.job j ON j.id = g.job_id
        CROSS JOIN ax.history_setting s
    ), moved AS (
        INSERT INTO ax.execution_history (%1$s, retain_until)
        SELECT %2$s, k.until FROM k
        RETURNING id, retain_until
    ), outbox AS (
        INSERT INTO ax.callback (execution_id, job_id)
        SELECT k.id, k.job_id FROM k WHERE k.has_callback
        ON CONFLICT (execution_id) DO NOTHING
    )
    SELECT coalesce(array_agg(id), '{}'), coalesce(array_agg(retain_until), '{}') INTO ended, keep FROM moved;
    IF cardinality(ended) = 0 THEN
        RETURN ended;
    END IF;
    -- Their tasks follow (all ended, or ending with an outcome passed in).
    WITH tasks_gone AS (
        DELETE FROM ax.task t WHERE t.execution_id = ANY(ended)
        RETURNING t.*
    )
    INSERT INTO ax.task_history (%3$s, retain_until)
    SELECT %4$s, u.until
    FROM tasks_gone t
    JOIN unnest(ended, keep) AS u(id, until) ON u.id = t.execution_id
    LEFT JOIN unnest(p_task_ids, p_task_states, p_task_results, p_task_errors, p_task_codes)
              AS f(id, state, result, error, code) ON f.id = t.id;
    -- One NOTIFY per 200 ended executions (payload: their ids), as the
    -- execution_ended trigger sends for runs ended by an UPDATE.
    PERFORM pg_notify('ax_execution_ended', string_agg(id::text, ','))
    FROM (SELECT id, (row_number() OVER () - 1) / 200 AS chunk FROM unnest(ended) AS id) c
    GROUP BY chunk;
    RETURN ended;
END $fn$
$def$;
    EXECUTE format(end_body, ecols, ecols_ended, tcols, tcols_ended, 'history_end', $read$
    -- Every read is by key from a bound array (= ANY), never a join with
    -- the arrays or a subquery per row: with stale statistics either was
    -- planned as a scan of the table per row (see TaskComplete).
    busy := ARRAY(SELECT DISTINCT t.execution_id FROM ax.task t
                  WHERE t.execution_id = ANY(p_ids) AND t.state IN ('pending', 'leased', 'running')
                    AND NOT (t.id = ANY(p_task_ids)));$read$,
        'NOT (e.id = ANY(busy))');
    EXECUTE format(end_body, ecols, ecols_ended, tcols, tcols_ended, 'history_end_single', $read$
    -- No read of the runs' other tasks: a run of one shard has none (a
    -- run of several is left alone), and its task's outcome is passed in.$read$,
        'e.shard_count = 1');
END $$;
-- +goose StatementEnd
DROP FUNCTION ax.agent_leases(uuid, timestamptz, integer);
DROP FUNCTION ax.agent_outcomes(uuid, timestamptz, ax.task_state[], integer);
DROP INDEX ax.task_agent_ended_idx;
DROP INDEX ax.task_history_agent_idx;
DROP VIEW ax.all_task_events;
DROP FUNCTION ax.lease_message(uuid, uuid);
DROP VIEW ax.all_tasks;
CREATE VIEW ax.all_tasks AS
 SELECT task.id,
    task.execution_id,
    task.job_id,
    task.shard_index,
    task.shard_total,
    task.shard_param,
    task.state,
    task.priority,
    task.attempt,
    task.max_attempts,
    task.timeout_seconds,
    task.not_before,
    task.started_at,
    task.finished_at,
    task.cancel_requested_at,
    task.result,
    task.error,
    task.created_at,
    task.updated_at,
    task.agent_id,
    task.lease_token,
    task.lease_expires_at,
    task.leased_at,
    task.preferred_agent_id,
    task.fallback_agent_id,
    task.pinned,
    task.route_key,
    task.rate_class,
    task.agentless,
    task.log_bytes,
    task.lost_leases,
    task.error_code,
    task.concurrency_scope,
    task.concurrency_key,
    task.concurrency_limit,
    task.key_parked,
    NULL::timestamp with time zone AS retain_until
   FROM ax.task
UNION ALL
 SELECT task_history.id,
    task_history.execution_id,
    task_history.job_id,
    task_history.shard_index,
    task_history.shard_total,
    task_history.shard_param,
    task_history.state,
    task_history.priority,
    task_history.attempt,
    task_history.max_attempts,
    task_history.timeout_seconds,
    task_history.not_before,
    task_history.started_at,
    task_history.finished_at,
    task_history.cancel_requested_at,
    task_history.result,
    task_history.error,
    task_history.created_at,
    task_history.updated_at,
    task_history.agent_id,
    task_history.lease_token,
    task_history.lease_expires_at,
    task_history.leased_at,
    task_history.preferred_agent_id,
    task_history.fallback_agent_id,
    task_history.pinned,
    task_history.route_key,
    task_history.rate_class,
    task_history.agentless,
    task_history.log_bytes,
    task_history.lost_leases,
    task_history.error_code,
    task_history.concurrency_scope,
    task_history.concurrency_key,
    task_history.concurrency_limit,
    task_history.key_parked,
    task_history.retain_until
   FROM ax.task_history;
ALTER TABLE ax.task_history DROP COLUMN worker_host, DROP COLUMN worker_ip,
    DROP COLUMN lease_event_id, DROP COLUMN end_event_id;
ALTER TABLE ax.task DROP COLUMN worker_host, DROP COLUMN worker_ip,
    DROP COLUMN lease_event_id, DROP COLUMN end_event_id;
SELECT ax.history_define_move();
