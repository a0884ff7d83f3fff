-- +goose Up
-- agentless marks jobs whose tasks ax serve runs itself instead of an
-- agent. The rule is db.Job.Agentless, in Go, and JobInsert and JobUpdate
-- write its answer with every definition; task inserts read the column
-- instead of spelling the rule again. This backfill applies the rule to
-- the jobs stored before: executor http, no target labels, not broadcast.
-- No default: a writer that forgets the column fails instead of storing
-- a wrong false.
ALTER TABLE ax.job ADD COLUMN agentless boolean NOT NULL DEFAULT false;
UPDATE ax.job SET agentless = true
WHERE executor_kind = 'http' AND target_labels = '{}'::jsonb AND route_strategy <> 'broadcast';
ALTER TABLE ax.job ALTER COLUMN agentless DROP DEFAULT;

-- +goose Down
ALTER TABLE ax.job DROP COLUMN agentless;
