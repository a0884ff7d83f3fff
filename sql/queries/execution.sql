-- ExecutionInsertMany inserts fires (params: the job's, overlaid by the
-- fire's own; trace context: the caller's, else one whose trace id is the
-- execution id); a scheduled tick that already has an
-- execution is skipped (execution_tick_once_idx), so a tick fires once
-- whatever races. Returns the executions actually inserted.
-- name: ExecutionInsertMany :many
INSERT INTO ax.execution (id, job_id, cause, scheduled_for, misfired, params, shard_count, priority, fired_at,
                          traceparent)
SELECT e.id, e.job_id, e.cause::ax.execution_cause, e.scheduled_for, e.misfired,
       j.params || coalesce(e.params, '{}'::jsonb), j.shard_count,
       CASE WHEN e.priority_set THEN e.priority ELSE j.priority END, clock_timestamp(),
       coalesce(nullif(e.traceparent, ''),
                '00-' || replace(e.id::text, '-', '') || '-' || substr(md5(e.id::text || random()::text), 1, 16) || '-01')
FROM (
    SELECT unnest(@ids::uuid[]) AS id,
           unnest(@job_ids::uuid[]) AS job_id,
           unnest(@causes::text[]) AS cause,
           unnest(@scheduled_fors::timestamptz[]) AS scheduled_for,
           unnest(@misfired::boolean[]) AS misfired,
           unnest(@params::jsonb[]) AS params,
           unnest(@priorities::integer[]) AS priority,
           unnest(@priority_set::boolean[]) AS priority_set,
           unnest(@traceparents::text[]) AS traceparent
) e
JOIN ax.job j ON j.id = e.job_id
ON CONFLICT (job_id, scheduled_for) WHERE cause IN ('schedule', 'catch_up') DO NOTHING
RETURNING id, job_id, scheduled_for, fired_at;

-- TaskInsertForExecutions makes the pending tasks of each execution in
-- @execution_ids, not leasable before its scheduled time (a fire made
-- ahead waits for its tick): one per shard, with the shard's param or its
-- part of the job's shard range (exact integer division in numeric: a
-- range may span all of bigint, and numeric's / would round); for
-- broadcast jobs one per live agent of the pool that accepts its executor
-- kind, pinned to it. Tasks of agentless HTTP jobs (executor http, no
-- target labels) are marked so: ax serve runs them, agents never lease them.
-- Ids that were not inserted (a tick that had fired already) match nothing.
-- Returns what routing needs to know of each task.
-- name: TaskInsertForExecutions :many
WITH execs AS (
    SELECT e.id, e.job_id, e.shard_count, e.priority, e.scheduled_for, e.params,
           j.shard_params, j.shard_range_from, j.shard_range_to, j.retry_max_attempts, j.timeout_seconds,
           j.route_strategy, j.route_key, j.target_labels, j.name AS job_name, j.group_name, j.rate_limit_class,
           j.executor_kind,
           j.executor_kind = 'http' AND j.target_labels = '{}'::jsonb AND j.route_strategy <> 'broadcast' AS agentless
    FROM ax.execution e
    JOIN ax.job j ON j.id = e.job_id
    WHERE e.id = ANY(@execution_ids::uuid[])
), shards AS (
    SELECT x.id AS execution_id, s.i, x.shard_count AS n, NULL::uuid AS agent_id
    FROM execs x
    CROSS JOIN LATERAL generate_series(0, x.shard_count - 1) AS s(i)
    WHERE x.route_strategy <> 'broadcast'
    UNION ALL
    SELECT x.id, (row_number() OVER w - 1)::integer, (count(*) OVER (PARTITION BY x.id))::integer, a.id
    FROM execs x
    JOIN ax.agent a ON a.labels @> x.target_labels AND x.executor_kind::text = ANY(a.executors)
         AND (NOT a.label_bound OR x.target_labels <> '{}'::jsonb)
    WHERE x.route_strategy = 'broadcast' AND a.state = 'active' AND a.ready
      AND a.last_heartbeat_at > now() - make_interval(secs => sqlc.arg('live_seconds')::double precision)
    WINDOW w AS (PARTITION BY x.id ORDER BY a.id)
), inserted AS (
    INSERT INTO ax.task (execution_id, job_id, shard_index, shard_total, shard_param,
                         priority, max_attempts, timeout_seconds, not_before, preferred_agent_id, pinned, rate_class, agentless)
    SELECT x.id, x.job_id, s.i, s.n,
           CASE WHEN jsonb_array_length(x.shard_params) > s.i THEN x.shard_params ->> s.i
                ELSE (x.shard_range_from + div((x.shard_range_to::numeric - x.shard_range_from) * s.i, s.n))::bigint
                     || '-' ||
                     (x.shard_range_from + div((x.shard_range_to::numeric - x.shard_range_from) * (s.i + 1), s.n))::bigint
           END,
           x.priority, x.retry_max_attempts, x.timeout_seconds, greatest(x.scheduled_for, now()),
           s.agent_id, s.agent_id IS NOT NULL, x.rate_limit_class, x.agentless
    FROM shards s
    JOIN execs x ON x.id = s.execution_id
    RETURNING id, execution_id, job_id, shard_index, shard_total, shard_param, pinned, agentless
), shard_counts AS (
    -- A broadcast run has as many shards as live agents, maybe none.
    UPDATE ax.execution e
    SET shard_count = greatest(c.n, 1),
        state = CASE WHEN c.n = 0 THEN 'failed'::ax.execution_state ELSE e.state END,
        finished_at = CASE WHEN c.n = 0 THEN now() ELSE e.finished_at END,
        error = CASE WHEN c.n = 0 THEN 'broadcast found no live, ready agent matching the job''s target labels and accepting its executor' END
    FROM (SELECT x.id, count(i.id)::integer AS n
          FROM execs x LEFT JOIN inserted i ON i.execution_id = x.id
          WHERE x.route_strategy = 'broadcast'
          GROUP BY x.id) c
    WHERE e.id = c.id
)
SELECT i.id, i.execution_id, i.job_id, i.shard_index, i.shard_total, i.shard_param, i.pinned, i.agentless,
       x.route_strategy, x.route_key, x.target_labels, x.params, x.job_name, x.group_name,
       x.executor_kind::text AS executor_kind
FROM inserted i
JOIN execs x ON x.id = i.execution_id;

-- TaskSetRoute records routing decisions of new tasks (the nil UUID: no
-- preference).
-- name: TaskSetRoute :exec
UPDATE ax.task t
SET preferred_agent_id = nullif(r.preferred, '00000000-0000-0000-0000-000000000000'),
    fallback_agent_id = nullif(r.fallback, '00000000-0000-0000-0000-000000000000'),
    route_key = r.route_key
FROM (SELECT unnest(@task_ids::uuid[]) AS id,
             unnest(@preferred::uuid[]) AS preferred,
             unnest(@fallback::uuid[]) AS fallback,
             unnest(@route_keys::text[]) AS route_key) r
WHERE t.id = r.id;

-- SkippedFireInsertMany records ticks that did not fire (tick_count < 1
-- means not counted).
-- name: SkippedFireInsertMany :exec
INSERT INTO ax.skipped_fire (job_id, reason, first_tick, last_tick, tick_count, detail)
SELECT s.job_id, s.reason::ax.skip_reason, s.first_tick, s.last_tick, nullif(s.tick_count, 0), s.detail
FROM (
    SELECT unnest(@job_ids::uuid[]) AS job_id,
           unnest(@reasons::text[]) AS reason,
           unnest(@first_ticks::timestamptz[]) AS first_tick,
           unnest(@last_ticks::timestamptz[]) AS last_tick,
           unnest(@tick_counts::integer[]) AS tick_count,
           unnest(@details::text[]) AS detail
) s;

-- ExecutionCancel stops the unfinished executions in @ids and those of
-- @job_ids: pending tasks are cancelled at once; leased and running tasks
-- are flagged so their agents stop them, and their execution stays
-- running until they report. Returns the executions touched.
-- name: ExecutionCancel :many
WITH target AS (
    SELECT id FROM ax.execution
    WHERE (id = ANY(@ids::uuid[]) OR job_id = ANY(@job_ids::uuid[]))
      AND finished_at IS NULL
    FOR UPDATE
), cancelled_tasks AS (
    UPDATE ax.task
    SET state = 'cancelled', finished_at = now(), updated_at = now(), error = 'cancelled: ' || @reason::text
    WHERE execution_id IN (SELECT id FROM target) AND state = 'pending'
    RETURNING execution_id
), flagged_tasks AS (
    UPDATE ax.task
    SET cancel_requested_at = coalesce(cancel_requested_at, now()), updated_at = now()
    WHERE execution_id IN (SELECT id FROM target) AND state IN ('leased', 'running')
    RETURNING execution_id
)
UPDATE ax.execution e
SET cancel_requested_at = coalesce(e.cancel_requested_at, now()),
    cancel_reason = coalesce(e.cancel_reason, @reason::text),
    state = CASE WHEN EXISTS (SELECT 1 FROM flagged_tasks f WHERE f.execution_id = e.id)
                 THEN e.state ELSE 'cancelled' END,
    finished_at = CASE WHEN EXISTS (SELECT 1 FROM flagged_tasks f WHERE f.execution_id = e.id)
                       THEN NULL ELSE now() END,
    updated_at = now()
FROM target
WHERE e.id = target.id
RETURNING e.id, e.state;

-- name: ExecutionGetByID :one
SELECT * FROM ax.execution WHERE id = @id;

-- ExecutionList pages newest first (ids are UUIDv7); @before is the last
-- id of the previous page. Times filter on scheduled_for; @groups, when
-- set, keeps runs of jobs of those groups only.
-- name: ExecutionList :many
SELECT * FROM ax.execution
WHERE (sqlc.narg('job_id')::uuid IS NULL OR job_id = sqlc.narg('job_id')::uuid)
  AND (sqlc.narg('state')::text IS NULL OR state = sqlc.narg('state')::ax.execution_state)
  AND (sqlc.narg('from')::timestamptz IS NULL OR scheduled_for >= sqlc.narg('from')::timestamptz)
  AND (sqlc.narg('to')::timestamptz IS NULL OR scheduled_for < sqlc.narg('to')::timestamptz)
  AND (sqlc.narg('before')::uuid IS NULL OR id < sqlc.narg('before')::uuid)
  AND (sqlc.narg('groups')::text[] IS NULL
       OR job_id IN (SELECT j.id FROM ax.job j WHERE j.group_name = ANY(sqlc.narg('groups')::text[])))
ORDER BY id DESC
LIMIT @max;

-- ExecutionGroupByID returns the group of an execution's job: what a key
-- limited to groups may see is decided by it.
-- name: ExecutionGroupByID :one
SELECT j.group_name FROM ax.execution e JOIN ax.job j ON j.id = e.job_id WHERE e.id = @id;

-- name: TaskListByExecution :many
SELECT * FROM ax.task WHERE execution_id = @execution_id ORDER BY shard_index;

-- name: SkippedFireListByJob :many
SELECT * FROM ax.skipped_fire
WHERE job_id = @job_id
ORDER BY first_tick DESC
LIMIT @max;

-- name: ExecutionHasUnfinished :one
SELECT EXISTS (
    SELECT 1 FROM ax.execution WHERE job_id = @job_id AND finished_at IS NULL
)::boolean AS unfinished;
