-- +goose Up

-- history_end and history_end_single find each ended run's final state by
-- a join, not by array_position per run: that read the ids from the start
-- for every run, quadratic in the batch. A completion statement takes up
-- to 1,000 results of an agent's request (as many as the agent sends at
-- once) and the broker records several agents' requests together; for
-- 3,000 runs array_position cost about 25 ms (psql, on the machine of
-- #43's benchmarks: 27.9 ms against 3.3 ms for the same rows without it).
-- history_define_move as in 00067 but for that.
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
        RETURNING e.*
    ), k AS (
        SELECT g.*, f.state AS final_state, j.callback_url IS NOT NULL AS has_callback,
               least(now() + CASE WHEN f.state IN ('failed', 'timed_out')
                                  THEN coalesce(make_interval(secs => j.history_failed_retention_seconds), s.failed_retention)
                                  ELSE coalesce(make_interval(secs => j.history_retention_seconds), s.finished_retention) END,
                     s.made_until - interval '1 microsecond') AS until
        FROM gone g
        -- A run's final state by a join: array_position, per run, read
        -- p_ids from its start, quadratic in the batch (migration 00069).
        -- The first state given for a run is its state.
        JOIN (SELECT DISTINCT ON (x.id) x.id, x.state
              FROM unnest(p_ids, p_states) WITH ORDINALITY AS x(id, state, n)
              ORDER BY x.id, x.n) f ON f.id = g.id
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

-- history_define_move as in 00067.
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
