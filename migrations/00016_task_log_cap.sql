-- +goose Up
-- log_bytes counts the output bytes agents sent for a task (every attempt),
-- so TaskLogAppend can stop storing at the server's per-task cap in the
-- same statement that stores: the task row's lock orders parallel appends,
-- and the one append that crosses the cap records the truncation marker.
-- A constant default: no table rewrite.
ALTER TABLE ax.task ADD COLUMN log_bytes bigint NOT NULL DEFAULT 0;

-- Time zones were stored as spelled ("Europe//./Paris"), which Postgres
-- refuses in AT TIME ZONE; the API now stores the canonical name. Clean
-- the path noise of existing rows the same way (empty and "." segments).
UPDATE ax.job
SET timezone = array_to_string(array(
        SELECT s FROM unnest(string_to_array(timezone, '/')) WITH ORDINALITY AS u(s, n)
        WHERE s NOT IN ('', '.') ORDER BY n), '/')
WHERE timezone ~ '(^|/)\.?(/|$)';

-- +goose Down
ALTER TABLE ax.task DROP COLUMN log_bytes;
