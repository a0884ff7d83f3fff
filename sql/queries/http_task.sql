-- Agentless HTTP tasks: tasks of jobs with executor http and no target
-- labels, sent by ax serve itself (River workers). They use the task
-- state machine of task.sql: a lease token fences the result, TaskComplete
-- records it (retries after the job's backoff), the reaper times them out.

-- HTTPTaskLease takes attempt @attempt of an agentless task that is due:
-- it runs from now with a fresh token (the completion token a target that
-- answers 202 sends back), its deadline is now + the task's timeout, and
-- its lease lasts @grace_seconds longer so the reaper times it out rather
-- than calls it lost. A task of a rate class takes one token from its
-- bucket (refilled lazily from now()) and must be at or above the class's
-- priority floor, as agents' leases do. Returns nothing when the task is
-- not pending at that attempt, not due, or its class holds it back.
-- name: HTTPTaskLease :one
WITH candidate AS (
    SELECT t.id, t.rate_class, t.priority
    FROM ax.task t
    WHERE t.id = @id AND t.attempt = @attempt AND t.state = 'pending' AND t.agentless AND t.not_before <= now()
), token AS (
    UPDATE ax.rate_class c
    SET tokens = least(c.burst, c.tokens + c.rate * greatest(0, extract(epoch FROM now() - c.refilled_at))) - 1,
        refilled_at = greatest(c.refilled_at, now())
    FROM candidate x
    WHERE c.name = x.rate_class
      AND least(c.burst, c.tokens + c.rate * greatest(0, extract(epoch FROM now() - c.refilled_at))) >= 1
      AND x.priority >= coalesce(c.manual_min_priority,
                                 CASE WHEN c.degraded_since IS NOT NULL THEN c.auto_min_priority END, x.priority)
    RETURNING c.name
), leased AS (
    UPDATE ax.task t
    SET state = 'running', lease_token = gen_random_uuid(), agent_id = NULL,
        leased_at = now(), started_at = now(), cancel_requested_at = NULL,
        lease_expires_at = now() + make_interval(secs => t.timeout_seconds + sqlc.arg('grace_seconds')::double precision),
        updated_at = now()
    FROM candidate x
    WHERE t.id = x.id AND t.attempt = @attempt AND t.state = 'pending'
      AND (x.rate_class IS NULL OR EXISTS (SELECT 1 FROM token))
    RETURNING t.id, t.execution_id, t.job_id, t.shard_index, t.shard_total, t.shard_param, t.attempt,
              t.max_attempts, t.timeout_seconds, t.lease_token, t.started_at
), started AS (
    UPDATE ax.execution e
    SET state = 'running', started_at = coalesce(e.started_at, now()), updated_at = now()
    WHERE e.id IN (SELECT execution_id FROM leased) AND e.state = 'pending'
), events AS (
    INSERT INTO ax.task_event (task_id, execution_id, shard_index, attempt, kind, state, message)
    SELECT id, execution_id, shard_index, attempt, 'state', 'running', 'sent by ax serve (agentless http)'
    FROM leased
)
SELECT l.id, l.execution_id, l.job_id, l.shard_index, l.shard_total, l.shard_param, l.attempt,
       l.max_attempts, l.timeout_seconds, l.lease_token::uuid AS lease_token,
       (l.started_at + make_interval(secs => l.timeout_seconds))::timestamptz AS deadline,
       j.executor, j.name AS job_name, e.params, e.scheduled_for, e.priority,
       coalesce(e.traceparent, '')::text AS traceparent,
       coalesce(s.secret, '')::text AS secret,
       coalesce(CASE WHEN s.previous_expires_at > now() THEN s.previous_secret END, '')::text AS previous_secret
FROM leased l
JOIN ax.job j ON j.id = l.job_id
JOIN ax.execution e ON e.id = l.execution_id
LEFT JOIN ax.job_secret s ON s.job_id = l.job_id;

-- HTTPTaskStatus says where a task is, for a worker that could not lease
-- it: its state and attempt, when it is due, its deadline while it runs,
-- and, for a due task its rate class holds back, how long until the
-- class's next token (by the database clock, returned as now).
-- name: HTTPTaskStatus :one
SELECT t.state::text AS state, t.attempt, t.agentless, t.not_before,
       coalesce(coalesce(t.started_at, t.leased_at) + make_interval(secs => t.timeout_seconds), now())::timestamptz AS deadline,
       t.execution_id, t.timeout_seconds, t.priority,
       coalesce((SELECT greatest(0, (1 - least(c.burst, c.tokens + c.rate * greatest(0, extract(epoch FROM now() - c.refilled_at))))
                                    / c.rate)
                 FROM ax.rate_class c WHERE c.name = t.rate_class), 0)::double precision AS token_wait_seconds,
       now()::timestamptz AS now
FROM ax.task t
WHERE t.id = @id;

-- HTTPTaskTokenCheck says whether a task is agentless and whether token is
-- its current completion token: the check before a posted result's body is
-- read. A primary-key read.
-- name: HTTPTaskTokenCheck :one
SELECT t.agentless, coalesce(t.lease_token = @token::uuid, false)::boolean AS current
FROM ax.task t
WHERE t.id = @id;

-- HTTPTaskPriorities returns the priorities of new agentless tasks, which
-- order their River jobs.
-- name: HTTPTaskPriorities :many
SELECT id, priority FROM ax.task WHERE id = ANY(@ids::uuid[]);

-- HTTPTaskCancelRequested ends agentless tasks whose execution was
-- cancelled while they ran (no agent will report them) and returns their
-- executions, to be finalized. Read through task_agentless_cancel_idx.
-- name: HTTPTaskCancelRequested :many
WITH done AS (
    UPDATE ax.task t
    SET state = 'cancelled', finished_at = now(), lease_token = NULL, lease_expires_at = NULL,
        error = 'cancelled while its request was outstanding', updated_at = now()
    WHERE t.agentless AND t.state IN ('leased', 'running') AND t.cancel_requested_at IS NOT NULL
    RETURNING t.id, t.execution_id, t.shard_index, t.attempt
), events AS (
    INSERT INTO ax.task_event (task_id, execution_id, shard_index, attempt, kind, state, message)
    SELECT id, execution_id, shard_index, attempt, 'state', 'cancelled', 'cancelled while its request was outstanding'
    FROM done
)
SELECT DISTINCT execution_id FROM done;

-- HTTPTaskLockExecution locks an execution until the transaction ends, so
-- results of its shards recorded at the same time are recorded one after
-- the other and the last one sees the others (and ends the execution).
-- name: HTTPTaskLockExecution :exec
SELECT id FROM ax.execution WHERE id = @id FOR NO KEY UPDATE;

-- HTTPTaskTarget is the job and URL of a task, for the slot its request
-- will hold.
-- name: HTTPTaskTarget :one
SELECT t.job_id, coalesce(j.executor->>'url', '')::text AS url
FROM ax.task t
JOIN ax.job j ON j.id = t.job_id
WHERE t.id = @id;

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
