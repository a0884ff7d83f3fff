-- +goose Up

-- History in time partitions (issue #14; README "History and retention").
--
-- ax.execution and ax.task keep the runs in flight only: small tables whose
-- size follows the work in flight, with their partial indexes, so the hot
-- path (fire, lease, complete, reap) reads and writes what it did before.
-- When a run ends, the statement that ends it moves its execution and
-- tasks (trigger execution_ended) to ax.execution_history and
-- ax.task_history, partitioned by retain_until: when the row may be
-- removed (its job's retention, else the server's, from the end of the
-- run). Ending the life of history is dropping a partition whose range has
-- passed: never a bulk DELETE, and a run in flight is never in one.
-- ax.all_executions and ax.all_tasks show both.

-- history_setting: the server-wide retention (written by ax serve from its
-- flags at start) and the horizon of the history partitions made so far.
CREATE TABLE ax.history_setting (
    singleton          boolean PRIMARY KEY DEFAULT true,
    finished_retention interval NOT NULL DEFAULT '7 days',
    failed_retention   interval NOT NULL DEFAULT '30 days',
    partition_width    interval NOT NULL DEFAULT '1 day',
    -- made_until is the upper bound of the newest history partition.
    made_until         timestamptz NOT NULL DEFAULT '-infinity',
    updated_at         timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT history_setting_singleton CHECK (singleton),
    CONSTRAINT history_setting_retention_positive CHECK (
        finished_retention > interval '0' AND failed_retention > interval '0'),
    CONSTRAINT history_setting_width_range CHECK (
        partition_width >= interval '1 second' AND partition_width <= interval '7 days')
);
INSERT INTO ax.history_setting DEFAULT VALUES;

-- Per-job overrides of the server-wide retention (NULL: the server's).
ALTER TABLE ax.job
    ADD COLUMN history_retention_seconds integer,
    ADD COLUMN history_failed_retention_seconds integer,
    ADD CONSTRAINT job_history_retention_range CHECK (
        (history_retention_seconds IS NULL OR history_retention_seconds BETWEEN 1 AND 400 * 86400)
        AND (history_failed_retention_seconds IS NULL OR history_failed_retention_seconds BETWEEN 1 AND 400 * 86400));

-- history_drop records every history partition dropped, so "where did that
-- run go" has an answer in psql. min_id and max_id bound the ids of the
-- rows dropped: an execution id that is not found but lies within a drop's
-- bounds was removed by retention (the API answers 410 Gone).
CREATE TABLE ax.history_drop (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    table_name    text NOT NULL,
    range_from    timestamptz NOT NULL,
    range_to      timestamptz NOT NULL,
    row_count     bigint NOT NULL,
    min_id        uuid,
    max_id        uuid,
    dropped_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX history_drop_at_idx ON ax.history_drop (dropped_at);


-- The history tables have the columns of the live ones and retain_until,
-- their partition key. A migration that adds a column to a live table adds
-- it to its history table too and then runs SELECT ax.history_define_move()
-- (db tests compare the columns).
CREATE TABLE ax.execution_history (LIKE ax.execution INCLUDING DEFAULTS, retain_until timestamptz NOT NULL)
    PARTITION BY RANGE (retain_until);
CREATE TABLE ax.task_history (LIKE ax.task INCLUDING DEFAULTS, retain_until timestamptz NOT NULL)
    PARTITION BY RANGE (retain_until);
-- The state rules hold in history too.
ALTER TABLE ax.execution_history ADD CONSTRAINT execution_history_finished CHECK (finished_at IS NOT NULL);
ALTER TABLE ax.task_history ADD CONSTRAINT task_history_finished
    CHECK (state NOT IN ('pending', 'leased', 'running'));

-- history_make_partitions makes the partitions of the history tables from
-- the current horizon up to at least @until, partition_width wide each,
-- and moves the horizon; returns how many it made. Called by this
-- migration and by the maintenance job. Indexes: what reads of history
-- need (by id, a job's runs newest first, an execution's shards, an
-- agent's recent tasks); nothing more is paid on every move.
-- +goose StatementBegin
CREATE FUNCTION ax.history_make_partitions(p_until timestamptz) RETURNS integer
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

-- history_set_width changes the time range of the partitions made from now
-- on. The partitions made ahead that hold no row yet are dropped and made
-- again at the new width; those holding rows keep theirs.
-- +goose StatementBegin
CREATE FUNCTION ax.history_set_width(p_width interval) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    p        record;
    kept_to  timestamptz := '-infinity';
    any_rows boolean;
BEGIN
    PERFORM 1 FROM ax.history_setting FOR UPDATE;
    IF (SELECT partition_width FROM ax.history_setting) = p_width THEN
        RETURN;
    END IF;
    FOR p IN
        SELECT c.relname, (m.b)[2]::timestamptz AS range_to
        FROM pg_inherits i
        JOIN pg_class c ON c.oid = i.inhrelid
        JOIN pg_class t ON t.oid = i.inhparent
        CROSS JOIN LATERAL (SELECT regexp_match(pg_get_expr(c.relpartbound, c.oid),
                                                'FROM \(''([^'']+)''\) TO \(''([^'']+)''\)') AS b) m
        WHERE t.oid IN ('ax.execution_history'::regclass, 'ax.task_history'::regclass)
        ORDER BY (m.b)[1]::timestamptz DESC
    LOOP
        EXECUTE format('SELECT EXISTS (SELECT 1 FROM ax.%I)', p.relname) INTO any_rows;
        IF any_rows THEN
            kept_to := greatest(kept_to, p.range_to);
        END IF;
    END LOOP;
    FOR p IN
        SELECT c.relname
        FROM pg_inherits i
        JOIN pg_class c ON c.oid = i.inhrelid
        CROSS JOIN LATERAL (SELECT regexp_match(pg_get_expr(c.relpartbound, c.oid),
                                                'FROM \(''([^'']+)''\) TO \(''([^'']+)''\)') AS b) m
        WHERE i.inhparent IN ('ax.execution_history'::regclass, 'ax.task_history'::regclass)
          AND (m.b)[1]::timestamptz >= kept_to
    LOOP
        EXECUTE format('DROP TABLE ax.%I', p.relname);
    END LOOP;
    -- Made from the end of the last partition that holds rows on
    -- (history_make_partitions starts at now when that is past).
    UPDATE ax.history_setting
    SET partition_width = p_width, made_until = kept_to, updated_at = now();
END $$;
-- +goose StatementEnd

-- Moving a run deletes its live rows: no foreign key may cascade from
-- that. The callback outbox row is made as a run ends and outlives its
-- live row; tasks move with their execution (history_move deletes them by
-- key, where a cascade re-planned per row could scan the table); deleting
-- a job deletes its live tasks explicitly (JobDelete). History of a
-- deleted job stays until its retention ends.
ALTER TABLE ax.callback DROP CONSTRAINT callback_execution_id_fkey;
ALTER TABLE ax.task DROP CONSTRAINT task_execution_id_fkey;

-- history_define_move (re)writes ax.history_move with the column lists of
-- today's tables: static SQL, so its plan is cached, and no column is
-- forgotten when one is added (run it after adding one).
--
-- ax.history_move(@ids, @not_before) moves the ended executions among @ids
-- whose tasks have all ended, with their tasks, to history; retain_until
-- is the end plus the job's retention, else the server's (failed and
-- timed-out runs: the failed retention), at least @not_before (a row never
-- lands in a partition that may be dropped already) and below the horizon
-- (a row always has a partition, even when maintenance lags). Returns how
-- many moved.
-- +goose StatementBegin
CREATE FUNCTION ax.history_define_move() RETURNS void LANGUAGE plpgsql AS $$
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

-- execution_ended (see 00007) also moves the runs that ended to history.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION ax.execution_ended() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    ended_ids uuid[];
BEGIN
    SELECT array_agg(n.id) INTO ended_ids
    FROM new_rows n JOIN old_rows o ON o.id = n.id
    WHERE o.state IN ('pending', 'running') AND n.state NOT IN ('pending', 'running');
    IF ended_ids IS NULL THEN
        RETURN NULL;
    END IF;
    INSERT INTO ax.callback (execution_id, job_id)
    SELECT e.id, e.job_id FROM new_rows e JOIN ax.job j ON j.id = e.job_id
    WHERE e.id = ANY(ended_ids) AND j.callback_url IS NOT NULL
    ON CONFLICT (execution_id) DO NOTHING;
    -- One NOTIFY per 200 ended executions (payload: their ids).
    PERFORM pg_notify('ax_execution_ended', string_agg(id::text, ','))
    FROM (SELECT id, (row_number() OVER () - 1) / 200 AS chunk FROM unnest(ended_ids) AS id) c
    GROUP BY chunk;
    PERFORM ax.history_move(ended_ids, now());
    RETURN NULL;
END $$;
-- +goose StatementEnd

-- History partitions from today to the longest default retention and a
-- margin; maintenance keeps the horizon ahead from now on.
SELECT ax.history_make_partitions(now() + interval '33 days');

-- Runs that ended before this upgrade move to history now. They are kept
-- at least a day after the upgrade, whatever their age, so that an
-- operator can export them before the first drop.
SELECT ax.history_move(ARRAY(SELECT id FROM ax.execution WHERE finished_at IS NOT NULL),
                       now() + interval '1 day');

-- The views that count runs read both tables.
DROP VIEW ax.executions_by_state;
CREATE VIEW ax.all_executions AS
    SELECT *, NULL::timestamptz AS retain_until FROM ax.execution
    UNION ALL
    SELECT * FROM ax.execution_history;
CREATE VIEW ax.all_tasks AS
    SELECT *, NULL::timestamptz AS retain_until FROM ax.task
    UNION ALL
    SELECT * FROM ax.task_history;
CREATE VIEW ax.executions_by_state AS
SELECT state,
       count(*) FILTER (WHERE fired_at >= date_trunc('day', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC') AS today,
       count(*) AS total
FROM ax.all_executions
GROUP BY state
ORDER BY state;

-- +goose Down
-- History goes back into the live tables, as before this migration.
DROP VIEW ax.executions_by_state;
DROP VIEW ax.all_tasks;
DROP VIEW ax.all_executions;
INSERT INTO ax.execution SELECT (jsonb_populate_record(NULL::ax.execution, to_jsonb(h))).* FROM ax.execution_history h;
INSERT INTO ax.task SELECT (jsonb_populate_record(NULL::ax.task, to_jsonb(h))).* FROM ax.task_history h;
DROP TABLE ax.task_history;
DROP TABLE ax.execution_history;
DROP FUNCTION ax.history_move(uuid[], timestamptz);
DROP FUNCTION ax.history_define_move();
DROP FUNCTION ax.history_make_partitions(timestamptz);
DROP FUNCTION ax.history_set_width(interval);
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION ax.execution_ended() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    notified integer;
BEGIN
    WITH ended AS (
        SELECT n.id, n.job_id
        FROM new_rows n JOIN old_rows o ON o.id = n.id
        WHERE o.state IN ('pending', 'running') AND n.state NOT IN ('pending', 'running')
    ), outbox AS (
        INSERT INTO ax.callback (execution_id, job_id)
        SELECT e.id, e.job_id FROM ended e JOIN ax.job j ON j.id = e.job_id
        WHERE j.callback_url IS NOT NULL
        ON CONFLICT (execution_id) DO NOTHING
    ), notes AS (
        SELECT pg_notify('ax_execution_ended', string_agg(id::text, ','))
        FROM (SELECT id, (row_number() OVER () - 1) / 200 AS chunk FROM ended) c
        GROUP BY chunk
    )
    SELECT count(*) INTO notified FROM notes;
    RETURN NULL;
END $$;
-- +goose StatementEnd
DELETE FROM ax.callback c WHERE NOT EXISTS (SELECT 1 FROM ax.execution e WHERE e.id = c.execution_id);
DELETE FROM ax.task t WHERE NOT EXISTS (SELECT 1 FROM ax.execution e WHERE e.id = t.execution_id);
ALTER TABLE ax.task ADD CONSTRAINT task_execution_id_fkey
    FOREIGN KEY (execution_id) REFERENCES ax.execution (id) ON DELETE CASCADE;
ALTER TABLE ax.callback ADD CONSTRAINT callback_execution_id_fkey
    FOREIGN KEY (execution_id) REFERENCES ax.execution (id) ON DELETE CASCADE;
DROP TABLE ax.history_drop;
ALTER TABLE ax.job DROP CONSTRAINT job_history_retention_range,
    DROP COLUMN history_retention_seconds, DROP COLUMN history_failed_retention_seconds;
DROP TABLE ax.history_setting;
CREATE VIEW ax.executions_by_state AS
SELECT state,
       count(*) FILTER (WHERE fired_at >= date_trunc('day', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC') AS today,
       count(*) AS total
FROM ax.execution
GROUP BY state
ORDER BY state;
