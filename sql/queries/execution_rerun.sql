-- ExecutionRerunClaim links the re-run @execution_id to the run it
-- re-runs under @request_key. When another request with the same key
-- linked one first it returns nothing (and waits for that request's
-- transaction, so a retry never doubles a run still being made). A
-- cascading re-run records the root of its cascade: @cascade_root, or
-- itself when it starts one (nil).
-- name: ExecutionRerunClaim :one
INSERT INTO ax.execution_rerun (execution_id, rerun_of, request_key, shards, cascade, cascade_root)
VALUES (@execution_id, @rerun_of, @request_key, @shards, @cascade,
        CASE WHEN @cascade::boolean THEN coalesce(sqlc.narg('cascade_root')::uuid, @execution_id) END)
ON CONFLICT (rerun_of, request_key) DO NOTHING
RETURNING execution_id;

-- ExecutionRerunCascadeRoot returns the root of the cascade re-run @id
-- belongs to: its cascade_root, or itself when it has none (a re-run made
-- before migration 00078). None when @id is not a re-run.
-- name: ExecutionRerunCascadeRoot :one
SELECT coalesce(cascade_root, execution_id)::uuid AS root FROM ax.execution_rerun WHERE execution_id = @id;

-- ExecutionRerunCascadeCount counts the re-runs of the cascade of @root
-- (the root's own included), reading @most of them at most.
-- name: ExecutionRerunCascadeCount :one
SELECT count(*)::integer FROM (SELECT 1 FROM ax.execution_rerun WHERE cascade_root = @root LIMIT @most::integer) r;

-- ExecutionRerunByKey returns the re-run made for (@rerun_of, @request_key).
-- name: ExecutionRerunByKey :one
SELECT execution_id FROM ax.execution_rerun
WHERE rerun_of = @rerun_of AND request_key = @request_key;

-- ExecutionRerunInsert makes the re-run @id of run @rerun_of: the same
-- job, logical time (scheduled_for) and shard count, its params overlaid
-- by @params, at @priority or the original's, in trace @traceparent.
-- name: ExecutionRerunInsert :one
INSERT INTO ax.execution (id, job_id, cause, scheduled_for, misfired, params, shard_count, priority, fired_at, traceparent)
SELECT @id, o.job_id, 'rerun', o.scheduled_for, false, o.params || @params::jsonb, o.shard_count,
       coalesce(sqlc.narg('priority')::integer, o.priority), clock_timestamp(), @traceparent::text
FROM ax.all_executions o
WHERE o.id = @rerun_of
RETURNING id;

-- TaskPlanForRerun plans the tasks of re-run @execution_id from the
-- shards of run @rerun_of: every shard, or (@failed_only) those that did
-- not succeed, each with its shard index, total and param; a broadcast
-- shard stays pinned to its agent. Attempts and timeout are the job's
-- now (an adaptive job's ceiling). The rows have the shape of
-- TaskPlanForExecutions' (no id: the caller makes it), so routing and
-- the insert are shared.
-- name: TaskPlanForRerun :many
SELECT e.id AS execution_id, e.job_id, o.shard_index, o.shard_total, o.shard_param,
       e.priority, j.retry_max_attempts AS max_attempts, j.timeout_seconds,
       now()::timestamptz AS not_before,
       o.pinned, o.preferred_agent_id,
       coalesce(j.rate_limit_class, '')::text AS rate_class, j.agentless, j.route_strategy, j.route_key,
       j.target_labels,
       -- The params once, on the first row (see TaskPlanForExecutions).
       (CASE WHEN row_number() OVER (ORDER BY o.shard_index) = 1 THEN e.params END)::jsonb AS params,
       j.name AS job_name, j.group_name, j.executor_kind::text AS executor_kind,
       j.concurrency_key AS concurrency_template, coalesce(j.concurrency_limit, 0)::integer AS concurrency_limit,
       j.concurrency_group,
       -- A pinned shard stays in its pool: its agent matched that one
       -- (migration 00082); 0 from history before pools is its job's.
       (CASE WHEN j.agentless THEN -1 WHEN o.pinned THEN o.pool_id ELSE j.pool_id END)::integer AS pool_id
FROM ax.all_tasks o
JOIN ax.execution e ON e.id = @execution_id
JOIN ax.job j ON j.id = e.job_id
WHERE o.execution_id = @rerun_of
  AND (NOT @failed_only::boolean OR o.state <> 'succeeded')
ORDER BY o.shard_index;

-- ExecutionRerunCandidates selects ended runs for a bulk re-run, oldest
-- first, at most @max: of job @job_id or of the jobs of group @group_name,
-- in one of @states, scheduled in [@from, @to), with a shard that ended
-- with one of @error_codes; @groups (a key limited to groups) keeps runs
-- of those groups only. A null filter matches all. The re-runs made under
-- @request_key are left out: a call stopped by its task bound is called
-- again with its key, and a re-run it made (one that failed, say) matches
-- the same filter; re-run again, the same work would run twice.
-- name: ExecutionRerunCandidates :many
SELECT e.id, e.job_id, e.state::text AS state, e.scheduled_for
FROM ax.all_executions e
JOIN ax.job j ON j.id = e.job_id
WHERE (sqlc.narg('job_id')::uuid IS NULL OR e.job_id = sqlc.narg('job_id')::uuid)
  AND (sqlc.narg('group_name')::text IS NULL OR j.group_name = sqlc.narg('group_name')::text)
  AND e.state::text = ANY(@states::text[])
  AND (sqlc.narg('from')::timestamptz IS NULL OR e.scheduled_for >= sqlc.narg('from')::timestamptz)
  AND (sqlc.narg('to')::timestamptz IS NULL OR e.scheduled_for < sqlc.narg('to')::timestamptz)
  AND (sqlc.narg('error_codes')::text[] IS NULL
       OR EXISTS (SELECT 1 FROM ax.all_tasks t
                  WHERE t.execution_id = e.id AND t.error_code = ANY(sqlc.narg('error_codes')::text[])))
  AND (sqlc.narg('groups')::text[] IS NULL OR j.group_name = ANY(sqlc.narg('groups')::text[]))
  AND NOT EXISTS (SELECT 1 FROM ax.execution_rerun r WHERE r.execution_id = e.id AND r.request_key = @request_key)
ORDER BY e.id
LIMIT @max;

-- ExecutionLineage reads in one statement what ExecutionRerunOf,
-- ExecutionRerunsOf, BackfillOfExecution and QueuedRunGet read of one
-- run: showing a run (and answering ?wait=) then costs one round trip
-- for its lineage, not four.
-- name: ExecutionLineage :one
SELECT r.rerun_of, b.backfill_id,
       q.job_id AS queued_job_id, q.behind_id AS queued_behind_id,
       q.queued_at AS queued_at, q.released_at AS queued_released_at,
       ARRAY(SELECT o.execution_id FROM ax.execution_rerun o
             WHERE o.rerun_of = x.id ORDER BY o.execution_id LIMIT 100)::uuid[] AS reruns
FROM (SELECT sqlc.arg('execution_id')::uuid AS id) x
LEFT JOIN ax.execution_rerun r ON r.execution_id = x.id
LEFT JOIN ax.backfill_run b ON b.execution_id = x.id
LEFT JOIN ax.queued_run q ON q.execution_id = x.id;

-- ExecutionRerunPrune deletes up to @max re-run records whose re-run was
-- fired before the history horizon (ax.history_horizon, migration 00091)
-- and whose run and re-run are both no longer live nor in history: one a
-- re-run, for as long as ax ran. Both, not the re-run alone: a succeeded
-- re-run leaves history before its failed run (7 days against 30 by
-- default), and the record is what makes a retried request with the
-- same key (rerun_of, request_key) the same re-run. Oldest first, by key.
-- name: ExecutionRerunPrune :execrows
DELETE FROM ax.execution_rerun x
WHERE x.execution_id = ANY(ARRAY(
    SELECT r.execution_id
    FROM ax.execution_rerun r
    WHERE r.execution_id < ax.uuid_v7_floor(ax.history_horizon(now()))
      AND NOT EXISTS (SELECT 1 FROM ax.execution e WHERE e.id = r.execution_id)
      AND NOT EXISTS (SELECT 1 FROM ax.execution_history e WHERE e.id = r.execution_id)
      AND NOT EXISTS (SELECT 1 FROM ax.execution e WHERE e.id = r.rerun_of)
      AND NOT EXISTS (SELECT 1 FROM ax.execution_history e WHERE e.id = r.rerun_of)
    ORDER BY r.execution_id
    LIMIT sqlc.arg('max')::integer));
