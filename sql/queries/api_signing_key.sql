-- HMAC-signed API requests: signing keys, each acting for an API key
-- (nonce.sql makes a signed request usable once).

-- name: APISigningKeyInsert :one
INSERT INTO ax.api_signing_key (id, api_key_id, secret)
VALUES (@id, @api_key_id, @secret)
RETURNING id, api_key_id, created_at;

-- APISigningKeyGet returns a live signing key with the API key it acts
-- for (both must be unrevoked).
-- name: APISigningKeyGet :one
SELECT sk.id, sk.secret, k.id AS api_key_id, k.name, k.scopes::text[] AS scopes, k.labels, k.groups, k.minted_by
FROM ax.api_signing_key sk
JOIN ax.api_key k ON k.id = sk.api_key_id
WHERE sk.id = @id AND sk.revoked_at IS NULL AND k.revoked_at IS NULL;
