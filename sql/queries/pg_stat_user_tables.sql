-- TableDeadTuples reads the statistics' live and dead row estimates of
-- ax's tables named in @names (what autovacuum decides by), and whether
-- the current role may vacuum each: VACUUM skips, with only a warning, a
-- table whose owner (or database owner) the role is not, nor a superuser
-- (who has every role's privileges).
-- name: TableDeadTuples :many
SELECT s.relname::text AS name, coalesce(s.n_live_tup, 0)::bigint AS live, coalesce(s.n_dead_tup, 0)::bigint AS dead,
       (pg_catalog.pg_has_role(c.relowner, 'USAGE') OR pg_catalog.pg_has_role(d.datdba, 'USAGE'))::boolean AS may_vacuum
FROM pg_catalog.pg_stat_user_tables s
JOIN pg_catalog.pg_class c ON c.oid = s.relid
JOIN pg_catalog.pg_database d ON d.datname = current_database()
WHERE s.schemaname = 'ax' AND s.relname = ANY(@names::text[]);
