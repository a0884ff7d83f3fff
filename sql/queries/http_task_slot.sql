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
-- slot was taken. Run under HTTPTaskSlotLock.
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
)
SELECT EXISTS (SELECT 1 FROM due)::boolean AS due, (SELECT ok FROM room)::boolean AS room,
       EXISTS (SELECT 1 FROM taken)::boolean AS taken;

-- HTTPTaskSlotRelease frees a task's slot once its request has its answer.
-- name: HTTPTaskSlotRelease :exec
DELETE FROM ax.http_task_slot WHERE task_id = @task_id;

-- HTTPTaskSlotDeleteExpired forgets slots of workers that died.
-- name: HTTPTaskSlotDeleteExpired :execrows
DELETE FROM ax.http_task_slot WHERE held_until <= now();
