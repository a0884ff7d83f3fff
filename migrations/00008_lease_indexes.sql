-- +goose Up
-- Leasing reads each group of candidates through its own index so that a
-- backlog routed to other agents is never scanned: unassigned tasks by
-- priority here, an agent's own through task_preferred_idx, starved and
-- stealable ones by age through task_pending_age_idx (agentless HTTP
-- tasks, run by ax serve, stay out of the agents' index). The general
-- pending index is no longer read and only cost writes.
CREATE INDEX task_unassigned_idx ON ax.task (priority DESC, created_at)
    WHERE state = 'pending' AND preferred_agent_id IS NULL AND NOT agentless;
DROP INDEX ax.task_pending_idx;

-- +goose Down
CREATE INDEX task_pending_idx ON ax.task (priority DESC, created_at) WHERE state = 'pending';
DROP INDEX ax.task_unassigned_idx;
