-- Scopes are read and written as text[]: pgx then needs no registered
-- enum type, and Postgres still checks each value against ax.api_scope.

-- name: APIKeyInsert :one
INSERT INTO ax.api_key (id, name, key_hash, key_prefix, scopes, labels, groups, minted_by)
VALUES (@id, @name, @key_hash, @key_prefix, CAST(sqlc.arg(scopes)::text[] AS ax.api_scope[]),
        sqlc.narg('labels')::jsonb, sqlc.narg('groups')::text[], sqlc.narg('minted_by')::uuid)
RETURNING id, name, key_prefix, scopes::text[] AS scopes, labels, groups, minted_by, created_at, last_used_at, revoked_at;

-- APIKeyAuthenticate finds a live key by hash and stamps its use, at most
-- once a minute so hot keys do not write on every request.
-- name: APIKeyAuthenticate :one
WITH found AS (
    SELECT k.id, k.name, k.scopes, k.labels, k.groups, k.minted_by, k.last_used_at FROM ax.api_key k
    WHERE k.key_hash = @key_hash AND k.revoked_at IS NULL
), touched AS (
    UPDATE ax.api_key SET last_used_at = now()
    FROM found
    WHERE api_key.id = found.id
      AND (found.last_used_at IS NULL OR found.last_used_at < now() - interval '1 minute')
)
SELECT found.id, found.name, found.scopes::text[] AS scopes, found.labels, found.groups, found.minted_by FROM found;

-- APIKeyList returns up to @max keys, revoked ones included, oldest first
-- (by creation, then id), after the key @after (none: from the first),
-- through api_key_created_idx (migration 00092). An @after that is no
-- key lists none (the caller tells that from the end with APIKeyExists),
-- never from the first again.
-- name: APIKeyList :many
SELECT k.id, k.name, k.key_prefix, k.scopes::text[] AS scopes, k.labels, k.groups, k.minted_by, k.created_at,
       k.last_used_at, k.revoked_at
FROM ax.api_key k
WHERE (k.created_at, k.id) > (coalesce((SELECT c.created_at FROM ax.api_key c WHERE c.id = sqlc.narg('after')::uuid),
                                        CASE WHEN sqlc.narg('after')::uuid IS NULL THEN '-infinity'::timestamptz
                                             ELSE 'infinity'::timestamptz END),
                               coalesce(sqlc.narg('after')::uuid, '00000000-0000-0000-0000-000000000000'))
ORDER BY k.created_at, k.id
LIMIT sqlc.arg('max')::integer;

-- APIKeyExists says whether a key of this id exists, revoked or not.
-- name: APIKeyExists :one
SELECT EXISTS (SELECT 1 FROM ax.api_key WHERE id = @id)::boolean;

-- APIKeyRevoke revokes a key; the trigger api_key_revoked revokes the
-- agent tokens it minted with it, and every replica forgets its cache.
-- name: APIKeyRevoke :execrows
UPDATE ax.api_key SET revoked_at = now() WHERE id = @id AND revoked_at IS NULL;

-- APIKeyEnsure stores a key unless one with the same hash exists: how
-- `ax serve` installs the bootstrap admin key from AX_ADMIN_KEY on every
-- start without duplicating it.
-- name: APIKeyEnsure :exec
INSERT INTO ax.api_key (id, name, key_hash, key_prefix, scopes)
VALUES (@id, @name, @key_hash, @key_prefix, CAST(sqlc.arg(scopes)::text[] AS ax.api_scope[]))
ON CONFLICT (key_hash) DO NOTHING;
