-- +goose Up
-- Executions (one per fire), their tasks (one per shard) and the fires that
-- did not happen, with why. See execution_states.md for the state diagram.

CREATE TYPE ax.execution_cause AS ENUM ('schedule', 'catch_up', 'manual');
CREATE TYPE ax.execution_state AS ENUM (
    'pending', 'running', 'succeeded', 'failed', 'timed_out', 'cancelled');
CREATE TYPE ax.task_state AS ENUM (
    'pending', 'leased', 'running', 'succeeded', 'failed', 'timed_out', 'cancelled');
CREATE TYPE ax.skip_reason AS ENUM ('misfire', 'overlap', 'paused', 'dst_gap');

-- execution is one fire of a job. scheduled_for is the tick it serves (for
-- manual fires, when the trigger call was accepted); fired_at is when a
-- replica created it, so fired_at - scheduled_for is the fire lag.
CREATE TABLE ax.execution (
    id                  uuid PRIMARY KEY,
    job_id              uuid NOT NULL REFERENCES ax.job (id) ON DELETE CASCADE,
    cause               ax.execution_cause NOT NULL,
    scheduled_for       timestamptz NOT NULL,
    fired_at            timestamptz NOT NULL DEFAULT now(),
    misfired            boolean NOT NULL DEFAULT false,
    state               ax.execution_state NOT NULL DEFAULT 'pending',
    params              jsonb NOT NULL DEFAULT '{}',
    shard_count         integer NOT NULL,
    priority            integer NOT NULL,
    started_at          timestamptz,
    finished_at         timestamptz,
    cancel_requested_at timestamptz,
    cancel_reason       text,
    created_at          timestamptz NOT NULL DEFAULT now(),
    updated_at          timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT execution_shard_count_range CHECK (shard_count BETWEEN 1 AND 10000),
    CONSTRAINT execution_params_is_object CHECK (jsonb_typeof(params) = 'object'),
    CONSTRAINT execution_finished_when_final CHECK (
        (state IN ('pending', 'running')) = (finished_at IS NULL))
);

-- A scheduled tick fires once, whatever races between replicas.
CREATE UNIQUE INDEX execution_tick_once_idx ON ax.execution (job_id, scheduled_for)
    WHERE cause IN ('schedule', 'catch_up');
CREATE INDEX execution_job_idx ON ax.execution (job_id, id DESC);
CREATE INDEX execution_unfinished_idx ON ax.execution (job_id)
    WHERE state IN ('pending', 'running');
CREATE INDEX execution_scheduled_idx ON ax.execution (scheduled_for);

-- task is one shard of an execution: the unit an agent leases.
CREATE TABLE ax.task (
    id                  uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    execution_id        uuid NOT NULL REFERENCES ax.execution (id) ON DELETE CASCADE,
    job_id              uuid NOT NULL,
    shard_index         integer NOT NULL,
    shard_total         integer NOT NULL,
    shard_param         text NOT NULL DEFAULT '',
    state               ax.task_state NOT NULL DEFAULT 'pending',
    priority            integer NOT NULL,
    attempt             integer NOT NULL DEFAULT 1,
    max_attempts        integer NOT NULL,
    timeout_seconds     integer NOT NULL,
    not_before          timestamptz NOT NULL DEFAULT now(),
    started_at          timestamptz,
    finished_at         timestamptz,
    cancel_requested_at timestamptz,
    result              jsonb,
    error               text,
    created_at          timestamptz NOT NULL DEFAULT now(),
    updated_at          timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT task_shard_once UNIQUE (execution_id, shard_index),
    CONSTRAINT task_shard_index_range CHECK (shard_index >= 0 AND shard_index < shard_total),
    CONSTRAINT task_attempt_range CHECK (attempt >= 1 AND attempt <= max_attempts)
);

-- Only claimable tasks are indexed for leasing: the index stays as small as
-- the backlog, not the history.
CREATE INDEX task_pending_idx ON ax.task (priority DESC, created_at)
    WHERE state = 'pending';
ALTER TABLE ax.task SET (fillfactor = 80,
    autovacuum_vacuum_scale_factor = 0.02, autovacuum_vacuum_threshold = 1000);

-- skipped_fire records ticks that did not fire and why, so "why didn't it
-- run at 03:00?" has an answer. A long outage is one row for a range of
-- ticks (tick_count is null when the range was too long to count).
CREATE TABLE ax.skipped_fire (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job_id          uuid NOT NULL REFERENCES ax.job (id) ON DELETE CASCADE,
    reason          ax.skip_reason NOT NULL,
    first_tick      timestamptz NOT NULL,
    last_tick       timestamptz NOT NULL,
    tick_count      integer,
    detail          text NOT NULL DEFAULT '',
    recorded_at     timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT skipped_fire_range CHECK (first_tick <= last_tick),
    CONSTRAINT skipped_fire_count CHECK (tick_count IS NULL OR tick_count >= 1)
);
CREATE INDEX skipped_fire_job_idx ON ax.skipped_fire (job_id, first_tick);
CREATE INDEX skipped_fire_recorded_idx ON ax.skipped_fire (recorded_at);

ALTER TABLE ax.trigger ADD COLUMN last_execution_id uuid;

-- Operator views: the first questions answered with one SELECT.

-- What is due now (and not paused), oldest first.
CREATE VIEW ax.due_now AS
SELECT j.id AS job_id, j.group_name, j.name, t.next_fire_at, now() - t.next_fire_at AS overdue_by
FROM ax.trigger t JOIN ax.job j ON j.id = t.job_id
WHERE t.next_fire_at <= now() AND NOT t.paused
ORDER BY t.next_fire_at;

-- What fires within the next hour.
CREATE VIEW ax.upcoming_hour AS
SELECT j.id AS job_id, j.group_name, j.name, j.trigger_kind, j.cron_expr, j.timezone, t.next_fire_at
FROM ax.trigger t JOIN ax.job j ON j.id = t.job_id
WHERE t.next_fire_at > now() AND t.next_fire_at <= now() + interval '1 hour' AND NOT t.paused
ORDER BY t.next_fire_at;

-- Ticks skipped since midnight UTC, with why.
CREATE VIEW ax.skipped_today AS
SELECT j.group_name, j.name, s.reason, s.first_tick, s.last_tick, s.tick_count, s.detail, s.recorded_at
FROM ax.skipped_fire s JOIN ax.job j ON j.id = s.job_id
WHERE s.recorded_at >= date_trunc('day', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'
ORDER BY s.recorded_at DESC;

-- Executions by state, today and in all.
CREATE VIEW ax.executions_by_state AS
SELECT state,
       count(*) FILTER (WHERE fired_at >= date_trunc('day', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC') AS today,
       count(*) AS total
FROM ax.execution
GROUP BY state
ORDER BY state;

-- +goose Down
DROP VIEW ax.executions_by_state;
DROP VIEW ax.skipped_today;
DROP VIEW ax.upcoming_hour;
DROP VIEW ax.due_now;
ALTER TABLE ax.trigger DROP COLUMN last_execution_id;
DROP TABLE ax.skipped_fire;
DROP TABLE ax.task;
DROP TABLE ax.execution;
DROP TYPE ax.skip_reason;
DROP TYPE ax.task_state;
DROP TYPE ax.execution_state;
DROP TYPE ax.execution_cause;
