-- Console sessions (migration 00044): the cookie holds a random id, the
-- table its SHA-256.

-- name: ConsoleSessionInsert :exec
INSERT INTO ax.console_session (id_hash, key_id, csrf, expires_at, ends_at)
VALUES (@id_hash, @key_id, @csrf,
        now() + make_interval(secs => least(sqlc.arg(idle_seconds)::double precision, sqlc.arg(max_seconds)::double precision)),
        now() + make_interval(secs => sqlc.arg(max_seconds)::double precision));

-- ConsoleSessionGet finds a live session and its live key, and moves its
-- idle expiry forward, at most once a minute so pages do not write on
-- every request.
-- name: ConsoleSessionGet :one
WITH found AS (
    SELECT s.id_hash, s.csrf, s.last_seen_at, k.id, k.name, k.scopes, k.labels, k.groups, k.minted_by
    FROM ax.console_session s JOIN ax.api_key k ON k.id = s.key_id
    WHERE s.id_hash = @id_hash AND s.expires_at > now() AND k.revoked_at IS NULL
), touched AS (
    UPDATE ax.console_session
    SET last_seen_at = now(),
        expires_at = least(ends_at, now() + make_interval(secs => sqlc.arg(idle_seconds)::double precision))
    FROM found
    WHERE console_session.id_hash = found.id_hash AND found.last_seen_at < now() - interval '1 minute'
)
SELECT found.csrf, found.id, found.name, found.scopes::text[] AS scopes, found.labels, found.groups, found.minted_by FROM found;

-- name: ConsoleSessionDelete :execrows
DELETE FROM ax.console_session WHERE id_hash = @id_hash;

-- ConsoleSessionDeleteExpired deletes sessions that ended (idle or at
-- their absolute end); those of revoked keys are deleted on revocation.
-- name: ConsoleSessionDeleteExpired :execrows
DELETE FROM ax.console_session WHERE expires_at <= now();
