-- +goose Up
-- A run starting (pending → running) changes no column an index reads, so
-- Postgres can update its row in place (a HOT update: no new index
-- entries) when the page has room. The unfinished-runs index therefore
-- reads finished_at, not state (the two agree: execution_finished_when_final),
-- and pages keep a fifth free for that update. Starting 433 runs took
-- 3.0 ms this way against 5.8 ms before (EXPLAIN ANALYZE, 10,000 runs).
-- Queries that look for unfinished runs by job say finished_at IS NULL.
DROP INDEX ax.execution_unfinished_idx;
CREATE INDEX execution_unfinished_idx ON ax.execution (job_id) WHERE finished_at IS NULL;
ALTER TABLE ax.execution SET (fillfactor = 80);

-- +goose Down
ALTER TABLE ax.execution RESET (fillfactor);
DROP INDEX ax.execution_unfinished_idx;
CREATE INDEX execution_unfinished_idx ON ax.execution (job_id) WHERE state IN ('pending', 'running');
