-- +goose Up

-- A delayed run is one run of a job at a later time ("close this order in
-- 30 minutes"): one row per business event, millions of them, not a job
-- each. Its id is the id of the execution it becomes; the trigger loop
-- fires it (deleting the row in the same transaction) when run_at comes,
-- under the job's misfire and concurrency policies. A run that comes due
-- while its job is paused is held (held = true) until the job resumes.
-- A cancelled run keeps its row (cancelled_at, cancel_reason) for a day,
-- so its id still answers; maintenance removes it then.
ALTER TYPE ax.execution_cause ADD VALUE IF NOT EXISTS 'delayed';

CREATE TABLE ax.delayed_run (
    id uuid PRIMARY KEY,
    job_id uuid NOT NULL REFERENCES ax.job (id) ON DELETE CASCADE,
    run_at timestamptz NOT NULL,
    params jsonb,
    priority integer,
    traceparent text NOT NULL DEFAULT '',
    held boolean NOT NULL DEFAULT false,
    cancelled_at timestamptz,
    cancel_reason text,
    created_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT delayed_run_params_is_object CHECK (params IS NULL OR jsonb_typeof(params) = 'object'),
    CONSTRAINT delayed_run_cancel_has_reason CHECK ((cancelled_at IS NULL) = (cancel_reason IS NULL))
) WITH (fillfactor = 90);

-- The trigger loop reads the earliest pending runs: cost grows with the
-- runs due, not with those waiting.
CREATE INDEX delayed_run_due_idx ON ax.delayed_run (run_at) WHERE cancelled_at IS NULL AND NOT held;
-- A job's runs: listing, release on resume, and the cascade on delete.
CREATE INDEX delayed_run_job_idx ON ax.delayed_run (job_id, run_at);

-- upcoming_hour lists delayed runs too (delayed_run_id set on their rows).
CREATE OR REPLACE VIEW ax.upcoming_hour AS
SELECT * FROM (
    SELECT j.id AS job_id, j.group_name, j.name, j.trigger_kind, j.cron_expr, j.timezone, t.next_fire_at,
           NULL::uuid AS delayed_run_id
    FROM ax.trigger t
    JOIN ax.job j ON j.id = t.job_id
    WHERE t.next_fire_at > now() AND t.next_fire_at <= now() + interval '1 hour' AND NOT t.paused
    UNION ALL
    SELECT j.id, j.group_name, j.name, j.trigger_kind, j.cron_expr, j.timezone, d.run_at, d.id
    FROM ax.delayed_run d
    JOIN ax.job j ON j.id = d.job_id
    JOIN ax.trigger t ON t.job_id = d.job_id
    WHERE d.run_at > now() AND d.run_at <= now() + interval '1 hour' AND d.cancelled_at IS NULL AND NOT t.paused
) u
ORDER BY next_fire_at;

-- +goose Down

DROP VIEW ax.upcoming_hour;
CREATE VIEW ax.upcoming_hour AS
SELECT j.id AS job_id, j.group_name, j.name, j.trigger_kind, j.cron_expr, j.timezone, t.next_fire_at
FROM ax.trigger t
JOIN ax.job j ON j.id = t.job_id
WHERE t.next_fire_at > now() AND t.next_fire_at <= now() + interval '1 hour' AND NOT t.paused
ORDER BY t.next_fire_at;
DROP TABLE ax.delayed_run;
-- An enum value cannot be dropped: executions caused 'delayed' stay readable.
