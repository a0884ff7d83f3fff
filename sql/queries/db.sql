-- Statements on no table: the database clock, NOTIFY and advisory locks
-- (their Go functions are in db/db.go).

-- name: Now :one
SELECT now()::timestamptz AS now;

-- name: Notify :exec
SELECT pg_notify(@channel::text, @payload::text);

-- TryXactLock takes a transaction-scoped advisory lock if it is free.
-- name: TryXactLock :one
SELECT pg_try_advisory_xact_lock(@lock_id::bigint)::boolean AS locked;

-- TrySessionLock takes a session advisory lock if it is free; it is held
-- until the connection closes (a leader's role for as long as it lives).
-- name: TrySessionLock :one
SELECT pg_try_advisory_lock(@id::bigint)::boolean AS locked;
