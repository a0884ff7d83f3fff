-- name: JobInsert :one
INSERT INTO ax.job (
    id, name, group_name, owner, description,
    trigger_kind, cron_expr, timezone, interval_seconds, run_at,
    executor_kind, executor, target_labels, route_strategy, route_key,
    shard_count, shard_params, shard_range_from, shard_range_to, priority, timeout_seconds,
    retry_max_attempts, retry_backoff_seconds, retry_backoff_max_seconds,
    concurrency_policy, misfire_policy, misfire_window_seconds, misfire_max_fires,
    rate_limit_class, callback_url, params, degrade_action, agentless, timeout_mode,
    shard_generator, shard_window_seconds, history_retention_seconds, history_failed_retention_seconds,
    callback_ordered, active_from, active_until, jitter_seconds, triggers, exclude,
    concurrency_key, concurrency_limit, concurrency_group
) VALUES (
    @id, @name, @group_name, @owner, @description,
    @trigger_kind, sqlc.narg('cron_expr'), @timezone, sqlc.narg('interval_seconds'), sqlc.narg('run_at'),
    @executor_kind, @executor, @target_labels, @route_strategy, @route_key,
    @shard_count, @shard_params, @shard_range_from, @shard_range_to, @priority, @timeout_seconds,
    @retry_max_attempts, @retry_backoff_seconds, @retry_backoff_max_seconds,
    @concurrency_policy, @misfire_policy, @misfire_window_seconds, @misfire_max_fires,
    sqlc.narg('rate_limit_class'), sqlc.narg('callback_url'), @params, @degrade_action, @agentless, @timeout_mode,
    sqlc.narg('shard_generator'), sqlc.narg('shard_window_seconds'),
    sqlc.narg('history_retention_seconds'), sqlc.narg('history_failed_retention_seconds'),
    @callback_ordered, sqlc.narg('active_from'), sqlc.narg('active_until'), @jitter_seconds, sqlc.narg('triggers'), @exclude::text[],
    @concurrency_key, sqlc.narg('concurrency_limit'), @concurrency_group
)
RETURNING *;

-- name: JobUpdate :one
UPDATE ax.job SET
    name = @name, group_name = @group_name, owner = @owner, description = @description,
    trigger_kind = @trigger_kind, cron_expr = sqlc.narg('cron_expr'), timezone = @timezone,
    interval_seconds = sqlc.narg('interval_seconds'), run_at = sqlc.narg('run_at'),
    executor_kind = @executor_kind, executor = @executor, target_labels = @target_labels,
    route_strategy = @route_strategy, route_key = @route_key,
    shard_count = @shard_count, shard_params = @shard_params,
    shard_range_from = @shard_range_from, shard_range_to = @shard_range_to, priority = @priority,
    timeout_seconds = @timeout_seconds, retry_max_attempts = @retry_max_attempts,
    retry_backoff_seconds = @retry_backoff_seconds, retry_backoff_max_seconds = @retry_backoff_max_seconds,
    concurrency_policy = @concurrency_policy, misfire_policy = @misfire_policy,
    misfire_window_seconds = @misfire_window_seconds, misfire_max_fires = @misfire_max_fires,
    rate_limit_class = sqlc.narg('rate_limit_class'), callback_url = sqlc.narg('callback_url'),
    params = @params, degrade_action = @degrade_action, agentless = @agentless, timeout_mode = @timeout_mode,
    shard_generator = sqlc.narg('shard_generator'), shard_window_seconds = sqlc.narg('shard_window_seconds'),
    history_retention_seconds = sqlc.narg('history_retention_seconds'),
    history_failed_retention_seconds = sqlc.narg('history_failed_retention_seconds'),
    callback_ordered = @callback_ordered,
    active_from = sqlc.narg('active_from'), active_until = sqlc.narg('active_until'), jitter_seconds = @jitter_seconds,
    triggers = sqlc.narg('triggers'),
    exclude = @exclude::text[],
    concurrency_key = @concurrency_key, concurrency_limit = sqlc.narg('concurrency_limit'),
    concurrency_group = @concurrency_group,
    updated_at = now()
WHERE id = @id
RETURNING *;

-- name: JobGetByID :one
SELECT sqlc.embed(j), sqlc.embed(t),
       coalesce((SELECT e.state::text FROM ax.all_executions e WHERE e.id = t.last_execution_id), '')::text AS last_state,
       m.samples AS timeout_samples, m.p95_ms AS timeout_p95_ms, m.computed_at AS timeout_computed_at
FROM ax.job j
JOIN ax.trigger t ON t.job_id = j.id
LEFT JOIN ax.job_timeout_measure m ON m.job_id = j.id
WHERE j.id = @id;

-- JobGetByIDForUpdate locks the job and its trigger FOR NO KEY UPDATE:
-- that serializes updates of one job, but not a fire's executions, whose
-- foreign key takes KEY SHARE on the job while the fire holds the trigger
-- (FOR UPDATE made the two wait on each other: a deadlock, a 500 to the
-- PUT that edited a job as it fired).
-- name: JobGetByIDForUpdate :one
SELECT sqlc.embed(j), sqlc.embed(t),
       coalesce((SELECT e.state::text FROM ax.all_executions e WHERE e.id = t.last_execution_id), '')::text AS last_state,
       m.samples AS timeout_samples, m.p95_ms AS timeout_p95_ms, m.computed_at AS timeout_computed_at
FROM ax.job j
JOIN ax.trigger t ON t.job_id = j.id
LEFT JOIN ax.job_timeout_measure m ON m.job_id = j.id
WHERE j.id = @id
FOR NO KEY UPDATE OF j, t;

-- JobList pages through jobs in id order (ids are UUIDv7, so creation
-- order); after is the last id of the previous page; @groups, when set,
-- keeps jobs of those groups only (a key limited to them).
-- name: JobList :many
SELECT sqlc.embed(j), sqlc.embed(t),
       coalesce((SELECT e.state::text FROM ax.all_executions e WHERE e.id = t.last_execution_id), '')::text AS last_state,
       m.samples AS timeout_samples, m.p95_ms AS timeout_p95_ms, m.computed_at AS timeout_computed_at
FROM ax.job j
JOIN ax.trigger t ON t.job_id = j.id
LEFT JOIN ax.job_timeout_measure m ON m.job_id = j.id
WHERE (sqlc.narg('after')::uuid IS NULL OR j.id > sqlc.narg('after')::uuid)
  AND (sqlc.narg('group_name')::text IS NULL OR j.group_name = sqlc.narg('group_name')::text)
  AND (sqlc.narg('name')::text IS NULL OR j.name = sqlc.narg('name')::text)
  AND (sqlc.narg('owner')::text IS NULL OR j.owner = sqlc.narg('owner')::text)
  AND (sqlc.narg('paused')::boolean IS NULL OR t.paused = sqlc.narg('paused')::boolean)
  AND (sqlc.narg('groups')::text[] IS NULL OR j.group_name = ANY(sqlc.narg('groups')::text[]))
ORDER BY j.id
LIMIT @max;

-- JobGroupByID returns a job's group: what a key limited to groups may
-- see is decided by it.
-- name: JobGroupByID :one
SELECT group_name FROM ax.job WHERE id = @id;

-- JobDelete deletes a job with its trigger and runs in flight (foreign
-- keys cascade to executions); their tasks and its skip records have no
-- key to cascade by (see migrations 00024 and 00026) and go here. Its
-- history stays until retention ends.
-- name: JobDelete :execrows
WITH tasks AS (
    DELETE FROM ax.task t WHERE t.job_id = sqlc.arg('id')::uuid
), skips AS (
    DELETE FROM ax.skipped_fire s WHERE s.job_id = sqlc.arg('id')::uuid
)
DELETE FROM ax.job j WHERE j.id = sqlc.arg('id')::uuid;

-- JobListTargetedPools lists the pools jobs target, so a pool with no ready agent
-- shows as zero rather than missing.
-- A metrics query: every replica reads the same shared rows, so all
-- replicas report the same numbers.
-- name: JobListTargetedPools :many
SELECT DISTINCT coalesce(target_labels ->> 'pool', '')::text AS pool FROM ax.job;

-- JobListFailing reports jobs with failed runs in the last
-- @window_seconds: their failure ratio there and how many of their latest
-- runs in a row failed (up to 20 looked at).
-- A metrics query: every replica reads the same shared rows, so all
-- replicas report the same numbers.
-- name: JobListFailing :many
SELECT j.name, j.group_name, j.owner,
       r.finished::bigint AS finished, r.failed::bigint AS failed,
       (SELECT count(*) FROM (
            SELECT e.state, bool_and(e.state IN ('failed', 'timed_out')) OVER (ORDER BY e.finished_at DESC) AS streak
            FROM ax.all_executions e
            WHERE e.job_id = j.id AND e.finished_at IS NOT NULL
            ORDER BY e.finished_at DESC LIMIT 20) s
        WHERE s.streak)::bigint AS consecutive_failures
FROM ax.job j
JOIN LATERAL (
    SELECT count(*) AS finished, count(*) FILTER (WHERE e.state IN ('failed', 'timed_out')) AS failed
    FROM ax.all_executions e
    WHERE e.job_id = j.id AND e.finished_at > now() - make_interval(secs => sqlc.arg('window_seconds')::double precision)
) r ON r.failed > 0;

-- JobExisting returns which of @ids are jobs.
-- name: JobExisting :many
SELECT id FROM ax.job WHERE id = ANY(@ids::uuid[]);

-- JobListForDeclaration locks and returns the jobs a declaration set
-- touches: those named by (group, name) in it, and those it managed so
-- far (which it may pause).
-- name: JobListForDeclaration :many
SELECT sqlc.embed(j), sqlc.embed(t),
       coalesce((SELECT e.state::text FROM ax.all_executions e WHERE e.id = t.last_execution_id), '')::text AS last_state,
       m.samples AS timeout_samples, m.p95_ms AS timeout_p95_ms, m.computed_at AS timeout_computed_at
FROM ax.job j
JOIN ax.trigger t ON t.job_id = j.id
LEFT JOIN ax.job_timeout_measure m ON m.job_id = j.id
WHERE (j.group_name, j.name) IN (SELECT unnest(@groups::text[]), unnest(@names::text[]))
   OR j.managed_by = @managed_by
ORDER BY j.id
FOR NO KEY UPDATE OF j, t;

-- JobSetDeclared records which declaration set manages a job, and the
-- version and place of the declaration that last changed it.
-- name: JobSetDeclared :exec
UPDATE ax.job
SET managed_by = @managed_by, declared_version = sqlc.narg('declared_version'), declared_in = sqlc.narg('declared_in')
WHERE id = @id;

-- JSONCanonical is each document as Postgres stores it in jsonb (its key
-- order, spacing and number forms), so a declared value compares to a
-- stored one byte for byte.
-- name: JSONCanonical :many
SELECT (d.doc::jsonb)::text AS doc
FROM unnest(@docs::text[]) WITH ORDINALITY AS d(doc, n)
ORDER BY d.n;
