-- +goose Up

-- The cleanup's delete of runs cancelled more than a day ago
-- (DelayedRunDeleteCancelled, once a minute) read the whole table: a
-- million runs waiting made it a scan of about 100 MB a minute, however
-- few were cancelled. Indexed over the cancelled runs only, it reads
-- those; a pending run's insert and fire do not touch the index.
CREATE INDEX delayed_run_cancelled_idx ON ax.delayed_run (cancelled_at) WHERE cancelled_at IS NOT NULL;

-- +goose Down
DROP INDEX ax.delayed_run_cancelled_idx;
