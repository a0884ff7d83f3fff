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

-- name: IdempotencyKeyGet :one
SELECT * FROM ax.idempotency_key
WHERE api_key_id = @api_key_id AND key = @key AND expires_at > now();

-- name: IdempotencyKeyDeleteExpired :execrows
DELETE FROM ax.idempotency_key WHERE expires_at <= now();
