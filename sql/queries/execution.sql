-- ExecutionInsertMany inserts fires (params: the job's, overlaid by the
-- fire's own; trace context: @traceparents, made by the caller); a
-- scheduled tick that already has an
-- execution is skipped (execution_tick_once_idx), so a tick fires once
-- whatever races. Returns the executions actually inserted.
-- The rows come back with what rendering a shard generator needs
-- (db.ShardGenerator).
-- name: ExecutionInsertMany :many
WITH inserted AS (
INSERT INTO ax.execution (id, job_id, cause, scheduled_for, misfired, params, shard_count, priority, fired_at,
                          traceparent, trigger_index)
SELECT e.id, e.job_id, e.cause::ax.execution_cause, e.scheduled_for, e.misfired,
       j.params || coalesce(e.params, '{}'::jsonb), j.shard_count,
       CASE WHEN e.priority_set THEN e.priority ELSE j.priority END, clock_timestamp(),
       -- Made in Go (traceParentFor), not per row here: an md5 and four
       -- string operations a fire.
       e.traceparent,
       CASE WHEN e.trigger_index >= 0 THEN e.trigger_index END
FROM (
    SELECT unnest(@ids::uuid[]) AS id,
           unnest(@job_ids::uuid[]) AS job_id,
           unnest(@causes::text[]) AS cause,
           unnest(@scheduled_fors::timestamptz[]) AS scheduled_for,
           unnest(@misfired::boolean[]) AS misfired,
           unnest(@params::jsonb[]) AS params,
           unnest(@priorities::integer[]) AS priority,
           unnest(@priority_set::boolean[]) AS priority_set,
           unnest(@traceparents::text[]) AS traceparent,
           unnest(@trigger_indexes::smallint[]) AS trigger_index
) e
-- Each job by its key, whatever the planner guesses: joined, a batch of
-- 500 fires read all of ax.job (a hash join, 100-300 ms at 50,000 jobs)
-- while the table's statistics were stale after many new jobs; LIMIT 1
-- keeps the lateral read a probe of job_pkey.
CROSS JOIN LATERAL (SELECT j.params, j.shard_count, j.priority FROM ax.job j WHERE j.id = e.job_id LIMIT 1) j
-- A tick at or before the trigger's last fired tick fired already, even
-- when its run has moved to history or been removed by retention: every
-- scheduled fire holds the trigger row (TriggerClaimDue), so this check
-- and the unique index on the runs in flight make a tick fire once.
-- (A backfill fills ticks the trigger has passed, holding the same row,
-- after looking for their runs in history itself: see BackfillRelease.)
WHERE e.cause NOT IN ('schedule', 'catch_up')
   OR NOT EXISTS (SELECT 1 FROM ax.trigger t
                  WHERE t.job_id = e.job_id AND t.last_scheduled_for >= e.scheduled_for)
ON CONFLICT (job_id, scheduled_for) WHERE cause IN ('schedule', 'catch_up', 'backfill') DO NOTHING
RETURNING id, job_id, scheduled_for, fired_at, shard_count
)
SELECT i.id, i.job_id, i.scheduled_for, i.fired_at, i.shard_count,
       j.shard_generator, j.shard_window_seconds, j.timezone
FROM inserted i
CROSS JOIN LATERAL (SELECT j.shard_generator, j.shard_window_seconds, j.timezone
                    FROM ax.job j WHERE j.id = i.job_id LIMIT 1) j; -- see above

-- ExecutionCancel stops the unfinished executions in @ids and those of
-- @job_ids: pending tasks are cancelled at once; leased and running tasks
-- are flagged so their agents stop them, and their execution stays
-- running until they report. Returns the executions touched.
-- name: ExecutionCancel :many
WITH pending_locked AS MATERIALIZED (
    -- Locks are taken in three steps, each in id order, before any row is
    -- written. First the pending tasks: a lease holds the tasks it picked
    -- and then starts their run, so a cancel that held the run and waited
    -- for its tasks deadlocked with it (Postgres failed one after
    -- deadlock_timeout, 1 s, and a failed lease is a whole batch of
    -- agents'). Holding them, the cancel makes leases skip them.
    SELECT t.id FROM ax.task t
    WHERE t.execution_id IN (SELECT e.id FROM ax.execution e
                             WHERE (e.id = ANY(@ids::uuid[]) OR e.job_id = ANY(@job_ids::uuid[]))
                               AND e.finished_at IS NULL)
      AND t.state = 'pending'
    ORDER BY t.id
    FOR UPDATE
), target AS MATERIALIZED (
    -- Then the runs, as TaskComplete locks them: before their running tasks.
    SELECT id FROM ax.execution
    WHERE (id = ANY(@ids::uuid[]) OR job_id = ANY(@job_ids::uuid[]))
      AND finished_at IS NULL
      AND (SELECT count(*) FROM pending_locked) >= 0
    ORDER BY id
    FOR UPDATE
), tasks_locked AS MATERIALIZED (
    -- Then the rest, as the agents' task writes (TaskRenew) lock them. The
    -- states are the ones locked, not the ones this statement began with:
    -- a task leased while the cancel waited is flagged, not left to run.
    SELECT t.id, t.state FROM ax.task t
    WHERE t.execution_id IN (SELECT id FROM target) AND t.state IN ('pending', 'leased', 'running')
    ORDER BY t.id
    FOR UPDATE
), cancelled_tasks AS (
    UPDATE ax.task t
    SET state = 'cancelled', finished_at = now(), updated_at = now(), error = 'cancelled: ' || @reason::text,
        error_code = NULL -- a retry's earlier failure is not why it ended
    FROM tasks_locked l
    WHERE t.id = l.id AND l.state = 'pending'
    RETURNING t.execution_id
), flagged_tasks AS (
    UPDATE ax.task t
    SET cancel_requested_at = coalesce(t.cancel_requested_at, now()), updated_at = now()
    FROM tasks_locked l
    WHERE t.id = l.id AND l.state IN ('leased', 'running')
    RETURNING t.execution_id
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

-- ExecutionGetByID reads a run in flight or in history.
-- name: ExecutionGetByID :one
SELECT * FROM ax.all_executions WHERE id = @id;

-- ExecutionList pages newest first (ids are UUIDv7); @before is the last
-- id of the previous page. Times filter on scheduled_for; @groups, when
-- set, keeps runs of jobs of those groups only.
-- name: ExecutionList :many
SELECT * FROM ax.all_executions
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
-- limited to groups may see is decided by it. A delayed run that has not
-- fired yet is the execution it will be.
-- name: ExecutionGroupByID :one
SELECT j.group_name FROM ax.job j
WHERE j.id = coalesce((SELECT e.job_id FROM ax.all_executions e WHERE e.id = @id),
                      (SELECT d.job_id FROM ax.delayed_run d WHERE d.id = @id));

-- name: ExecutionHasUnfinished :one
SELECT EXISTS (
    SELECT 1 FROM ax.execution WHERE job_id = @job_id AND finished_at IS NULL
)::boolean AS unfinished;

-- ExecutionLock locks an execution until the transaction ends, so
-- results of its shards recorded at the same time are recorded one after
-- the other and the last one sees the others (and ends the execution).
-- name: ExecutionLock :exec
SELECT id FROM ax.execution WHERE id = @id FOR NO KEY UPDATE;

-- ExecutionEndSingle ends runs of one shard (@ids) with their task's
-- outcome, which TaskComplete read and locked but did not write (task
-- @task_ids[i] of run @ids[i] ended in @states[i] with @results[i],
-- @errors[i] and @error_codes[i]). ax.history_end_single (migration
-- 00040; ax.history_end without its read of the runs' other tasks, which
-- a run of one shard has none of) writes each run and its task to
-- history with that outcome and deletes the live rows, in one statement;
-- it returns the runs it ended.
-- name: ExecutionEndSingle :many
SELECT unnest(ax.history_end_single(@ids::uuid[], @states::text[], @task_ids::uuid[], @states::text[],
                                    @results::jsonb[], @errors::text[], @error_codes::text[]))::uuid AS id;

-- ExecutionFinalize ends executions whose tasks have all ended: succeeded
-- when every shard succeeded, else timed_out, failed or cancelled (through
-- ax.history_end, as ExecutionEndSingle). Each execution's tasks are read
-- through task_shard_once, one id at a time, so the cost follows the
-- batch, not the backlog.
-- name: ExecutionFinalize :many
WITH s AS (
    SELECT x.id, agg.final_state
    FROM (SELECT DISTINCT unnest(@execution_ids::uuid[]) AS id) x
    CROSS JOIN LATERAL (
        SELECT CASE WHEN bool_and(t.state = 'succeeded') THEN 'succeeded'
                    WHEN bool_or(t.state = 'timed_out') THEN 'timed_out'
                    WHEN bool_or(t.state = 'failed') THEN 'failed'
                    ELSE 'cancelled' END AS final_state,
               bool_and(t.state IN ('succeeded', 'failed', 'timed_out', 'cancelled')) AS ended
        FROM ax.task t
        WHERE t.execution_id = x.id
    ) agg
    WHERE agg.ended
), ended AS (
    SELECT ax.history_end(coalesce(array_agg(s.id ORDER BY s.id), '{}'),
                          coalesce(array_agg(s.final_state ORDER BY s.id), '{}'),
                          '{}', '{}', '{}', '{}', '{}') AS ids
    FROM s
)
SELECT unnest(ended.ids)::uuid AS id FROM ended;

-- ExecutionGetByTick returns the run of job @job_id fired for the tick
-- @scheduled_for, live or in history.
-- name: ExecutionGetByTick :one
SELECT * FROM ax.all_executions
WHERE job_id = @job_id AND scheduled_for = @scheduled_for
ORDER BY id
LIMIT 1;

-- ExecutionRunningAt returns the newest run of job @job_id for a tick
-- before @tick that was not yet finished at @at: what an overlap skip of
-- @tick, decided at @at, waited on. (Ticks fire in order, so that run was
-- fired by then, in the same batch at the latest.)
-- name: ExecutionRunningAt :one
SELECT * FROM ax.all_executions
WHERE job_id = @job_id AND scheduled_for < @tick AND (finished_at IS NULL OR finished_at > @at::timestamptz)
ORDER BY scheduled_for DESC
LIMIT 1;

-- ExecutionEndSummaries describes ended runs for their log lines: the
-- job's group and name (empty once the job is deleted), the state, when
-- it started and ended, the highest attempt of its tasks and their error
-- codes, comma-separated.
-- name: ExecutionEndSummaries :many
SELECT e.id, e.job_id, coalesce(j.group_name, '')::text AS group_name, coalesce(j.name, '')::text AS job_name,
       e.state::text AS state, e.cause::text AS cause, e.started_at, e.finished_at,
       coalesce((SELECT max(t.attempt) FROM ax.all_tasks t WHERE t.execution_id = e.id), 0)::bigint AS attempt,
       coalesce((SELECT string_agg(DISTINCT t.error_code, ',') FROM ax.all_tasks t
                 WHERE t.execution_id = e.id AND t.error_code <> ''), '')::text AS error_codes
FROM ax.all_executions e
LEFT JOIN ax.job j ON j.id = e.job_id
WHERE e.id = ANY(@ids::uuid[]) AND e.finished_at IS NOT NULL;

-- ExecutionHasUnfinishedOther reports whether job @job_id has an
-- unfinished run other than @execution_id (one just inserted).
-- name: ExecutionHasUnfinishedOther :one
SELECT EXISTS (
    SELECT 1 FROM ax.execution WHERE job_id = @job_id AND finished_at IS NULL AND id <> @execution_id
)::boolean AS unfinished;
