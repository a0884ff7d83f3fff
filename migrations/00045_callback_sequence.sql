-- +goose Up
-- Callbacks get a per-job sequence number, gap-free over the job's runs
-- that send a callback, and a job may ask for its callbacks in sequence
-- order (callback_ordered). The number is taken from the job's counter
-- row (ax.callback_sequence) in the transaction that enqueues the
-- callback's delivery (CallbackTakeUnenqueued), so a rollback or a crash
-- gives it back and two enqueuers of one job take turns on the row. Only
-- jobs with a callback URL have a counter row; the row has no foreign key
-- (a flush must not fail on a job deleted meanwhile) and is dropped with
-- its job by the trigger below.
ALTER TABLE ax.job ADD COLUMN callback_ordered boolean NOT NULL DEFAULT false;

CREATE TABLE ax.callback_sequence (
    job_id        uuid PRIMARY KEY,
    last_sequence bigint NOT NULL,
    CONSTRAINT callback_sequence_positive CHECK (last_sequence >= 1)
);

ALTER TABLE ax.callback ADD COLUMN sequence bigint;

-- Callbacks enqueued before this migration are numbered in the order
-- they were written, and the counters start after them.
UPDATE ax.callback c SET sequence = n.seq
FROM (SELECT execution_id, row_number() OVER (PARTITION BY job_id ORDER BY created_at, execution_id) AS seq
      FROM ax.callback) n
WHERE c.execution_id = n.execution_id;
INSERT INTO ax.callback_sequence (job_id, last_sequence)
SELECT job_id, max(sequence) FROM ax.callback GROUP BY job_id;

-- An ordered delivery looks for an earlier callback of its job still
-- pending; only pending rows are indexed.
CREATE INDEX callback_job_pending_idx ON ax.callback (job_id, sequence) WHERE state = 'pending';

-- +goose StatementBegin
CREATE FUNCTION ax.callback_sequence_drop() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM ax.callback_sequence WHERE job_id = OLD.id;
    RETURN OLD;
END $$;
-- +goose StatementEnd
CREATE TRIGGER job_callback_sequence_drop AFTER DELETE ON ax.job
    FOR EACH ROW EXECUTE FUNCTION ax.callback_sequence_drop();

-- +goose Down
DROP TRIGGER job_callback_sequence_drop ON ax.job;
DROP FUNCTION ax.callback_sequence_drop();
DROP INDEX ax.callback_job_pending_idx;
ALTER TABLE ax.callback DROP COLUMN sequence;
DROP TABLE ax.callback_sequence;
ALTER TABLE ax.job DROP COLUMN callback_ordered;
