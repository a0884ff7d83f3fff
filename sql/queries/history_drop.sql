-- HistoryDropInsert records a dropped history partition.
-- name: HistoryDropInsert :exec
INSERT INTO ax.history_drop (table_name, range_from, range_to, row_count, min_id, max_id)
VALUES (sqlc.arg('table_name'), sqlc.arg('range_from'), sqlc.arg('range_to'), sqlc.arg('row_count'),
        sqlc.narg('min_id'), sqlc.narg('max_id'));

-- HistoryDropCovers says whether a dropped partition of @table_name held
-- rows with ids around @id: an id not found then was removed by retention.
-- One row per dropped partition (a few hundred a year): read whole.
-- name: HistoryDropCovers :one
SELECT EXISTS (SELECT 1 FROM ax.history_drop
               WHERE table_name = sqlc.arg('table_name') AND sqlc.arg('id')::uuid BETWEEN min_id AND max_id)::boolean;

-- HistoryDropList returns the latest @max drops, newest first.
-- name: HistoryDropList :many
SELECT * FROM ax.history_drop ORDER BY id DESC LIMIT sqlc.arg('max')::integer;
