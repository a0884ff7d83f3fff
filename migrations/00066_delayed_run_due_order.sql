-- +goose Up

-- Delayed runs due at the same instant fire in the order they were
-- scheduled: the claim orders by (run_at, id), ids being UUIDv7s made in
-- order as runs are scheduled. Ordered by run_at alone, a tie came out
-- as the plan read it (TestDelayedRunsFollowTheJobsPolicies: of two runs
-- of a forbid job due together, the second fired once in CI). The index
-- gives that order itself, so a claim still reads only what it takes
-- when many runs share their time (an incremental sort over run_at alone
-- would read every run of the instant first).
DROP INDEX ax.delayed_run_due_idx;
CREATE INDEX delayed_run_due_idx ON ax.delayed_run (run_at, id) WHERE cancelled_at IS NULL AND NOT held;

-- +goose Down

DROP INDEX ax.delayed_run_due_idx;
CREATE INDEX delayed_run_due_idx ON ax.delayed_run (run_at) WHERE cancelled_at IS NULL AND NOT held;
