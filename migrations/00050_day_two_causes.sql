-- +goose Up

-- Day-two operations (issue #40) add two causes of a run: a re-run of an
-- earlier run (POST /v1/executions/{id}/rerun) and a tick filled in by a
-- backfill (POST /v1/jobs/{id}/backfill). They are added alone, in their
-- own migration: a new enum value may not be used in the transaction that
-- adds it, and 00051 uses them in an index.
ALTER TYPE ax.execution_cause ADD VALUE IF NOT EXISTS 'rerun';
ALTER TYPE ax.execution_cause ADD VALUE IF NOT EXISTS 'backfill';

-- +goose Down

-- An enum value cannot be dropped: runs caused 'rerun' or 'backfill' stay
-- readable.
SELECT 1;
