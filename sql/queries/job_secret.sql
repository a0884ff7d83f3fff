-- Job signing secrets (Standard Webhooks "whsec_…"): they sign a job's
-- callbacks and agentless HTTP requests.

-- name: JobSecretInsert :exec
INSERT INTO ax.job_secret (job_id, secret) VALUES (@job_id, @secret);

-- JobSecretRotate makes @secret the job's secret and keeps the old one
-- valid for @keep_seconds (both sign meanwhile). Returns until when.
-- name: JobSecretRotate :one
INSERT INTO ax.job_secret AS s (job_id, secret, rotated_at)
SELECT j.id, @secret, now() FROM ax.job j WHERE j.id = @job_id
ON CONFLICT (job_id) DO UPDATE
SET previous_secret = s.secret,
    previous_expires_at = now() + make_interval(secs => sqlc.arg('keep_seconds')::double precision),
    secret = EXCLUDED.secret, rotated_at = now()
RETURNING s.previous_expires_at;

-- JobSecretGet returns the secrets valid now: the current one and, while
-- a rotation lasts, the previous one ('' otherwise).
-- name: JobSecretGet :one
SELECT secret,
       coalesce(CASE WHEN previous_expires_at > now() THEN previous_secret END, '')::text AS previous_secret,
       previous_expires_at
FROM ax.job_secret
WHERE job_id = @job_id;

-- JobSecretGetMany returns the secrets valid now of jobs @job_ids, for the
-- HTTP tasks an agent leases (it signs their requests): the current one
-- and, while a rotation lasts, the previous one ('' otherwise).
-- name: JobSecretGetMany :many
SELECT job_id, secret,
       coalesce(CASE WHEN previous_expires_at > now() THEN previous_secret END, '')::text AS previous_secret
FROM ax.job_secret
WHERE job_id = ANY(@job_ids::uuid[]);
