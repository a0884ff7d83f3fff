-- +goose Up

-- Pinned tasks (a broadcast run's share of one agent: no other may take
-- it) leave task_pending_age_idx, the index the pick's starved and
-- stealable groups and the long polls' check walk pool by pool, oldest
-- first: they dropped every pinned task of another agent one by one. An
-- agent that stays busy, or stops polling without going offline, gathers
-- its share of each broadcast run: with 5,000 of them waiting an hour,
-- every other agent's lease in its pool read 10,002 task rows and its
-- idle check 11,000, and the check's bound on a long pool (its 1,000th
-- task's time stands for the rest) told it that a task was leasable an
-- hour ago, so its long polls woke and leased nothing, again and again,
-- until the backlog went. A pinned
-- task is read by its own agent only: through task_pinned_pending_idx,
-- now in not_before order within the agent so the pick's starved group
-- reads the agent's oldest first there. The old build's statements do
-- not say NOT pinned, so the rebuilt index no longer matches them: until
-- its replicas are replaced, their leases read ax.task whole (the
-- production guide says so, as for 00076).
DROP INDEX ax.task_pending_age_idx;
CREATE INDEX task_pending_age_idx ON ax.task (pool_id, not_before)
    WHERE state = 'pending' AND NOT no_agent AND NOT key_parked AND NOT floor_held AND NOT pinned;
DROP INDEX ax.task_pinned_pending_idx;
CREATE INDEX task_pinned_pending_idx ON ax.task (preferred_agent_id, not_before) WHERE pinned AND state = 'pending';

-- +goose Down
DROP INDEX ax.task_pinned_pending_idx;
CREATE INDEX task_pinned_pending_idx ON ax.task (preferred_agent_id) WHERE pinned AND state = 'pending';
DROP INDEX ax.task_pending_age_idx;
CREATE INDEX task_pending_age_idx ON ax.task (pool_id, not_before)
    WHERE state = 'pending' AND NOT no_agent AND NOT key_parked AND NOT floor_held;
