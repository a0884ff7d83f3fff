-- +goose Up

-- Jobs that run after other jobs (issue #40 part 3) add a trigger kind, a
-- cause of a run, and a reason a logical time did not fire. They are added
-- alone: a new enum value may not be used in the transaction that adds it,
-- and 00060 uses them.
ALTER TYPE ax.trigger_kind ADD VALUE IF NOT EXISTS 'after';
ALTER TYPE ax.execution_cause ADD VALUE IF NOT EXISTS 'after';
ALTER TYPE ax.skip_reason ADD VALUE IF NOT EXISTS 'upstream_failed';

-- +goose Down

-- An enum value cannot be dropped: jobs, runs and skips using them stay
-- readable.
SELECT 1;
