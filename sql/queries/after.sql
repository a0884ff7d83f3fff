-- AfterTriggerSet makes @job_id a downstream job of mode @mode.
-- name: AfterTriggerSet :exec
INSERT INTO ax.after_trigger (job_id, mode) VALUES (@job_id, @mode)
ON CONFLICT (job_id) DO UPDATE SET mode = EXCLUDED.mode;

-- AfterEdgeDeleteAll drops the upstreams of @job_id (AfterEdgeInsertMany
-- adds the new ones).
-- name: AfterEdgeDeleteAll :exec
DELETE FROM ax.after_edge WHERE job_id = @job_id;

-- AfterTriggerDrop makes @job_id no longer a downstream job.
-- name: AfterTriggerDrop :exec
DELETE FROM ax.after_trigger WHERE job_id = @job_id;

-- AfterEdgeInsertMany adds the upstreams of @job_id in order.
-- name: AfterEdgeInsertMany :exec
INSERT INTO ax.after_edge (job_id, upstream_job_id, position, on_state)
SELECT @job_id::uuid, unnest(@upstream_ids::uuid[]), unnest(@positions::integer[]), unnest(@on_states::text[]);

-- AfterJobsByName returns the ids of the jobs named "group/name" in @names.
-- name: AfterJobsByName :many
SELECT j.id, (j.group_name || '/' || j.name)::text AS full_name
FROM ax.job j
JOIN unnest(@names::text[]) AS n(full_name)
  ON j.group_name = split_part(n.full_name, '/', 1) AND j.name = substr(n.full_name, strpos(n.full_name, '/') + 1);

-- AfterReaches reports whether @job_id is upstream of any of @upstream_ids
-- (directly or through other downstream jobs): making them its upstreams
-- would close a cycle.
-- name: AfterReaches :one
WITH RECURSIVE up(job) AS (
    SELECT u.job FROM unnest(@upstream_ids::uuid[]) AS u(job)
    UNION
    SELECT e.upstream_job_id FROM ax.after_edge e JOIN up ON e.job_id = up.job
)
SELECT EXISTS (SELECT 1 FROM up WHERE up.job = @job_id::uuid)::boolean;

-- AfterDownstreamsFull returns those of @upstream_ids that already have
-- @most downstream jobs other than @job_id and are not already upstream of
-- it: a save that keeps an edge is never refused for it (an upstream past
-- the bound before it was set keeps its downstream jobs, and they may be
-- saved again).
-- name: AfterDownstreamsFull :many
SELECT e.upstream_job_id
FROM ax.after_edge e
WHERE e.upstream_job_id = ANY(@upstream_ids::uuid[]) AND e.job_id <> @job_id::uuid
  AND NOT EXISTS (SELECT 1 FROM ax.after_edge m WHERE m.job_id = @job_id::uuid AND m.upstream_job_id = e.upstream_job_id)
GROUP BY e.upstream_job_id
HAVING count(*) >= @most::integer;

-- AfterLockGraph serializes changes of the job graph, so two saves cannot
-- each close half a cycle.
-- name: AfterLockGraph :exec
SELECT pg_advisory_xact_lock(hashtext('ax.after_graph'));

-- AfterEdgesOf returns the upstreams of the downstream jobs among @job_ids,
-- in order.
-- name: AfterEdgesOf :many
SELECT t.job_id, t.mode, e.upstream_job_id, (u.group_name || '/' || u.name)::text AS upstream_name, e.on_state
FROM ax.after_trigger t
JOIN ax.after_edge e ON e.job_id = t.job_id
JOIN ax.job u ON u.id = e.upstream_job_id
WHERE t.job_id = ANY(@job_ids::uuid[])
ORDER BY t.job_id, e.position;

-- AfterModesOf returns the mode of the downstream jobs among @job_ids
-- (also those whose upstreams were all deleted).
-- name: AfterModesOf :many
SELECT job_id, mode FROM ax.after_trigger WHERE job_id = ANY(@job_ids::uuid[]);

-- AfterDownstreamsOf returns the jobs that run after @job_id.
-- name: AfterDownstreamsOf :many
SELECT e.job_id, (d.group_name || '/' || d.name)::text AS job_name, e.on_state, t.mode
FROM ax.after_edge e
JOIN ax.after_trigger t ON t.job_id = e.job_id
JOIN ax.job d ON d.id = e.job_id
WHERE e.upstream_job_id = @job_id
ORDER BY d.group_name, d.name
LIMIT 1000;

-- AfterWaitClaimReady takes up to @max ready waits, oldest first, that no
-- other replica holds.
-- name: AfterWaitClaimReady :many
SELECT * FROM ax.after_wait
WHERE state = 'ready'
ORDER BY updated_at
LIMIT @max
FOR UPDATE SKIP LOCKED;

-- AfterWaitRequeue puts the ready wait of (@job_id, @logical_time), whose
-- fire failed, behind the other ready waits: it is tried again after
-- them.
-- name: AfterWaitRequeue :exec
UPDATE ax.after_wait SET updated_at = clock_timestamp()
WHERE job_id = @job_id AND logical_time = @logical_time AND state = 'ready';

-- AfterWaitFired records that the wait of (@job_id, @logical_time) made
-- run @execution_id, or (@state skipped) that it made none.
-- name: AfterWaitFired :exec
UPDATE ax.after_wait
SET state = @state, execution_id = coalesce(sqlc.narg('execution_id')::uuid, execution_id), updated_at = now()
WHERE job_id = @job_id AND logical_time = @logical_time;

-- AfterWaitGet returns the wait of (@job_id, @logical_time).
-- name: AfterWaitGet :one
SELECT * FROM ax.after_wait WHERE job_id = @job_id AND logical_time = @logical_time;

-- AfterUpstreamRuns returns runs @ids with their job's name and their
-- result: the result of their one shard, or the array of their shards'
-- results in shard order.
-- name: AfterUpstreamRuns :many
SELECT x.id, x.job_id, coalesce(j.name, '')::text AS job_name, coalesce(j.group_name, '')::text AS group_name,
       x.state::text AS state, x.scheduled_for, x.finished_at,
       (SELECT CASE WHEN count(*) = 1 THEN (array_agg(t.result))[1]
                    ELSE jsonb_agg(t.result ORDER BY t.shard_index) END
        FROM ax.all_tasks t WHERE t.execution_id = x.id)::jsonb AS result
FROM ax.all_executions x
LEFT JOIN ax.job j ON j.id = x.job_id
WHERE x.id = ANY(@ids::uuid[]);

-- AfterWaitPrune deletes up to @max waits last written before the history
-- horizon (ax.history_horizon, migration 00091) for a logical time before
-- it, none ready: one a downstream job and logical time, for as long as
-- ax ran. Every upstream run that arrived ended before the wait was last
-- written, so none is kept in history any more: the wait could no longer
-- make a run with its upstreams' results, nor say which ran. A fired
-- wait goes once its run is neither live nor in history. An upstream
-- backfilled for such a time later makes a new wait, and its downstream
-- runs again for it, as a backfill of a cron job fills a tick whose run
-- retention removed. Oldest first, through after_wait_settled_idx
-- (migration 00093).
-- name: AfterWaitPrune :execrows
DELETE FROM ax.after_wait w
-- By the locked rows' ctids (a TID scan): matched on the key, the delete
-- was planned as a hash of the whole table.
WHERE w.ctid = ANY(ARRAY(
    SELECT o.ctid
    FROM ax.after_wait o
    WHERE o.state <> 'ready' AND o.updated_at < ax.history_horizon(now())
      AND o.logical_time < ax.history_horizon(now())
      AND (o.execution_id IS NULL
           OR (NOT EXISTS (SELECT 1 FROM ax.execution e WHERE e.id = o.execution_id)
               AND NOT EXISTS (SELECT 1 FROM ax.execution_history e WHERE e.id = o.execution_id)))
    ORDER BY o.updated_at
    LIMIT sqlc.arg('max')::integer
    FOR UPDATE OF o SKIP LOCKED));
