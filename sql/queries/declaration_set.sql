-- DeclarationSetEnsure creates a declaration set's row unless it exists,
-- so DeclarationSetLock has a row to lock.
-- name: DeclarationSetEnsure :exec
INSERT INTO ax.declaration_set (managed_by) VALUES (@managed_by)
ON CONFLICT (managed_by) DO NOTHING;

-- DeclarationSetLock locks a declaration set's row: declarations of one
-- set apply one at a time.
-- name: DeclarationSetLock :one
SELECT * FROM ax.declaration_set WHERE managed_by = @managed_by FOR UPDATE;

-- name: DeclarationSetGet :one
SELECT * FROM ax.declaration_set WHERE managed_by = @managed_by;

-- DeclarationSetApplied records the declaration just applied.
-- name: DeclarationSetApplied :exec
UPDATE ax.declaration_set
SET version = @version, source = @source, jobs = @jobs, applied_at = now()
WHERE managed_by = @managed_by;

-- DeclarationSetConflict records a declaration refused as a conflict.
-- name: DeclarationSetConflict :exec
INSERT INTO ax.declaration_set AS s (managed_by, conflict_version, conflict_source, conflict_reason, conflict_at)
VALUES (@managed_by, @version, @source, @reason, now())
ON CONFLICT (managed_by) DO UPDATE
SET conflict_version = excluded.conflict_version, conflict_source = excluded.conflict_source,
    conflict_reason = excluded.conflict_reason, conflict_at = excluded.conflict_at;

-- DeclarationSetClaim makes the set owned by the groups of the key that
-- applies it first (NULL: a key limited to no groups).
-- name: DeclarationSetClaim :exec
UPDATE ax.declaration_set SET owned = true, owner_groups = sqlc.narg('groups')::text[]
WHERE managed_by = @managed_by AND NOT owned;

-- DeclarationSetList returns the sets a key limited to groups may see:
-- owned by some of those groups, with jobs only in them. NULL groups: all.
-- name: DeclarationSetList :many
SELECT s.* FROM ax.declaration_set s
WHERE sqlc.narg('groups')::text[] IS NULL
   OR (s.owned AND s.owner_groups IS NOT NULL AND s.owner_groups <@ sqlc.narg('groups')::text[]
       AND NOT EXISTS (SELECT 1 FROM ax.job j
                       WHERE j.managed_by = s.managed_by AND NOT j.group_name = ANY (sqlc.narg('groups')::text[])))
ORDER BY s.managed_by;
