-- Agentless HTTP tasks: tasks of jobs with executor http and no target
-- labels, sent by ax serve itself (River workers). They use the task
-- state machine of task.sql: a lease token fences the result, TaskComplete
-- records it (retries after the job's backoff), the reaper times them out.

-- HTTPTaskLease takes attempt @attempt of an agentless task that is due:
-- it runs from now with a fresh token (the completion token a target that
-- answers 202 sends back), its deadline is now + the task's timeout, and
-- its lease lasts @grace_seconds longer so the reaper times it out rather
-- than calls it lost. Returns nothing when the task is not pending at that
-- attempt or not due yet.
-- name: HTTPTaskLease :one
WITH leased AS (
    UPDATE ax.task t
    SET state = 'running', lease_token = gen_random_uuid(), agent_id = NULL,
        leased_at = now(), started_at = now(), cancel_requested_at = NULL,
        lease_expires_at = now() + make_interval(secs => t.timeout_seconds + sqlc.arg('grace_seconds')::double precision),
        updated_at = now()
    WHERE t.id = @id AND t.attempt = @attempt AND t.state = 'pending' AND t.agentless AND t.not_before <= now()
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
       j.executor, j.name AS job_name, e.params, e.scheduled_for,
       coalesce(s.secret, '')::text AS secret,
       coalesce(CASE WHEN s.previous_expires_at > now() THEN s.previous_secret END, '')::text AS previous_secret
FROM leased l
JOIN ax.job j ON j.id = l.job_id
JOIN ax.execution e ON e.id = l.execution_id
LEFT JOIN ax.job_secret s ON s.job_id = l.job_id;

-- HTTPTaskStatus says where a task is, for a worker that could not lease
-- it: its state and attempt, when it is due, and its deadline while it
-- runs (by the database clock, returned as now).
-- name: HTTPTaskStatus :one
SELECT t.state::text AS state, t.attempt, t.agentless, t.not_before,
       (coalesce(t.started_at, t.leased_at) + make_interval(secs => t.timeout_seconds))::timestamptz AS deadline,
       t.execution_id, t.timeout_seconds, t.priority,
       now()::timestamptz AS now
FROM ax.task t
WHERE t.id = @id;

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
