-- QueuedRunHoldMany makes fresh runs of queue jobs wait (concurrency
-- policy queue): one waiting row each, behind the job's newest other
-- unfinished run, and their tasks held (not_before = @hold) until
-- queued_run_release. A run whose job has one waiting already is left out
-- of what is returned (the caller cancels it): at most one waits.
-- name: QueuedRunHoldMany :many
WITH q AS (
    INSERT INTO ax.queued_run (execution_id, job_id, behind_id)
    SELECT u.execution_id, u.job_id,
           (SELECT e.id FROM ax.execution e
            WHERE e.job_id = u.job_id AND e.id <> u.execution_id AND e.finished_at IS NULL
            ORDER BY e.scheduled_for DESC, e.id DESC LIMIT 1)
    FROM (SELECT unnest(@execution_ids::uuid[]) AS execution_id, unnest(@job_ids::uuid[]) AS job_id) u
    ON CONFLICT DO NOTHING
    RETURNING execution_id, job_id
), held AS (
    UPDATE ax.task t SET not_before = @hold::timestamptz
    FROM q WHERE t.execution_id = q.execution_id AND t.state = 'pending'
)
SELECT q.execution_id, q.job_id FROM q;

-- QueuedRunRelease releases the waiting runs of @job_ids whose job has no
-- other unfinished run (ax.queued_run_release); it returns how many tasks
-- became leasable.
-- name: QueuedRunRelease :one
SELECT ax.queued_run_release(@job_ids::uuid[])::integer AS released;

-- QueuedRunWaitingJobs lists up to @max jobs with a waiting run, for the
-- sweep that releases what a race between a fire and an end left waiting.
-- name: QueuedRunWaitingJobs :many
SELECT job_id FROM ax.queued_run WHERE released_at IS NULL ORDER BY queued_at LIMIT @max;

-- QueuedRunGet returns why execution @execution_id waited, when it did.
-- name: QueuedRunGet :one
SELECT * FROM ax.queued_run WHERE execution_id = @execution_id;

-- QueuedRunForget deletes up to @max rows of runs released before
-- @before: the wait is explained while the run is recent.
-- name: QueuedRunForget :execrows
DELETE FROM ax.queued_run d WHERE d.execution_id IN (
    SELECT o.execution_id FROM ax.queued_run o
    WHERE o.released_at < sqlc.arg('before')::timestamptz ORDER BY o.released_at LIMIT sqlc.arg('max'));
