-- DelayedRunInsertMany stores delayed runs (one statement for a batch).
-- A priority of -2147483648 stands for none (an integer array carries no
-- NULL from Go): the run takes the job's priority when it fires. The
-- params come as one JSON array, the n-th element the n-th run's (null:
-- none): a jsonb[] of megabytes cost pgx five times its size in
-- allocations as it grew its buffer a quarter at a time. Last, so that
-- pgx appends nothing after it to its message: that copied it again.
-- name: DelayedRunInsertMany :exec
INSERT INTO ax.delayed_run (id, job_id, run_at, priority, traceparent, params)
SELECT unnest(@ids::uuid[]), unnest(@job_ids::uuid[]), unnest(@run_ats::timestamptz[]),
       nullif(unnest(@priorities::integer[]), -2147483648), unnest(@traceparents::text[]),
       nullif(jsonb_array_elements(@params::jsonb), 'null'::jsonb);

-- DelayedRunClaimDue locks up to @max pending runs due by now plus
-- @ahead_ms, earliest first and, among runs of one instant, in the order
-- they were scheduled (skipping rows other replicas hold), with what
-- planning their fires needs. Read through delayed_run_due_idx, in its
-- order (run_at, id).
-- name: DelayedRunClaimDue :many
SELECT d.id, d.job_id, d.run_at, d.params, d.priority, d.traceparent,
       j.concurrency_policy, j.misfire_policy, j.misfire_window_seconds, j.shard_count,
       t.paused,
       coalesce(sqlc.narg('now')::timestamptz, now())::timestamptz AS db_now,
       (j.concurrency_policy <> 'allow' AND EXISTS (
           SELECT 1 FROM ax.execution e
           WHERE e.job_id = j.id AND e.finished_at IS NULL))::boolean AS has_unfinished
FROM ax.delayed_run d
JOIN ax.job j ON j.id = d.job_id
JOIN ax.trigger t ON t.job_id = d.job_id
WHERE d.run_at <= coalesce(sqlc.narg('now')::timestamptz, now()) + make_interval(secs => sqlc.arg('ahead_ms')::bigint / 1000.0)
  AND d.cancelled_at IS NULL AND NOT d.held
ORDER BY d.run_at, d.id
LIMIT @max
FOR UPDATE OF d SKIP LOCKED;

-- DelayedRunHold sets aside runs that came due while their job is paused:
-- they wait for the job's resume (DelayedRunRelease), out of the due index.
-- name: DelayedRunHold :exec
UPDATE ax.delayed_run SET held = true WHERE id = ANY(@ids::uuid[]);

-- DelayedRunRelease makes a resumed job's held runs due again.
-- name: DelayedRunRelease :execrows
UPDATE ax.delayed_run SET held = false WHERE job_id = @job_id AND held;

-- DelayedRunDeleteMany removes runs that fired or were skipped.
-- name: DelayedRunDeleteMany :exec
DELETE FROM ax.delayed_run WHERE id = ANY(@ids::uuid[]);

-- DelayedRunCancelMany cancels pending runs (those not cancelled yet),
-- with why; returns the runs cancelled.
-- name: DelayedRunCancelMany :many
UPDATE ax.delayed_run
SET cancelled_at = now(), cancel_reason = @reason
WHERE id = ANY(@ids::uuid[]) AND cancelled_at IS NULL
RETURNING *;

-- DelayedRunCancelByKeys cancels the pending runs created with the
-- Idempotency-Keys of an API key, found through the keys' records (two
-- primary-key lookups a key). A key not returned has no such record, or
-- its run is not pending (fired, or cancelled already).
-- name: DelayedRunCancelByKeys :many
WITH target AS (
    -- Locked in id order: two calls cancelling overlapping keys in other
    -- orders would otherwise deadlock. A run being fired is waited for,
    -- then gone (deleted by its fire), so not returned.
    SELECT d.id, k.key
    FROM ax.idempotency_key k
    JOIN ax.delayed_run d ON d.id = (convert_from(k.response_body, 'UTF8')::jsonb ->> 'execution_id')::uuid
    WHERE k.api_key_id = @api_key_id AND k.key = ANY(@keys::text[]) AND k.expires_at > now()
      AND k.response_status = 202 AND d.cancelled_at IS NULL
    ORDER BY d.id
    FOR UPDATE OF d
)
UPDATE ax.delayed_run d
SET cancelled_at = now(), cancel_reason = @reason
FROM target t
WHERE d.id = t.id
RETURNING t.key, d.id;

-- DelayedRunCancelByKey is DelayedRunCancelByKeys for one key, the common
-- call ("the order was paid"). With an array of keys, PostgreSQL plans
-- each call anew: a plan kept for any array (generic) is costed for ten
-- keys, more than a plan made for the one key at hand, so it is never
-- chosen, and planning took 0.35 ms of the cancel's 0.5 ms. With one key
-- the kept plan costs the same and is used from the sixth call on.
-- name: DelayedRunCancelByKey :many
WITH target AS (
    SELECT d.id, k.key
    FROM ax.idempotency_key k
    JOIN ax.delayed_run d ON d.id = (convert_from(k.response_body, 'UTF8')::jsonb ->> 'execution_id')::uuid
    WHERE k.api_key_id = @api_key_id AND k.key = @key AND k.expires_at > now()
      AND k.response_status = 202 AND d.cancelled_at IS NULL
    FOR UPDATE OF d
)
UPDATE ax.delayed_run d
SET cancelled_at = now(), cancel_reason = @reason
FROM target t
WHERE d.id = t.id
RETURNING t.key, d.id;

-- name: DelayedRunGet :one
SELECT * FROM ax.delayed_run WHERE id = @id;

-- DelayedRunListByJob lists a job's pending runs (held ones too), earliest
-- first, after the (run_at, id) cursor.
-- name: DelayedRunListByJob :many
SELECT * FROM ax.delayed_run
WHERE job_id = @job_id AND cancelled_at IS NULL
  AND (run_at, id) > (sqlc.arg('after_run_at')::timestamptz, sqlc.arg('after_id')::uuid)
ORDER BY run_at, id
LIMIT @max;

-- DelayedRunDeleteCancelled removes runs cancelled more than a day ago
-- (through delayed_run_cancelled_idx: the cancelled runs only).
-- name: DelayedRunDeleteCancelled :execrows
DELETE FROM ax.delayed_run WHERE cancelled_at < now() - interval '1 day';
