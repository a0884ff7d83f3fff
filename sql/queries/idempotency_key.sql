-- IdempotencyKeyClaim records a key for a request (replacing an expired
-- one); when a live key exists already it returns nothing and the caller reads the stored one. A
-- concurrent claim of the same key waits for the first to commit.
-- name: IdempotencyKeyClaim :one
INSERT INTO ax.idempotency_key (api_key_id, key, method, path, request_hash, response_status, response_body)
VALUES (@api_key_id, @key, @method, @path, @request_hash, @response_status, @response_body)
ON CONFLICT (api_key_id, key) DO UPDATE
SET method = EXCLUDED.method, path = EXCLUDED.path, request_hash = EXCLUDED.request_hash,
    response_status = EXCLUDED.response_status, response_body = EXCLUDED.response_body,
    created_at = now(), expires_at = now() + interval '24 hours'
WHERE idempotency_key.expires_at <= now()
RETURNING api_key_id;

-- IdempotencyKeyClaimMany is IdempotencyKeyClaim for a batch of runs of
-- one API key, each with its own path, request hash, response and expiry
-- (a delayed run's key lives until a day after its run_at, so it can
-- cancel the run until then). Returns the keys claimed; the others are
-- live already (read them with IdempotencyKeyGetMany). The keys must be
-- distinct.
-- name: IdempotencyKeyClaimMany :many
INSERT INTO ax.idempotency_key AS k (api_key_id, key, method, path, request_hash, response_status, response_body, expires_at)
SELECT @api_key_id::uuid, u.key, 'POST', u.path, u.request_hash, 202, u.response_body, u.expires_at
FROM (
    SELECT unnest(@keys::text[]) AS key,
           unnest(@paths::text[]) AS path,
           unnest(@request_hashes::bytea[]) AS request_hash,
           unnest(@response_bodies::bytea[]) AS response_body,
           unnest(@expires_ats::timestamptz[]) AS expires_at
) u
ON CONFLICT (api_key_id, key) DO UPDATE
SET method = EXCLUDED.method, path = EXCLUDED.path, request_hash = EXCLUDED.request_hash,
    response_status = EXCLUDED.response_status, response_body = EXCLUDED.response_body,
    response_headers = '{}', locked_until = NULL,
    created_at = now(), expires_at = EXCLUDED.expires_at
WHERE k.expires_at <= now()
RETURNING k.key;

-- name: IdempotencyKeyGetMany :many
SELECT key, method, path, request_hash, response_status, response_body FROM ax.idempotency_key
WHERE api_key_id = @api_key_id AND key = ANY(@keys::text[]) AND expires_at > now();

-- name: IdempotencyKeyGet :one
SELECT * FROM ax.idempotency_key
WHERE api_key_id = @api_key_id AND key = @key AND expires_at > now();

-- name: IdempotencyKeyDeleteExpired :execrows
DELETE FROM ax.idempotency_key WHERE expires_at <= now();

-- Idempotency-Key on any mutating call: the first request with a key
-- holds it while it runs, then stores its response; a retry with the same
-- key and request gets that response again, one with another request 422.
-- (Trigger and run submission claim their key inside their own
-- transaction instead: IdempotencyKeyClaim above.)

-- IdempotencyKeyClaimRequest holds a key for a request for @lock_seconds. It
-- takes over an expired record, or one left unanswered by a request that
-- died (lock run out) when the request is the same. Nothing returned: the
-- key is held or answered; read it with IdempotencyKeyGetRequest.
-- name: IdempotencyKeyClaimRequest :one
INSERT INTO ax.idempotency_key AS k (api_key_id, key, method, path, request_hash, locked_until)
VALUES (@api_key_id, @key, @method, @path, @request_hash,
        now() + make_interval(secs => sqlc.arg('lock_seconds')::double precision))
ON CONFLICT (api_key_id, key) DO UPDATE
SET method = EXCLUDED.method, path = EXCLUDED.path, request_hash = EXCLUDED.request_hash,
    response_status = NULL, response_body = NULL, response_headers = '{}',
    locked_until = EXCLUDED.locked_until, created_at = now(), expires_at = now() + interval '24 hours'
WHERE k.expires_at <= now()
   OR (k.response_status IS NULL AND k.locked_until <= now() AND k.method = EXCLUDED.method
       AND k.path = EXCLUDED.path AND k.request_hash = EXCLUDED.request_hash)
RETURNING api_key_id;

-- name: IdempotencyKeyGetRequest :one
SELECT method, path, request_hash, response_status, response_body, response_headers, locked_until
FROM ax.idempotency_key
WHERE api_key_id = @api_key_id AND key = @key AND expires_at > now();

-- IdempotencyKeyStoreResponse remembers the response of the request holding
-- the key.
-- name: IdempotencyKeyStoreResponse :exec
UPDATE ax.idempotency_key
SET response_status = @response_status, response_body = @response_body,
    response_headers = @response_headers, locked_until = NULL
WHERE api_key_id = @api_key_id AND key = @key AND response_status IS NULL;

-- IdempotencyKeyReleaseRequest frees a key whose request failed in a way a
-- retry may fix (5xx, 429): the retry runs again.
-- name: IdempotencyKeyReleaseRequest :exec
DELETE FROM ax.idempotency_key
WHERE api_key_id = @api_key_id AND key = @key AND response_status IS NULL;

-- IdempotencyKeyExtend keeps a key live until at least @until.
-- name: IdempotencyKeyExtend :exec
UPDATE ax.idempotency_key SET expires_at = greatest(expires_at, @until::timestamptz)
WHERE api_key_id = @api_key_id AND key = @key;
