-- Result callbacks: the outbox (rows written by the execution_ended
-- trigger), delivery and redelivery. Attempts are kept in
-- callback_attempt.sql, the circuit breaker per destination host in
-- callback_breaker.sql.

-- CallbackTakeUnenqueued marks up to @max outbox rows whose delivery job is
-- not inserted yet as enqueued, numbers them from their job's counter
-- (ax.callback_sequence: gap-free per job, in the order the rows were
-- written) and returns them: the caller inserts their River jobs in the
-- same transaction. It sees the rows this transaction wrote and committed
-- ones a path without a hook left behind; rows other transactions are
-- taking are skipped. Counters are locked in job order, so two enqueuers
-- of the same jobs wait on each other instead of deadlocking.
-- name: CallbackTakeUnenqueued :many
WITH taken AS (
    SELECT c.execution_id, c.job_id,
           row_number() OVER (PARTITION BY c.job_id ORDER BY c.created_at, c.execution_id) AS n
    FROM (SELECT execution_id, job_id, created_at FROM ax.callback
          WHERE enqueued_at IS NULL
          ORDER BY created_at
          LIMIT @max
          FOR UPDATE SKIP LOCKED) c
), per_job AS (
    SELECT job_id, count(*) AS n FROM taken GROUP BY job_id
), counter AS (
    INSERT INTO ax.callback_sequence AS s (job_id, last_sequence)
    SELECT job_id, n FROM per_job ORDER BY job_id
    ON CONFLICT (job_id) DO UPDATE SET last_sequence = s.last_sequence + excluded.last_sequence
    RETURNING s.job_id, s.last_sequence
)
UPDATE ax.callback c
SET enqueued_at = now(), updated_at = now(), sequence = k.last_sequence - g.n + t.n
FROM taken t JOIN per_job g ON g.job_id = t.job_id JOIN counter k ON k.job_id = t.job_id
WHERE c.execution_id = t.execution_id
RETURNING c.execution_id, c.delivery;

-- CallbackGetForDelivery returns what one delivery attempt needs: the
-- outbox row, the execution, the job's current callback URL, the secrets
-- valid now (the previous one while a rotation lasts), the count of shards
-- by state and by error code (of shards that ended without succeeding) and
-- the first @max_shards shards as the payload lists them (each with its
-- task's idempotency key, as httptask.IdempotencyKey makes it), as many
-- as fit in @max_shard_bytes.
-- name: CallbackGetForDelivery :one
SELECT c.execution_id, c.job_id, c.state, c.delivery, c.attempts,
       coalesce(c.sequence, 0)::bigint AS sequence,
       coalesce(j.callback_url, '')::text AS url,
       -- waiting_for: the earliest callback of an ordered job still pending
       -- before this one, and when its next attempt is due (redeliveries
       -- neither wait nor hold others up).
       coalesce(w.execution_id::text, '')::text AS waiting_for, w.next_attempt_at AS waiting_next_attempt_at,
       e.cause, e.state AS execution_state, e.scheduled_for, e.fired_at, e.started_at, e.finished_at,
       e.error AS execution_error, e.cancel_reason, e.shard_count, e.misfired, e.params,
       coalesce(e.traceparent, '')::text AS traceparent,
       coalesce((SELECT r.rerun_of::text FROM ax.execution_rerun r WHERE r.execution_id = c.execution_id), '')::text AS rerun_of,
       j.name AS job_name, j.group_name,
       coalesce(s.secret, '')::text AS secret,
       coalesce(CASE WHEN s.previous_expires_at > now() THEN s.previous_secret END, '')::text AS previous_secret,
       coalesce((SELECT jsonb_object_agg(n.state, n.n)
                 FROM (SELECT t.state::text AS state, count(*) AS n FROM ax.all_tasks t
                       WHERE t.execution_id = c.execution_id GROUP BY t.state) n), '{}')::jsonb AS shard_counts,
       coalesce((SELECT jsonb_object_agg(n.error_code, n.n)
                 FROM (SELECT t.error_code, count(*) AS n FROM ax.all_tasks t
                       WHERE t.execution_id = c.execution_id AND t.error_code IS NOT NULL AND t.state <> 'succeeded'
                       GROUP BY t.error_code) n), '{}')::jsonb AS shard_error_codes,
       coalesce((SELECT jsonb_agg(jsonb_strip_nulls(jsonb_build_object(
                     'index', t.shard_index, 'param', t.shard_param, 'state', t.state, 'attempts', t.attempt,
                     -- the task's key, as httptask.IdempotencyKey makes it
                     'idempotency_key', CASE WHEN t.shard_total > 1 THEN t.execution_id::text || ':' || t.shard_index
                                             ELSE t.execution_id::text END,
                     'result', t.result, 'error', t.error, 'error_code', t.error_code,
                     'started_at', to_char(t.started_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
                     'finished_at', to_char(t.finished_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')))
                     ORDER BY t.shard_index)
                 -- Only as many as fit in @max_shard_bytes of results and
                 -- errors (the first whatever its size): 1,000 shards of
                 -- 200 KiB made a payload of 200 MB, held several times
                 -- over in memory by each delivery.
                 FROM (SELECT t.*, sum(coalesce(octet_length(t.result::text), 0) + coalesce(octet_length(t.error), 0))
                                       OVER (ORDER BY t.shard_index) AS listed_bytes,
                              row_number() OVER (ORDER BY t.shard_index) AS nth
                       FROM (SELECT * FROM ax.all_tasks t WHERE t.execution_id = c.execution_id
                             ORDER BY t.shard_index LIMIT sqlc.arg('max_shards')::integer) t) t
                 WHERE t.nth = 1 OR t.listed_bytes <= sqlc.arg('max_shard_bytes')::bigint), '[]')::jsonb AS shards
FROM ax.callback c
JOIN ax.all_executions e ON e.id = c.execution_id
JOIN ax.job j ON j.id = c.job_id
LEFT JOIN ax.job_secret s ON s.job_id = c.job_id
LEFT JOIN LATERAL (
    SELECT p.execution_id, p.next_attempt_at FROM ax.callback p
    WHERE j.callback_ordered AND c.delivery = 1 AND p.job_id = c.job_id AND p.state = 'pending'
      AND p.sequence < c.sequence AND p.delivery = 1
    ORDER BY p.sequence LIMIT 1) w ON true
WHERE c.execution_id = @execution_id;

-- CallbackRecordAttempt stores one attempt and moves the callback of the
-- same delivery to @state: pending (another attempt at @next_attempt_at),
-- delivered or callback_failed. A callback redelivered meanwhile matches
-- nothing (the attempt is still recorded).
-- name: CallbackRecordAttempt :one
WITH attempt AS (
    INSERT INTO ax.callback_attempt (execution_id, delivery, attempt, url, at, status_code, latency_ms, error)
    VALUES (@execution_id, @delivery, @attempt, @url, @at, sqlc.narg('status_code'), @latency_ms, @error)
)
UPDATE ax.callback c
SET state = @state::ax.callback_state, attempts = @attempt, last_status = sqlc.narg('status_code'),
    last_error = nullif(@error::text, ''), next_attempt_at = sqlc.narg('next_attempt_at'),
    delivered_at = CASE WHEN @state = 'delivered' THEN now() END,
    failed_at = CASE WHEN @state = 'callback_failed' THEN now() END,
    updated_at = now()
WHERE c.execution_id = @execution_id AND c.delivery = @delivery AND c.state = 'pending'
RETURNING c.state;

-- CallbackGiveUp ends a delivery without an attempt (the job lost its
-- callback URL, or the payload cannot be built).
-- name: CallbackGiveUp :execrows
UPDATE ax.callback
SET state = 'callback_failed', last_error = @error::text, failed_at = now(), next_attempt_at = NULL, updated_at = now()
WHERE execution_id = @execution_id AND delivery = @delivery AND state = 'pending';

-- CallbackRedeliver starts a new delivery of an ended execution's
-- callback (creating the outbox row when the job got its callback URL
-- later) and returns its number. Nothing when the execution has not ended
-- or its job has no callback URL.
-- name: CallbackRedeliver :one
INSERT INTO ax.callback AS c (execution_id, job_id, enqueued_at)
SELECT e.id, e.job_id, now()
FROM ax.all_executions e
JOIN ax.job j ON j.id = e.job_id
WHERE e.id = @execution_id AND e.state NOT IN ('pending', 'running') AND j.callback_url IS NOT NULL
ON CONFLICT (execution_id) DO UPDATE
SET delivery = c.delivery + 1, state = 'pending', attempts = 0, last_status = NULL, last_error = NULL,
    next_attempt_at = NULL, delivered_at = NULL, failed_at = NULL, enqueued_at = now(), updated_at = now()
RETURNING execution_id, delivery;

-- name: CallbackGet :one
SELECT * FROM ax.callback WHERE execution_id = @execution_id;
