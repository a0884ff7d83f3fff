-- +goose Up

-- Re-runs and backfills (issue #40).
--
-- A re-run is a new execution (cause rerun) of an earlier one's job, with
-- its params and, for the shards chosen, its shard indexes and params. The
-- link lives here rather than as a column of ax.execution: runs move to
-- partitioned history through functions that list every column, and a
-- link is read only when someone asks. (rerun_of, request_key) is unique,
-- so a retried request (same key) finds the run it made and never doubles,
-- whatever replica serves the retry.
CREATE TABLE ax.execution_rerun (
    execution_id uuid PRIMARY KEY,
    rerun_of     uuid NOT NULL,
    request_key  text NOT NULL,
    shards       text NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT execution_rerun_shards_known CHECK (shards IN ('all', 'failed')),
    CONSTRAINT execution_rerun_request_key_length CHECK (length(request_key) BETWEEN 1 AND 255),
    CONSTRAINT execution_rerun_once_per_request UNIQUE (rerun_of, request_key)
);

-- A backfill is one row, whatever the number of ticks: the ticks of the
-- job's trigger in [range_from, range_to) are computed as they are
-- released (next_tick is the cursor: ticks before it were released or
-- found run already), at most max_concurrent runs at a time.
CREATE TABLE ax.backfill (
    id             uuid PRIMARY KEY DEFAULT ax.uuid_v7(),
    job_id         uuid NOT NULL REFERENCES ax.job (id) ON DELETE CASCADE,
    range_from     timestamptz NOT NULL,
    range_to       timestamptz NOT NULL,
    max_concurrent integer NOT NULL DEFAULT 1,
    overlap        text NOT NULL DEFAULT 'allow',
    state          text NOT NULL DEFAULT 'running',
    next_tick      timestamptz NOT NULL,
    ticks_total    integer NOT NULL,
    ticks_created  integer NOT NULL DEFAULT 0,
    ticks_existing integer NOT NULL DEFAULT 0,
    request_key    text,
    created_at     timestamptz NOT NULL DEFAULT now(),
    updated_at     timestamptz NOT NULL DEFAULT now(),
    finished_at    timestamptz,
    CONSTRAINT backfill_range_order CHECK (range_from < range_to),
    CONSTRAINT backfill_max_concurrent_range CHECK (max_concurrent BETWEEN 1 AND 1000),
    CONSTRAINT backfill_overlap_known CHECK (overlap IN ('allow', 'forbid')),
    CONSTRAINT backfill_state_known CHECK (state IN ('running', 'finished', 'cancelled')),
    CONSTRAINT backfill_finished_when_final CHECK ((state = 'running') = (finished_at IS NULL)),
    -- (Not bounded by ticks_total: a job whose schedule changes meanwhile
    -- goes on with its new ticks.)
    CONSTRAINT backfill_counts CHECK (ticks_total >= 0 AND ticks_created >= 0 AND ticks_existing >= 0),
    CONSTRAINT backfill_request_key_length CHECK (length(request_key) BETWEEN 1 AND 255)
);
-- Releasers look for running backfills only.
CREATE INDEX backfill_running_idx ON ax.backfill (id) WHERE state = 'running';
CREATE INDEX backfill_job_idx ON ax.backfill (job_id, id DESC);
-- A retried create call (same Idempotency-Key for the same job) finds the first.
CREATE UNIQUE INDEX backfill_request_once_idx ON ax.backfill (job_id, request_key) WHERE request_key IS NOT NULL;

-- backfill_run links a backfill to the runs it made, one per tick.
CREATE TABLE ax.backfill_run (
    execution_id uuid PRIMARY KEY,
    backfill_id  uuid NOT NULL REFERENCES ax.backfill (id) ON DELETE CASCADE,
    tick         timestamptz NOT NULL
);
CREATE INDEX backfill_run_backfill_idx ON ax.backfill_run (backfill_id, tick);

-- A backfilled tick holds the same place as a scheduled one: a tick run by
-- the schedule is not run again by a backfill, a backfilled one is not
-- fired again by the schedule, and two backfills of one range add one run
-- per tick.
DROP INDEX ax.execution_tick_once_idx;
CREATE UNIQUE INDEX execution_tick_once_idx ON ax.execution (job_id, scheduled_for)
    WHERE cause IN ('schedule', 'catch_up', 'backfill');

-- +goose Down

DROP INDEX ax.execution_tick_once_idx;
CREATE UNIQUE INDEX execution_tick_once_idx ON ax.execution (job_id, scheduled_for)
    WHERE cause IN ('schedule', 'catch_up');
DROP TABLE ax.backfill_run;
DROP TABLE ax.backfill;
DROP TABLE ax.execution_rerun;
