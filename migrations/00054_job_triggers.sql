-- +goose Up

-- Several triggers per job (issue #41): ax.job.triggers holds the whole
-- list when a job has more than one (weekdays at 09:00 in Berlin and
-- weekends at 12:00); the job's trigger columns keep the first one, so
-- everything that reads a job's kind still sees cron or interval. NULL:
-- the job has the one trigger of its columns, as before.
--
-- The job keeps one ax.trigger row, whose next_fire_at is the earliest
-- next tick over all its triggers: the trigger loop's claim, its index
-- and the exactly-once index on (job_id, scheduled_for) stay as they are,
-- and two triggers ticking at one instant are one tick of the job, so one
-- run.
ALTER TABLE ax.job
    ADD COLUMN triggers jsonb,
    ADD CONSTRAINT job_triggers_list CHECK (
        triggers IS NULL OR (jsonb_typeof(triggers) = 'array' AND jsonb_array_length(triggers) BETWEEN 2 AND 16));

-- trigger_index: which of the job's triggers fired a scheduled run (its
-- position in the list; 0 for a job with one trigger). NULL for runs not
-- fired by a trigger (manual, delayed, backfill) and for runs fired
-- before this migration.
ALTER TABLE ax.execution ADD COLUMN trigger_index smallint;
ALTER TABLE ax.execution_history ADD COLUMN trigger_index smallint;

-- all_executions lists both tables' columns by name, the live table's
-- then retain_until: the history table has retain_until before the new
-- column.
DROP VIEW ax.executions_by_state;
DROP VIEW ax.all_executions;
CREATE VIEW ax.all_executions AS
    SELECT id, job_id, cause, scheduled_for, fired_at, misfired, state, params, shard_count, priority,
           started_at, finished_at, cancel_requested_at, cancel_reason, created_at, updated_at, error,
           traceparent, trigger_index, NULL::timestamptz AS retain_until
    FROM ax.execution
    UNION ALL
    SELECT id, job_id, cause, scheduled_for, fired_at, misfired, state, params, shard_count, priority,
           started_at, finished_at, cancel_requested_at, cancel_reason, created_at, updated_at, error,
           traceparent, trigger_index, retain_until
    FROM ax.execution_history;
CREATE VIEW ax.executions_by_state AS
SELECT state,
       count(*) FILTER (WHERE fired_at >= date_trunc('day', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC') AS today,
       count(*) AS total
FROM ax.all_executions
GROUP BY state
ORDER BY state;

-- The moves into history copy the execution's columns by name: define
-- them again with the new one.
SELECT ax.history_define_move();

-- +goose Down

DROP VIEW ax.executions_by_state;
DROP VIEW ax.all_executions;
ALTER TABLE ax.execution_history DROP COLUMN trigger_index;
ALTER TABLE ax.execution DROP COLUMN trigger_index;
CREATE VIEW ax.all_executions AS
    SELECT *, NULL::timestamptz AS retain_until FROM ax.execution
    UNION ALL
    SELECT * FROM ax.execution_history;
CREATE VIEW ax.executions_by_state AS
SELECT state,
       count(*) FILTER (WHERE fired_at >= date_trunc('day', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC') AS today,
       count(*) AS total
FROM ax.all_executions
GROUP BY state
ORDER BY state;
SELECT ax.history_define_move();
ALTER TABLE ax.job DROP CONSTRAINT job_triggers_list, DROP COLUMN triggers;
