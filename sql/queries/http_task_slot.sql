-- HTTPTaskSlotLock serializes slot takes of one job, then of one host,
-- until the transaction ends (always in that order: takes never deadlock).
-- name: HTTPTaskSlotLock :exec
SELECT pg_advisory_xact_lock(hashtextextended('ax_http_job:' || sqlc.arg('job_id')::uuid::text, 0)),
       pg_advisory_xact_lock(hashtextextended('ax_http_host:' || sqlc.arg('host')::text, 0));

-- HTTPTaskSlotTake takes a slot for attempt @attempt of task @task_id when
-- it is due (pending at that attempt, not before now) and its job holds
-- fewer than @max_per_job live slots and its host fewer than
-- @max_per_host (its own slot, left by a worker that died, not counted).
-- Says whether the task was due, whether there was room, and whether the
-- slot was taken. A due attempt without room is recorded as waiting (River
-- job @river_job_id, keeping its place when it waited already: says how
-- long it has waited); any other outcome ends its wait. Run under
-- HTTPTaskSlotLock.
-- name: HTTPTaskSlotTake :one
WITH due AS (
    SELECT 1 FROM ax.task t
    WHERE t.id = @task_id AND t.attempt = @attempt AND t.state = 'pending' AND t.agentless AND t.not_before <= now()
), room AS (
    SELECT (SELECT count(*) FROM ax.http_task_slot s
            WHERE s.job_id = @job_id AND s.held_until > now() AND s.task_id <> @task_id) < sqlc.arg('max_per_job')::integer
       AND (SELECT count(*) FROM ax.http_task_slot s
            WHERE s.host = @host AND s.held_until > now() AND s.task_id <> @task_id) < sqlc.arg('max_per_host')::integer AS ok
), taken AS (
    INSERT INTO ax.http_task_slot (task_id, job_id, host, held_until)
    SELECT @task_id, @job_id, @host, now() + make_interval(secs => sqlc.arg('hold_seconds')::double precision)
    WHERE EXISTS (SELECT 1 FROM due) AND (SELECT ok FROM room)
    ON CONFLICT (task_id) DO UPDATE
    SET job_id = EXCLUDED.job_id, host = EXCLUDED.host, held_until = EXCLUDED.held_until, created_at = now()
    RETURNING task_id
), waiting AS (
    INSERT INTO ax.http_task_slot_wait (river_job_id, job_id, host)
    SELECT sqlc.narg('river_job_id')::bigint, @job_id, @host
    WHERE sqlc.narg('river_job_id')::bigint IS NOT NULL AND EXISTS (SELECT 1 FROM due) AND NOT (SELECT ok FROM room)
    ON CONFLICT (river_job_id) DO UPDATE SET woken_at = NULL
    RETURNING since
), waited AS (
    DELETE FROM ax.http_task_slot_wait w
    WHERE w.river_job_id = sqlc.narg('river_job_id')::bigint
      AND NOT (EXISTS (SELECT 1 FROM due) AND NOT (SELECT ok FROM room))
)
SELECT EXISTS (SELECT 1 FROM due)::boolean AS due, (SELECT ok FROM room)::boolean AS room,
       EXISTS (SELECT 1 FROM taken)::boolean AS taken,
       coalesce((SELECT extract(epoch FROM now() - w.since) FROM waiting w), 0)::double precision AS waited_seconds;

-- HTTPTaskSlotRelease frees a task's slot once its request has its answer,
-- and returns the River jobs of the requests to wake for it: the one that
-- has waited longest for the slot's job, and for its host (one, when they
-- are the same), not woken in the last @rewake_seconds.
-- name: HTTPTaskSlotRelease :many
WITH freed AS (
    DELETE FROM ax.http_task_slot WHERE task_id = @task_id RETURNING job_id, host
), of_job AS (
    SELECT w.river_job_id FROM ax.http_task_slot_wait w
    WHERE w.job_id = (SELECT f.job_id FROM freed f)
      AND (w.woken_at IS NULL OR w.woken_at < now() - make_interval(secs => sqlc.arg('rewake_seconds')::double precision))
    ORDER BY w.since LIMIT 1
    FOR UPDATE SKIP LOCKED
), of_host AS (
    SELECT w.river_job_id FROM ax.http_task_slot_wait w
    WHERE w.host = (SELECT f.host FROM freed f)
      AND (w.woken_at IS NULL OR w.woken_at < now() - make_interval(secs => sqlc.arg('rewake_seconds')::double precision))
    ORDER BY w.since LIMIT 1
    FOR UPDATE SKIP LOCKED
)
UPDATE ax.http_task_slot_wait w SET woken_at = now()
WHERE w.river_job_id IN (SELECT river_job_id FROM of_job UNION SELECT river_job_id FROM of_host)
RETURNING w.river_job_id;

-- HTTPTaskSlotWaitEnd forgets a waiting request whose River job is gone.
-- name: HTTPTaskSlotWaitEnd :exec
DELETE FROM ax.http_task_slot_wait WHERE river_job_id = @river_job_id;

-- HTTPTaskSlotDeleteExpired forgets slots of workers that died.
-- name: HTTPTaskSlotDeleteExpired :execrows
DELETE FROM ax.http_task_slot WHERE held_until <= now();
