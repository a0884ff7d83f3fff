-- +goose Up
-- A job whose fire fails (its tasks cannot be made, its route key or plan
-- errs) is set aside: the trigger loop stops firing it and records why,
-- so one broken definition never stops the other jobs' fires. Updating
-- the job (PUT) clears it.
ALTER TABLE ax.trigger
    ADD COLUMN set_aside_at timestamptz,
    ADD COLUMN set_aside_reason text,
    ADD CONSTRAINT trigger_set_aside_has_reason CHECK ((set_aside_at IS NULL) = (set_aside_reason IS NULL));

-- The time wheel leaves set-aside triggers out, as it does paused ones.
DROP INDEX ax.trigger_due_idx;
CREATE INDEX trigger_due_idx ON ax.trigger (next_fire_at)
    WHERE next_fire_at IS NOT NULL AND NOT paused AND set_aside_at IS NULL;

-- The set-aside count (a gauge on every scrape) reads only those rows.
CREATE INDEX trigger_set_aside_idx ON ax.trigger (set_aside_at) WHERE set_aside_at IS NOT NULL;

-- What is due now leaves them out too.
CREATE OR REPLACE VIEW ax.due_now AS
SELECT j.id AS job_id, j.group_name, j.name, t.next_fire_at, now() - t.next_fire_at AS overdue_by
FROM ax.trigger t JOIN ax.job j ON j.id = t.job_id
WHERE t.next_fire_at <= now() AND NOT t.paused AND t.set_aside_at IS NULL
ORDER BY t.next_fire_at;

-- What the trigger loop set aside, and why.
CREATE VIEW ax.set_aside_jobs AS
SELECT j.id AS job_id, j.group_name, j.name, t.set_aside_at, t.set_aside_reason, t.next_fire_at
FROM ax.trigger t JOIN ax.job j ON j.id = t.job_id
WHERE t.set_aside_at IS NOT NULL
ORDER BY t.set_aside_at DESC;

-- +goose Down
DROP VIEW ax.set_aside_jobs;
DROP INDEX ax.trigger_set_aside_idx;
CREATE OR REPLACE VIEW ax.due_now AS
SELECT j.id AS job_id, j.group_name, j.name, t.next_fire_at, now() - t.next_fire_at AS overdue_by
FROM ax.trigger t JOIN ax.job j ON j.id = t.job_id
WHERE t.next_fire_at <= now() AND NOT t.paused
ORDER BY t.next_fire_at;
DROP INDEX ax.trigger_due_idx;
CREATE INDEX trigger_due_idx ON ax.trigger (next_fire_at)
    WHERE next_fire_at IS NOT NULL AND NOT paused;
ALTER TABLE ax.trigger
    DROP CONSTRAINT trigger_set_aside_has_reason,
    DROP COLUMN set_aside_reason,
    DROP COLUMN set_aside_at;
