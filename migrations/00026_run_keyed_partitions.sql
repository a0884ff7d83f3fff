-- +goose Up

-- Events, callbacks, callback attempts and skip records in partitions
-- (issue #14; README "History and retention"): they grew forever.
--
-- ax.task_event, ax.callback and ax.callback_attempt are partitioned by
-- RANGE (execution_id). Execution ids are UUIDv7 (the first 48 bits are
-- the unix milliseconds of the fire), so a slot of time is a range of ids:
-- a run's rows lie in one partition, and a read of one run's events or
-- attempts prunes to it. A partition is dropped once no execution with an
-- id in its range remains, live or in history: a run in flight, or one
-- kept longer, keeps its events, and those of its neighbours.
--
-- ax.skipped_fire is partitioned by RANGE (recorded_at), dropped when its
-- range is older than the longest server retention.
--
-- Each table has, besides its slots (<table>_pYYYYMMDDtHHMMSS, the history
-- partition width wide):
--   <table>_p_low   FROM (MINVALUE): what an upgrade holds from before the
--                   first slot; dropped by the same rule as a slot.
--   <table>_p_spill TO (MAXVALUE): ids (or times) past the slots made.
--                   Never empty of range, so no insert ever fails for a
--                   missing partition: when maintenance lags, the rows of
--                   the lag land here, and the next pass makes the spill
--                   itself the partition of that range. Ids not made by ax
--                   (UUIDv4: random first bits, mostly "future") land here
--                   too.
-- No DEFAULT partition: a table with one cannot DETACH ... CONCURRENTLY,
-- and each ATTACH would scan it.

-- uuid_v7_floor is the lowest UUID of the millisecond of p_at: ids of
-- runs fired from p_at on are at or above it.
CREATE FUNCTION ax.uuid_v7_floor(p_at timestamptz) RETURNS uuid
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT (lpad(to_hex(floor(extract(epoch FROM p_at) * 1000)::bigint), 12, '0') || '00000000000000000000')::uuid
$$;

-- uuid_v7_time is the instant a UUIDv7 carries (exact to the millisecond,
-- so uuid_v7_floor(uuid_v7_time(x)) = x for a bound).
CREATE FUNCTION ax.uuid_v7_time(p_id uuid) RETURNS timestamptz
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT timestamptz 'epoch'
           + ('x' || lpad(left(replace(p_id::text, '-', ''), 12), 16, '0'))::bit(64)::bigint * interval '1 millisecond'
$$;

-- uuid_v7 makes a UUIDv7 (PG15 has no uuidv7()): the ids of runs inserted
-- by SQL without one then fall in the slot of their time, as ax's own do.
CREATE FUNCTION ax.uuid_v7() RETURNS uuid
LANGUAGE sql VOLATILE PARALLEL SAFE AS $$
    SELECT encode(set_bit(set_bit(overlay(uuid_send(gen_random_uuid())
               PLACING substring(int8send(floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint) FROM 3)
               FROM 1 FOR 6), 52, 1), 53, 1), 'hex')::uuid
$$;
ALTER TABLE ax.execution ALTER COLUMN id SET DEFAULT ax.uuid_v7();
ALTER TABLE ax.execution_history ALTER COLUMN id SET DEFAULT ax.uuid_v7();

-- retention_bound is the partition bound of p_table at p_at, as SQL.
CREATE FUNCTION ax.retention_bound(p_table text, p_at timestamptz) RETURNS text
LANGUAGE sql STABLE AS $$
    SELECT CASE WHEN p_table = 'skipped_fire' THEN quote_literal(p_at::text)
                ELSE quote_literal(ax.uuid_v7_floor(p_at)::text) END
$$;

-- retention_spill_from is the lower bound of p_table's spill: the horizon
-- of the slots made.
-- +goose StatementBegin
CREATE FUNCTION ax.retention_spill_from(p_table text) RETURNS timestamptz
LANGUAGE plpgsql STABLE AS $$
DECLARE
    b text;
BEGIN
    SELECT (regexp_match(pg_get_expr(c.relpartbound, c.oid), 'FROM \(''([^'']+)''\)'))[1] INTO b
    FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE n.nspname = 'ax' AND c.relname = p_table || '_p_spill' AND c.relispartition;
    IF b IS NULL THEN
        RAISE EXCEPTION 'ax.% has no spill partition', p_table;
    END IF;
    RETURN CASE WHEN p_table = 'skipped_fire' THEN b::timestamptz ELSE ax.uuid_v7_time(b::uuid) END;
END $$;
-- +goose StatementEnd

-- retention_extend makes p_table's slots from its horizon up to two
-- partition widths past p_now, cutting them off the spill; returns how
-- many it made. Called by maintenance (lock waits bounded by the caller's
-- lock_timeout). The new tables are made apart and attached; the spill is
-- detached and attached again above them in the same short transaction
-- (a range partition's bounds cannot move): the one moment, once per
-- width, that takes ACCESS EXCLUSIVE on the table. A CHECK validated
-- first spares the attach a scan.
--
-- When the spill holds rows below the new horizon (maintenance lagged,
-- or ids not made by ax), it becomes the partition of [horizon, new
-- horizon) and a new empty spill is made above; its rows past the new
-- horizon (ids not made by ax) move to the new spill. When more than 100
-- slots are missing (maintenance stopped for long, or a narrow width),
-- one partition covers all but the last three: no gap (a run fired there
-- may still get events), and not thousands of tables.
-- +goose StatementBegin
CREATE FUNCTION ax.retention_extend(p_table text, p_now timestamptz) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    width  interval;
    key    text := CASE WHEN p_table = 'skipped_fire' THEN 'recorded_at' ELSE 'execution_id' END;
    spill  text := p_table || '_p_spill';
    horizon timestamptz;
    cut    timestamptz;
    lo     timestamptz;
    hi     timestamptz;
    name   text;
    names  text[] := '{}';
    los    timestamptz[] := '{}';
    his    timestamptz[] := '{}';
    lagged boolean;
BEGIN
    -- One maker at a time (replicas starting together, maintenance): the
    -- second sees the horizon the first moved.
    SELECT partition_width INTO width FROM ax.history_setting FOR UPDATE;
    horizon := ax.retention_spill_from(p_table);
    cut := horizon;
    WHILE cut < p_now + 2 * width LOOP
        cut := cut + width;
    END LOOP;
    IF cut = horizon THEN
        RETURN 0;
    END IF;
    EXECUTE format('SELECT EXISTS (SELECT 1 FROM ax.%I WHERE %I < %s)', spill, key, ax.retention_bound(p_table, cut))
    INTO lagged;
    IF lagged THEN
        name := p_table || '_p' || to_char(horizon AT TIME ZONE 'UTC', 'YYYYMMDD"t"HH24MISS');
        EXECUTE format('CREATE TABLE ax.%I (LIKE ax.%I INCLUDING DEFAULTS INCLUDING CONSTRAINTS)', p_table || '_p_next', p_table);
        EXECUTE format('ALTER TABLE ax.%I DETACH PARTITION ax.%I', p_table, spill);
        EXECUTE format('INSERT INTO ax.%I SELECT * FROM ax.%I WHERE %I >= %s',
                       p_table || '_p_next', spill, key, ax.retention_bound(p_table, cut));
        EXECUTE format('DELETE FROM ax.%I WHERE %I >= %s', spill, key, ax.retention_bound(p_table, cut));
        EXECUTE format('ALTER TABLE ax.%I RENAME TO %I', spill, name);
        EXECUTE format('ALTER TABLE ax.%I ATTACH PARTITION ax.%I FOR VALUES FROM (%s) TO (%s)',
                       p_table, name, ax.retention_bound(p_table, horizon), ax.retention_bound(p_table, cut));
        EXECUTE format('ALTER TABLE ax.%I RENAME TO %I', p_table || '_p_next', spill);
        EXECUTE format('ALTER TABLE ax.%I ATTACH PARTITION ax.%I FOR VALUES FROM (%s) TO (MAXVALUE)',
                       p_table, spill, ax.retention_bound(p_table, cut));
        RETURN 1;
    END IF;
    lo := horizon;
    WHILE lo < cut LOOP
        hi := lo + width;
        -- A long passed stretch in one partition.
        IF lo = horizon AND cut - horizon > 100 * width THEN
            hi := cut - 3 * width;
        END IF;
        name := p_table || '_p' || to_char(lo AT TIME ZONE 'UTC', 'YYYYMMDD"t"HH24MISS');
        EXECUTE format('CREATE TABLE ax.%I (LIKE ax.%I INCLUDING DEFAULTS INCLUDING CONSTRAINTS)', name, p_table);
        names := names || name;
        los := los || lo;
        his := his || hi;
        lo := hi;
    END LOOP;
    EXECUTE format('ALTER TABLE ax.%I ADD CONSTRAINT %I CHECK (%I >= %s)',
                   spill, spill || '_from', key, ax.retention_bound(p_table, cut));
    EXECUTE format('ALTER TABLE ax.%I DETACH PARTITION ax.%I', p_table, spill);
    FOR i IN 1 .. cardinality(names) LOOP
        EXECUTE format('ALTER TABLE ax.%I ATTACH PARTITION ax.%I FOR VALUES FROM (%s) TO (%s)',
                       p_table, names[i], ax.retention_bound(p_table, los[i]), ax.retention_bound(p_table, his[i]));
    END LOOP;
    EXECUTE format('ALTER TABLE ax.%I ATTACH PARTITION ax.%I FOR VALUES FROM (%s) TO (MAXVALUE)',
                   p_table, spill, ax.retention_bound(p_table, cut));
    EXECUTE format('ALTER TABLE ax.%I DROP CONSTRAINT %I', spill, spill || '_from');
    RETURN cardinality(names);
END $$;
-- +goose StatementEnd

DROP VIEW ax.callbacks_failed;
DROP VIEW ax.skipped_today;

-- The tables as they were step aside (their identity sequences become
-- plain ones of the same name: a partitioned table has no identity
-- column); the partitioned ones take their names, columns and checks,
-- and their rows.
-- +goose StatementBegin
DO $$
DECLARE
    t text;
    v bigint;
BEGIN
    FOREACH t IN ARRAY ARRAY['task_event', 'callback_attempt', 'skipped_fire'] LOOP
        EXECUTE format('SELECT CASE WHEN is_called THEN last_value ELSE last_value - 1 END FROM ax.%I', t || '_id_seq') INTO v;
        EXECUTE format('ALTER TABLE ax.%I ALTER COLUMN id DROP IDENTITY', t);
        EXECUTE format('CREATE SEQUENCE ax.%I', t || '_id_seq');
        IF v > 0 THEN
            PERFORM setval(format('ax.%I', t || '_id_seq'), v);
        END IF;
    END LOOP;
END $$;
-- +goose StatementEnd
ALTER TABLE ax.callback_attempt DROP CONSTRAINT callback_attempt_execution_id_fkey;
ALTER TABLE ax.skipped_fire DROP CONSTRAINT skipped_fire_job_id_fkey;
ALTER TABLE ax.task_event DROP CONSTRAINT task_event_pkey;
ALTER TABLE ax.callback DROP CONSTRAINT callback_pkey;
ALTER TABLE ax.callback_attempt DROP CONSTRAINT callback_attempt_pkey;
ALTER TABLE ax.skipped_fire DROP CONSTRAINT skipped_fire_pkey;
DROP INDEX ax.task_event_agent_idx, ax.task_event_execution_idx, ax.callback_failed_idx, ax.callback_unenqueued_idx,
    ax.callback_attempt_execution_idx, ax.skipped_fire_job_idx, ax.skipped_fire_recorded_idx;
ALTER TABLE ax.task_event RENAME TO task_event_unpartitioned;
ALTER TABLE ax.callback RENAME TO callback_unpartitioned;
ALTER TABLE ax.callback_attempt RENAME TO callback_attempt_unpartitioned;
ALTER TABLE ax.skipped_fire RENAME TO skipped_fire_unpartitioned;

-- Keys include the partition key (Postgres requires it); the primary keys
-- of events and attempts are the (execution_id, id) indexes their reads
-- use, so no index is added. Foreign keys: none between these and other
-- tables. A partitioned table's foreign key makes each DETACH and DROP of
-- a partition lock the referenced table (DROP: ACCESS EXCLUSIVE on ax.job
-- for skip records, which would hold up every fire) or check the
-- referencing one; attempts and their callback are dropped together by
-- the same rule, and JobDelete deletes a job's skip records.
CREATE TABLE ax.task_event (LIKE ax.task_event_unpartitioned INCLUDING DEFAULTS INCLUDING CONSTRAINTS)
    PARTITION BY RANGE (execution_id);
ALTER TABLE ax.task_event ALTER COLUMN id SET DEFAULT nextval('ax.task_event_id_seq'),
    ADD CONSTRAINT task_event_pkey PRIMARY KEY (execution_id, id);
ALTER SEQUENCE ax.task_event_id_seq OWNED BY ax.task_event.id;
CREATE INDEX task_event_agent_idx ON ax.task_event (agent_id, at) WHERE kind = 'state' AND agent_id IS NOT NULL;

CREATE TABLE ax.callback (LIKE ax.callback_unpartitioned INCLUDING DEFAULTS INCLUDING CONSTRAINTS)
    PARTITION BY RANGE (execution_id);
ALTER TABLE ax.callback ADD CONSTRAINT callback_pkey PRIMARY KEY (execution_id);
CREATE INDEX callback_failed_idx ON ax.callback (failed_at) WHERE state = 'callback_failed';
CREATE INDEX callback_unenqueued_idx ON ax.callback (created_at) WHERE enqueued_at IS NULL;

CREATE TABLE ax.callback_attempt (LIKE ax.callback_attempt_unpartitioned INCLUDING DEFAULTS INCLUDING CONSTRAINTS)
    PARTITION BY RANGE (execution_id);
ALTER TABLE ax.callback_attempt ALTER COLUMN id SET DEFAULT nextval('ax.callback_attempt_id_seq'),
    ADD CONSTRAINT callback_attempt_pkey PRIMARY KEY (execution_id, id);
ALTER SEQUENCE ax.callback_attempt_id_seq OWNED BY ax.callback_attempt.id;

CREATE TABLE ax.skipped_fire (LIKE ax.skipped_fire_unpartitioned INCLUDING DEFAULTS INCLUDING CONSTRAINTS)
    PARTITION BY RANGE (recorded_at);
ALTER TABLE ax.skipped_fire ALTER COLUMN id SET DEFAULT nextval('ax.skipped_fire_id_seq'),
    ADD CONSTRAINT skipped_fire_pkey PRIMARY KEY (recorded_at, id);
ALTER SEQUENCE ax.skipped_fire_id_seq OWNED BY ax.skipped_fire.id;
CREATE INDEX skipped_fire_job_idx ON ax.skipped_fire (job_id, first_tick);

-- The first slot: for the run-keyed tables the slot of the oldest run
-- fired by ax (a UUIDv7) that is still kept, but not before the longest
-- server retention; for skip records the current slot. What is older goes
-- to the low partition.
-- +goose StatementBegin
DO $$
DECLARE
    s     ax.history_setting;
    first timestamptz;
    t     text;
BEGIN
    SELECT * INTO s FROM ax.history_setting;
    SELECT min(ax.uuid_v7_time(id)) INTO first
    FROM (SELECT id FROM ax.execution UNION ALL SELECT id FROM ax.execution_history) e
    WHERE substr(id::text, 15, 1) = '7';
    first := date_bin(s.partition_width,
                      least(now(), greatest(coalesce(first, now()),
                                            now() - greatest(s.finished_retention, s.failed_retention))),
                      timestamptz '2000-01-01 00:00:00+00');
    FOREACH t IN ARRAY ARRAY['task_event', 'callback', 'callback_attempt', 'skipped_fire'] LOOP
        IF t = 'skipped_fire' THEN
            first := date_bin(s.partition_width, now(), timestamptz '2000-01-01 00:00:00+00');
        END IF;
        EXECUTE format('CREATE TABLE ax.%I PARTITION OF ax.%I FOR VALUES FROM (MINVALUE) TO (%s)',
                       t || '_p_low', t, ax.retention_bound(t, first));
        EXECUTE format('CREATE TABLE ax.%I PARTITION OF ax.%I FOR VALUES FROM (%s) TO (MAXVALUE)',
                       t || '_p_spill', t, ax.retention_bound(t, first));
        PERFORM ax.retention_extend(t, now());
    END LOOP;
END $$;
-- +goose StatementEnd

INSERT INTO ax.task_event SELECT * FROM ax.task_event_unpartitioned;
INSERT INTO ax.callback SELECT * FROM ax.callback_unpartitioned;
INSERT INTO ax.callback_attempt SELECT * FROM ax.callback_attempt_unpartitioned;
INSERT INTO ax.skipped_fire SELECT * FROM ax.skipped_fire_unpartitioned;
DROP TABLE ax.task_event_unpartitioned, ax.callback_unpartitioned, ax.callback_attempt_unpartitioned,
    ax.skipped_fire_unpartitioned;

CREATE VIEW ax.callbacks_failed AS
SELECT j.group_name, j.name, c.execution_id, c.attempts, c.last_status, c.last_error, c.failed_at
FROM ax.callback c
JOIN ax.job j ON j.id = c.job_id
WHERE c.state = 'callback_failed'
ORDER BY c.failed_at DESC;
CREATE VIEW ax.skipped_today AS
SELECT j.group_name, j.name, s.reason, s.first_tick, s.last_tick, s.tick_count, s.detail, s.recorded_at
FROM ax.skipped_fire s
JOIN ax.job j ON j.id = s.job_id
WHERE s.recorded_at >= date_trunc('day', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'
ORDER BY s.recorded_at DESC;

-- +goose Down
-- The tables as before 00026, with every row the partitions hold.
DROP VIEW ax.callbacks_failed;
DROP VIEW ax.skipped_today;
ALTER TABLE ax.task_event RENAME TO task_event_partitioned;
ALTER TABLE ax.callback RENAME TO callback_partitioned;
ALTER TABLE ax.callback_attempt RENAME TO callback_attempt_partitioned;
ALTER TABLE ax.skipped_fire RENAME TO skipped_fire_partitioned;
ALTER TABLE ax.task_event_partitioned DROP CONSTRAINT task_event_pkey;
ALTER TABLE ax.callback_partitioned DROP CONSTRAINT callback_pkey;
ALTER TABLE ax.callback_attempt_partitioned DROP CONSTRAINT callback_attempt_pkey;
ALTER TABLE ax.skipped_fire_partitioned DROP CONSTRAINT skipped_fire_pkey;
DROP INDEX ax.task_event_agent_idx, ax.callback_failed_idx, ax.callback_unenqueued_idx, ax.skipped_fire_job_idx;

CREATE TABLE ax.task_event (LIKE ax.task_event_partitioned INCLUDING DEFAULTS INCLUDING CONSTRAINTS);
CREATE TABLE ax.callback (LIKE ax.callback_partitioned INCLUDING DEFAULTS INCLUDING CONSTRAINTS);
CREATE TABLE ax.callback_attempt (LIKE ax.callback_attempt_partitioned INCLUDING DEFAULTS INCLUDING CONSTRAINTS);
CREATE TABLE ax.skipped_fire (LIKE ax.skipped_fire_partitioned INCLUDING DEFAULTS INCLUDING CONSTRAINTS);
INSERT INTO ax.task_event SELECT * FROM ax.task_event_partitioned;
INSERT INTO ax.callback SELECT * FROM ax.callback_partitioned;
INSERT INTO ax.callback_attempt SELECT * FROM ax.callback_attempt_partitioned;
INSERT INTO ax.skipped_fire SELECT * FROM ax.skipped_fire_partitioned;
-- +goose StatementBegin
DO $$
DECLARE
    t text;
    v bigint;
BEGIN
    FOREACH t IN ARRAY ARRAY['task_event', 'callback_attempt', 'skipped_fire'] LOOP
        EXECUTE format('SELECT CASE WHEN is_called THEN last_value ELSE last_value - 1 END FROM ax.%I', t || '_id_seq') INTO v;
        EXECUTE format('ALTER TABLE ax.%I ALTER COLUMN id DROP DEFAULT', t);
        EXECUTE format('DROP TABLE ax.%I', t || '_partitioned');
        EXECUTE format('ALTER TABLE ax.%I ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY', t);
        IF v > 0 THEN
            PERFORM setval(pg_get_serial_sequence(format('ax.%I', t), 'id'), v);
        END IF;
    END LOOP;
END $$;
-- +goose StatementEnd
DROP TABLE ax.callback_partitioned;
ALTER TABLE ax.task_event ADD CONSTRAINT task_event_pkey PRIMARY KEY (id);
CREATE INDEX task_event_execution_idx ON ax.task_event (execution_id, id);
CREATE INDEX task_event_agent_idx ON ax.task_event (agent_id, at) WHERE kind = 'state' AND agent_id IS NOT NULL;
ALTER TABLE ax.callback ADD CONSTRAINT callback_pkey PRIMARY KEY (execution_id);
CREATE INDEX callback_failed_idx ON ax.callback (failed_at) WHERE state = 'callback_failed';
CREATE INDEX callback_unenqueued_idx ON ax.callback (created_at) WHERE enqueued_at IS NULL;
ALTER TABLE ax.callback_attempt ADD CONSTRAINT callback_attempt_pkey PRIMARY KEY (id);
CREATE INDEX callback_attempt_execution_idx ON ax.callback_attempt (execution_id, id);
-- Attempts whose callback is gone cannot keep their key.
DELETE FROM ax.callback_attempt a WHERE NOT EXISTS (SELECT 1 FROM ax.callback c WHERE c.execution_id = a.execution_id);
ALTER TABLE ax.callback_attempt ADD CONSTRAINT callback_attempt_execution_id_fkey
    FOREIGN KEY (execution_id) REFERENCES ax.callback (execution_id) ON DELETE CASCADE;
ALTER TABLE ax.skipped_fire ADD CONSTRAINT skipped_fire_pkey PRIMARY KEY (id);
CREATE INDEX skipped_fire_job_idx ON ax.skipped_fire (job_id, first_tick);
CREATE INDEX skipped_fire_recorded_idx ON ax.skipped_fire (recorded_at);
DELETE FROM ax.skipped_fire s WHERE NOT EXISTS (SELECT 1 FROM ax.job j WHERE j.id = s.job_id);
ALTER TABLE ax.skipped_fire ADD CONSTRAINT skipped_fire_job_id_fkey
    FOREIGN KEY (job_id) REFERENCES ax.job (id) ON DELETE CASCADE;
CREATE VIEW ax.callbacks_failed AS
SELECT j.group_name, j.name, c.execution_id, c.attempts, c.last_status, c.last_error, c.failed_at
FROM ax.callback c
JOIN ax.job j ON j.id = c.job_id
WHERE c.state = 'callback_failed'
ORDER BY c.failed_at DESC;
CREATE VIEW ax.skipped_today AS
SELECT j.group_name, j.name, s.reason, s.first_tick, s.last_tick, s.tick_count, s.detail, s.recorded_at
FROM ax.skipped_fire s
JOIN ax.job j ON j.id = s.job_id
WHERE s.recorded_at >= date_trunc('day', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'
ORDER BY s.recorded_at DESC;
ALTER TABLE ax.execution_history ALTER COLUMN id SET DEFAULT gen_random_uuid();
ALTER TABLE ax.execution ALTER COLUMN id SET DEFAULT gen_random_uuid();
DROP FUNCTION ax.retention_extend(text, timestamptz);
DROP FUNCTION ax.retention_spill_from(text);
DROP FUNCTION ax.retention_bound(text, timestamptz);
DROP FUNCTION ax.uuid_v7();
DROP FUNCTION ax.uuid_v7_time(uuid);
DROP FUNCTION ax.uuid_v7_floor(timestamptz);
