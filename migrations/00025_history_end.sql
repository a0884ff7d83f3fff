-- +goose Up

-- Ending a run writes it to history directly (issue #14: BenchmarkEndToEnd
-- lost a quarter of its rate when runs were first updated to their final
-- state, then copied and deleted by the execution_ended trigger).
--
-- ax.history_end(@ids, @states, @task_...) ends the runs among @ids that
-- are pending or running and have no task in flight but those of
-- @task_ids, whose outcomes (state, result, error, code) it is given: a
-- result that ends a run of one shard is not written to the live task
-- row (TaskComplete locks it), only to history. Each execution row is deleted
-- from ax.execution and inserted into ax.execution_history with its final
-- state (@states, in the order of @ids), its tasks move with it, the
-- callback outbox row is written and ax_execution_ended is notified, as
-- the trigger does for the other ways a run ends (cancel, reaper). No
-- UPDATE of the live rows: that cost a new row version and an entry in
-- each of their indexes, only to be deleted in the same transaction.
-- Returns the ids it ended.
--
-- history_define_move writes it with ax.history_move, from the catalog's
-- column lists (run it after adding a column).
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION ax.history_define_move() RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    ecols text;
    tcols text;
    ecols_ended text;
    tcols_ended text;
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

    EXECUTE format($def$
CREATE OR REPLACE FUNCTION ax.history_end(p_ids uuid[], p_states text[], p_task_ids uuid[], p_task_states text[],
                                          p_task_results jsonb[], p_task_errors text[], p_task_codes text[])
RETURNS uuid[]
LANGUAGE plpgsql AS $fn$
DECLARE
    busy  uuid[];
    ended uuid[];
    keep  timestamptz[];
BEGIN
    -- Every read is by key from a bound array (= ANY), never a join with
    -- the arrays or a subquery per row: with stale statistics either was
    -- planned as a scan of the table per row (see TaskComplete).
    busy := ARRAY(SELECT DISTINCT t.execution_id FROM ax.task t
                  WHERE t.execution_id = ANY(p_ids) AND t.state IN ('pending', 'leased', 'running')
                    AND NOT (t.id = ANY(p_task_ids)));
    -- The runs are deleted from the live table and written to history
    -- with their final state, in one statement.
    WITH gone AS (
        DELETE FROM ax.execution e
        WHERE e.id = ANY(p_ids) AND e.state IN ('pending', 'running') AND NOT (e.id = ANY(busy))
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
$def$, ecols, ecols_ended, tcols, tcols_ended);
END $$;
-- +goose StatementEnd
SELECT ax.history_define_move();

-- A result that ends a run is written to history only (not to ax.task
-- first): the error code's form is held there too, under the live
-- table's constraint name.
ALTER TABLE ax.task_history ADD CONSTRAINT task_error_code_format CHECK (error_code ~ '^[a-z0-9_.-]{1,64}$');

-- Nothing reads a task's history by agent (an agent's recent outcomes are
-- read from task_event): the index only cost every move.
-- +goose StatementBegin
DO $$
DECLARE
    ix record;
BEGIN
    FOR ix IN
        SELECT c.relname FROM pg_index x
        JOIN pg_class c ON c.oid = x.indexrelid
        JOIN pg_inherits i ON i.inhrelid = x.indrelid
        WHERE i.inhparent = 'ax.task_history'::regclass
          AND pg_get_indexdef(x.indexrelid) LIKE '%(agent_id, finished_at DESC)'
    LOOP
        EXECUTE format('DROP INDEX ax.%I', ix.relname);
    END LOOP;
END $$;
-- +goose StatementEnd

-- history_make_partitions as in 00024, without the index above.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION ax.history_make_partitions(p_until timestamptz) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    s      ax.history_setting;
    lo     timestamptz;
    hi     timestamptz;
    suffix text;
    made   integer := 0;
BEGIN
    SELECT * INTO s FROM ax.history_setting FOR UPDATE;
    -- From the horizon, but never from the past: rows land at now + a
    -- retention or later, so a server that was down for days makes no
    -- partitions for them (and a first call starts at the current slot).
    lo := greatest(s.made_until, date_bin(s.partition_width, now(), timestamptz '2000-01-01 00:00:00+00'));
    WHILE lo < p_until LOOP
        hi := lo + s.partition_width;
        suffix := to_char(lo AT TIME ZONE 'UTC', 'YYYYMMDD"t"HH24MISS');
        -- Made apart and then attached: ATTACH PARTITION takes a SHARE
        -- UPDATE EXCLUSIVE lock on the history table, which the moves'
        -- inserts do not conflict with; CREATE TABLE ... PARTITION OF
        -- would take ACCESS EXCLUSIVE and queue every move behind it.
        EXECUTE format('CREATE TABLE ax.%I (LIKE ax.execution_history INCLUDING DEFAULTS INCLUDING CONSTRAINTS)',
                       'execution_h' || suffix);
        EXECUTE format('CREATE INDEX ON ax.%I (id)', 'execution_h' || suffix);
        EXECUTE format('CREATE INDEX ON ax.%I (job_id, finished_at DESC)', 'execution_h' || suffix);
        EXECUTE format('ALTER TABLE ax.execution_history ATTACH PARTITION ax.%I FOR VALUES FROM (%L) TO (%L)',
                       'execution_h' || suffix, lo, hi);
        EXECUTE format('CREATE TABLE ax.%I (LIKE ax.task_history INCLUDING DEFAULTS INCLUDING CONSTRAINTS)',
                       'task_h' || suffix);
        EXECUTE format('CREATE INDEX ON ax.%I (id)', 'task_h' || suffix);
        EXECUTE format('CREATE INDEX ON ax.%I (execution_id, shard_index)', 'task_h' || suffix);
        EXECUTE format('ALTER TABLE ax.task_history ATTACH PARTITION ax.%I FOR VALUES FROM (%L) TO (%L)',
                       'task_h' || suffix, lo, hi);
        lo := hi;
        made := made + 1;
    END LOOP;
    UPDATE ax.history_setting SET made_until = lo, updated_at = now();
    RETURN made;
END $$;
-- +goose StatementEnd

-- +goose Down
ALTER TABLE ax.task_history DROP CONSTRAINT task_error_code_format;
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION ax.history_make_partitions(p_until timestamptz) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    s      ax.history_setting;
    lo     timestamptz;
    hi     timestamptz;
    suffix text;
    made   integer := 0;
BEGIN
    SELECT * INTO s FROM ax.history_setting FOR UPDATE;
    -- From the horizon, but never from the past: rows land at now + a
    -- retention or later, so a server that was down for days makes no
    -- partitions for them (and a first call starts at the current slot).
    lo := greatest(s.made_until, date_bin(s.partition_width, now(), timestamptz '2000-01-01 00:00:00+00'));
    WHILE lo < p_until LOOP
        hi := lo + s.partition_width;
        suffix := to_char(lo AT TIME ZONE 'UTC', 'YYYYMMDD"t"HH24MISS');
        -- Made apart and then attached: ATTACH PARTITION takes a SHARE
        -- UPDATE EXCLUSIVE lock on the history table, which the moves'
        -- inserts do not conflict with; CREATE TABLE ... PARTITION OF
        -- would take ACCESS EXCLUSIVE and queue every move behind it.
        EXECUTE format('CREATE TABLE ax.%I (LIKE ax.execution_history INCLUDING DEFAULTS INCLUDING CONSTRAINTS)',
                       'execution_h' || suffix);
        EXECUTE format('CREATE INDEX ON ax.%I (id)', 'execution_h' || suffix);
        EXECUTE format('CREATE INDEX ON ax.%I (job_id, finished_at DESC)', 'execution_h' || suffix);
        EXECUTE format('ALTER TABLE ax.execution_history ATTACH PARTITION ax.%I FOR VALUES FROM (%L) TO (%L)',
                       'execution_h' || suffix, lo, hi);
        EXECUTE format('CREATE TABLE ax.%I (LIKE ax.task_history INCLUDING DEFAULTS INCLUDING CONSTRAINTS)',
                       'task_h' || suffix);
        EXECUTE format('CREATE INDEX ON ax.%I (id)', 'task_h' || suffix);
        EXECUTE format('CREATE INDEX ON ax.%I (execution_id, shard_index)', 'task_h' || suffix);
        EXECUTE format('CREATE INDEX ON ax.%I (agent_id, finished_at DESC)', 'task_h' || suffix);
        EXECUTE format('ALTER TABLE ax.task_history ATTACH PARTITION ax.%I FOR VALUES FROM (%L) TO (%L)',
                       'task_h' || suffix, lo, hi);
        lo := hi;
        made := made + 1;
    END LOOP;
    UPDATE ax.history_setting SET made_until = lo, updated_at = now();
    RETURN made;
END $$;
-- +goose StatementEnd
-- +goose StatementBegin
DO $$
DECLARE
    p record;
BEGIN
    FOR p IN SELECT i.inhrelid::regclass AS part FROM pg_inherits i WHERE i.inhparent = 'ax.task_history'::regclass
    LOOP
        EXECUTE format('CREATE INDEX ON %s (agent_id, finished_at DESC)', p.part);
    END LOOP;
END $$;
-- +goose StatementEnd
DROP FUNCTION ax.history_end(uuid[], text[], uuid[], text[], jsonb[], text[], text[]);
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION ax.history_define_move() RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    ecols text;
    tcols text;
BEGIN
    SELECT string_agg(quote_ident(attname), ', ' ORDER BY attnum) INTO ecols
    FROM pg_attribute WHERE attrelid = 'ax.execution'::regclass AND attnum > 0 AND NOT attisdropped;
    SELECT string_agg(quote_ident(attname), ', ' ORDER BY attnum) INTO tcols
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
    JOIN ax.job j ON j.id = e.job_id
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
END $$;
-- +goose StatementEnd
SELECT ax.history_define_move();
