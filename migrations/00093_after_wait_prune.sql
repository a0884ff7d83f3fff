-- +goose Up

-- The cleanup deletes the waits of jobs that run after other jobs once
-- they are past the history horizon (AfterWaitPrune): oldest first, read
-- through this index rather than every wait of every downstream job.
CREATE INDEX after_wait_settled_idx ON ax.after_wait (updated_at) WHERE state <> 'ready';

-- +goose Down
DROP INDEX ax.after_wait_settled_idx;
