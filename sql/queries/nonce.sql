-- Nonces of HMAC-signed API requests (api_signing_key.sql): they make a
-- signed request usable once.

-- NonceUse checks a signed request's timestamp against the database clock
-- (within @window_seconds either way) and, when fresh, records its nonce
-- until the timestamp would be refused anyway. fresh_nonce is false when
-- the nonce was seen within that time: a replay.
-- name: NonceUse :one
WITH clock AS (
    SELECT abs(extract(epoch FROM now()) - sqlc.arg('timestamp')::bigint) <= sqlc.arg('window_seconds')::bigint AS fresh
), used AS (
    INSERT INTO ax.nonce AS n (key_id, nonce, expires_at)
    SELECT @key_id, @nonce,
           to_timestamp(sqlc.arg('timestamp')::bigint) + make_interval(secs => sqlc.arg('window_seconds')::double precision)
    FROM clock WHERE fresh
    ON CONFLICT (key_id, nonce) DO UPDATE SET expires_at = EXCLUDED.expires_at
    WHERE n.expires_at <= now()
    RETURNING 1
)
SELECT (SELECT fresh FROM clock)::boolean AS fresh_timestamp,
       EXISTS (SELECT 1 FROM used)::boolean AS fresh_nonce,
       extract(epoch FROM now())::bigint AS server_time;

-- name: NonceDeleteExpired :execrows
DELETE FROM ax.nonce WHERE expires_at <= now();
