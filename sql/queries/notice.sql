-- Failure notices (migration 00058): a job's targets, the outbox of
-- notices the database triggers write, their delivery and listing.

-- NoticeTargetList returns a job's targets in their order.
-- name: NoticeTargetList :many
SELECT id, kind, url, events::text[] AS events, incident_open, incident_since, failed_runs
FROM ax.notice_target WHERE job_id = @job_id ORDER BY position;

-- NoticeTargetDeleteExcept deletes a job's targets not among @keep (ids),
-- with their notices.
-- name: NoticeTargetDeleteExcept :exec
DELETE FROM ax.notice_target WHERE job_id = @job_id AND NOT (id = ANY(@keep::bigint[]));

-- NoticeTargetUpsert stores a target; a target already there (same kind
-- and URL) keeps its incident, so changing the list does not resend.
-- name: NoticeTargetUpsert :one
INSERT INTO ax.notice_target AS t (job_id, position, kind, url, events)
VALUES (@job_id, @position, @kind, @url, (@events::text[])::ax.notice_event[])
ON CONFLICT (job_id, kind, url) DO UPDATE
SET position = excluded.position, events = excluded.events, updated_at = now()
RETURNING t.id;

-- NoticeTakeUnenqueued marks up to @max notices whose delivery job is not
-- inserted yet as enqueued and returns their ids: the caller inserts the
-- River jobs in the same transaction (see CallbackTakeUnenqueued).
-- name: NoticeTakeUnenqueued :many
UPDATE ax.notice n SET enqueued_at = now(), updated_at = now()
WHERE n.id IN (SELECT p.id FROM ax.notice p WHERE p.enqueued_at IS NULL AND p.state = 'pending'
               ORDER BY p.id LIMIT @max FOR UPDATE SKIP LOCKED)
RETURNING n.id;

-- NoticeGetForDelivery returns what one attempt needs: the notice, its
-- target, its job's name and the signing secrets valid now.
-- name: NoticeGetForDelivery :one
SELECT n.id, n.job_id, n.event, n.execution_id,
       -- A run's own error is often empty: its first failed shard's says
       -- why (its tasks are in history by now).
       coalesce(nullif(n.detail, ''), (SELECT t.error FROM ax.all_tasks t WHERE t.execution_id = n.execution_id
                                        AND t.error IS NOT NULL ORDER BY t.shard_index LIMIT 1), '')::text AS detail,
       n.failed_runs, n.coalesced, n.state, n.attempts,
       n.created_at, t.kind, t.url, t.incident_since, j.name AS job_name, j.group_name,
       coalesce(s.secret, '')::text AS secret,
       coalesce(CASE WHEN s.previous_expires_at > now() THEN s.previous_secret END, '')::text AS previous_secret
FROM ax.notice n
JOIN ax.notice_target t ON t.id = n.target_id
JOIN ax.job j ON j.id = n.job_id
LEFT JOIN ax.job_secret s ON s.job_id = n.job_id
WHERE n.id = @id;

-- NoticeRecordAttempt moves a pending notice on after one attempt.
-- name: NoticeRecordAttempt :exec
UPDATE ax.notice
SET state = @state::ax.notice_state, attempts = @attempts, last_status = sqlc.narg('last_status'),
    last_error = nullif(@last_error::text, ''), next_attempt_at = sqlc.narg('next_attempt_at'),
    delivered_at = CASE WHEN @state = 'delivered' THEN now() END,
    failed_at = CASE WHEN @state = 'notice_failed' THEN now() END,
    updated_at = now()
WHERE id = @id AND state = 'pending';

-- NoticeList returns a job's last @max notices, newest first, with their
-- target.
-- name: NoticeList :many
SELECT n.id, n.event, n.execution_id,
       coalesce(nullif(n.detail, ''), (SELECT t.error FROM ax.all_tasks t WHERE t.execution_id = n.execution_id
                                        AND t.error IS NOT NULL ORDER BY t.shard_index LIMIT 1), '')::text AS detail,
       n.failed_runs, n.coalesced, n.state, n.attempts, n.last_status,
       n.last_error, n.next_attempt_at, n.delivered_at, n.failed_at, n.created_at, t.kind, t.url
FROM ax.notice n JOIN ax.notice_target t ON t.id = n.target_id
WHERE n.job_id = @job_id
ORDER BY n.id DESC
LIMIT @max;

-- NoticePrune deletes up to @max failure notices, sent, failed or held,
-- written before the history horizon (ax.history_horizon, migration
-- 00091): one an incident (or a recovery, a set-aside trigger, a callback
-- given up) and target, for as long as ax ran. Pending ones stay (still
-- to be sent). Oldest first, target by target through
-- notice_by_target_idx. ax.notice_add reads a URL's newest notices only
-- (migration 00072): the deleted are older than any of them.
-- name: NoticePrune :execrows
DELETE FROM ax.notice n
WHERE n.id = ANY(ARRAY(
    SELECT x.id
    FROM ax.notice_target t
    CROSS JOIN LATERAL (SELECT m.id FROM ax.notice m
                        WHERE m.target_id = t.id AND m.created_at < ax.history_horizon(now())
                          AND m.state <> 'pending'
                        ORDER BY m.created_at
                        LIMIT sqlc.arg('max')::integer) x
    LIMIT sqlc.arg('max')::integer));
