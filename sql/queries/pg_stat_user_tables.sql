-- TableDeadTuples reads the statistics' live and dead row estimates of
-- ax's tables named in @names (what autovacuum decides by).
-- name: TableDeadTuples :many
SELECT relname::text AS name, coalesce(n_live_tup, 0)::bigint AS live, coalesce(n_dead_tup, 0)::bigint AS dead
FROM pg_catalog.pg_stat_user_tables
WHERE schemaname = 'ax' AND relname = ANY(@names::text[]);
