-- HistorySettingGet returns the server-wide retention, the partition
-- width and the horizon of the partitions made.
-- name: HistorySettingGet :one
SELECT extract(epoch FROM finished_retention)::double precision AS finished_seconds,
       extract(epoch FROM failed_retention)::double precision AS failed_seconds,
       extract(epoch FROM partition_width)::double precision AS width_seconds,
       made_until
FROM ax.history_setting;

-- HistorySettingApply stores a replica's retention flags (the last replica
-- started wins; replicas should agree).
-- name: HistorySettingApply :exec
UPDATE ax.history_setting
SET finished_retention = make_interval(secs => sqlc.arg('finished_seconds')::double precision),
    failed_retention = make_interval(secs => sqlc.arg('failed_seconds')::double precision),
    updated_at = now();

-- HistorySetWidth changes the width of the partitions made from now on
-- (ax.history_set_width: empty partitions made ahead are made again).
-- name: HistorySetWidth :exec
SELECT ax.history_set_width(make_interval(secs => sqlc.arg('width_seconds')::double precision));

-- HistoryMakePartitions makes the history partitions up to the longest
-- retention in use (server-wide or any job's) past @now, plus two
-- partition widths of margin, and never more than MaxPartitionsAhead (1000)
-- widths ahead; at most 50 partitions a call (each takes locks until its
-- transaction ends: the caller calls again while it made 50). Returns how
-- many it made.
-- name: HistoryMakePartitions :one
SELECT ax.history_make_partitions(least(
           coalesce(sqlc.narg('now')::timestamptz, now()) + 2 * s.partition_width
           + ax.longest_retention(),
           coalesce(sqlc.narg('now')::timestamptz, now()) + 1000 * s.partition_width,
           greatest(s.made_until, coalesce(sqlc.narg('now')::timestamptz, now())) + 50 * s.partition_width))::integer AS made
FROM ax.history_setting s;

-- HistoryHorizon is the instant before which no run is kept in history
-- (ax.history_horizon, migration 00091).
-- name: HistoryHorizon :one
SELECT ax.history_horizon(now())::timestamptz AS horizon;

-- HistoryPartitionsPassed lists the history partitions whose whole range
-- is at or before @now: every row in them may be removed.
-- name: HistoryPartitionsPassed :many
SELECT c.relname::text AS partition_name, p.relname::text AS table_name,
       (m.b)[1]::timestamptz AS range_from, (m.b)[2]::timestamptz AS range_to
FROM pg_catalog.pg_inherits i
JOIN pg_catalog.pg_class c ON c.oid = i.inhrelid
JOIN pg_catalog.pg_class p ON p.oid = i.inhparent
JOIN pg_catalog.pg_namespace n ON n.oid = p.relnamespace
CROSS JOIN LATERAL (SELECT regexp_match(pg_catalog.pg_get_expr(c.relpartbound, c.oid),
                                        'FROM \(''(\d{4}-\d\d-\d\d [^'']*)''\) TO \(''(\d{4}-\d\d-\d\d [^'']*)''\)') AS b) m
WHERE n.nspname = 'ax' AND p.relname IN ('execution_history', 'task_history')
  AND (m.b)[2]::timestamptz <= coalesce(sqlc.narg('now')::timestamptz, now())
ORDER BY range_from, table_name;

-- HistoryMoveLeftovers moves to history up to @max runs that ended while
-- one of their tasks was still in flight (their tasks have ended since).
-- name: HistoryMoveLeftovers :one
SELECT ax.history_move(ARRAY(SELECT e.id FROM ax.execution e WHERE e.finished_at IS NOT NULL
                             ORDER BY e.finished_at LIMIT sqlc.arg('max')::integer), now())::integer AS moved;

-- HistoryDetachedLeftovers lists tables of schema ax named like history
-- partitions (execution_hYYYYMMDDtHHMMSS, task_h…, with retain_until), not
-- partitions now: detached by a maintenance pass that stopped before dropping
-- them.
-- name: HistoryDetachedLeftovers :many
SELECT c.relname::text
FROM pg_catalog.pg_class c
JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = 'ax' AND c.relkind = 'r' AND NOT c.relispartition
  AND c.relname ~ '^(execution|task)_h\d{8}t\d{6}$'
  AND EXISTS (SELECT 1 FROM pg_catalog.pg_attribute a
              WHERE a.attrelid = c.oid AND a.attname = 'retain_until' AND NOT a.attisdropped)
ORDER BY 1;

-- Run-keyed partitions (migration 00026): ax.task_event, ax.callback and
-- ax.callback_attempt by RANGE (execution_id), ax.skipped_fire by RANGE
-- (recorded_at).

-- KeyedPartitionsMake makes the partitions of @table_name up to two
-- partition widths past @now (ax.retention_extend); returns how many.
-- name: KeyedPartitionsMake :one
SELECT ax.retention_extend(sqlc.arg('table_name')::text, coalesce(sqlc.narg('now')::timestamptz, now()))::integer AS made;

-- KeyedRunPartitionsDroppable lists the partitions of the run-keyed
-- tables (not the spill) whose id range ended a partition width before
-- @now and holds the id of no execution, live or in history (a probe of
-- each table's id index per partition). Their bounds are given as the
-- instants of the ids (the epoch for the low partition: not -infinity, which
-- time.Time cannot hold).
-- name: KeyedRunPartitionsDroppable :many
SELECT p.partition_name, p.table_name,
       coalesce(ax.uuid_v7_time(p.lo), 'epoch')::timestamptz AS range_from,
       ax.uuid_v7_time(p.hi)::timestamptz AS range_to
FROM (SELECT c.relname::text AS partition_name, t.relname::text AS table_name,
             (m.b)[1]::uuid AS lo, (m.b)[2]::uuid AS hi
      FROM pg_catalog.pg_inherits i
      JOIN pg_catalog.pg_class c ON c.oid = i.inhrelid
      JOIN pg_catalog.pg_class t ON t.oid = i.inhparent
      JOIN pg_catalog.pg_namespace n ON n.oid = t.relnamespace
      CROSS JOIN LATERAL (SELECT regexp_match(pg_catalog.pg_get_expr(c.relpartbound, c.oid),
                                              'FROM \((?:''([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})''|MINVALUE)\) TO \((?:''([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})''|MAXVALUE)\)') AS b) m
      WHERE n.nspname = 'ax' AND t.relname IN ('task_event', 'callback', 'callback_attempt')
        AND (m.b)[2] IS NOT NULL) p
WHERE p.hi <= ax.uuid_v7_floor(coalesce(sqlc.narg('now')::timestamptz, now())
                               - (SELECT s.partition_width FROM ax.history_setting s))
  AND NOT EXISTS (SELECT 1 FROM ax.execution e
                  WHERE e.id >= coalesce(p.lo, '00000000-0000-0000-0000-000000000000') AND e.id < p.hi)
  AND NOT EXISTS (SELECT 1 FROM ax.execution_history e
                  WHERE e.id >= coalesce(p.lo, '00000000-0000-0000-0000-000000000000') AND e.id < p.hi)
ORDER BY range_to, p.table_name;

-- KeyedSkipPartitionsPassed lists the partitions of ax.skipped_fire (not
-- the spill) whose range ended longer ago than the longest server
-- retention.
-- name: KeyedSkipPartitionsPassed :many
SELECT c.relname::text AS partition_name, t.relname::text AS table_name,
       coalesce((m.b)[1]::timestamptz, 'epoch')::timestamptz AS range_from, (m.b)[2]::timestamptz AS range_to
FROM pg_catalog.pg_inherits i
JOIN pg_catalog.pg_class c ON c.oid = i.inhrelid
JOIN pg_catalog.pg_class t ON t.oid = i.inhparent
JOIN pg_catalog.pg_namespace n ON n.oid = t.relnamespace
CROSS JOIN LATERAL (SELECT regexp_match(pg_catalog.pg_get_expr(c.relpartbound, c.oid),
                                        'FROM \((?:''(\d{4}-\d\d-\d\d [^'']*)''|MINVALUE)\) TO \((?:''(\d{4}-\d\d-\d\d [^'']*)''|MAXVALUE)\)') AS b) m
CROSS JOIN ax.history_setting s
WHERE n.nspname = 'ax' AND t.relname = 'skipped_fire' AND (m.b)[2] IS NOT NULL
  AND (m.b)[2]::timestamptz <= coalesce(sqlc.narg('now')::timestamptz, now())
                               - greatest(s.finished_retention, s.failed_retention)
ORDER BY range_to;

-- KeyedDetachedLeftovers lists tables of schema ax named like partitions
-- of the run-keyed tables or of ax.skipped_fire (<table>_p…) that are not
-- partitions now: detached by a maintenance pass that stopped before dropping
-- them.
-- name: KeyedDetachedLeftovers :many
SELECT c.relname::text
FROM pg_catalog.pg_class c
JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = 'ax' AND c.relkind = 'r' AND NOT c.relispartition
  AND c.relname ~ '^(task_event|callback|callback_attempt|skipped_fire)_p'
ORDER BY 1;
