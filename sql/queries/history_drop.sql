-- HistoryDropInsert records a dropped history partition.
-- name: HistoryDropInsert :exec
INSERT INTO ax.history_drop (table_name, range_from, range_to, row_count)
VALUES (@table_name, @range_from, @range_to, @row_count);
