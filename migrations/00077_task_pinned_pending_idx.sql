-- +goose Up

-- A pending task pinned to an agent that went offline (a broadcast run's
-- share) waited for good: no other agent may take it, and its run never
-- ended. The reaper now fails such tasks (TaskFailPinnedOfOffline); it
-- finds their agents through this index (a skip scan, one probe an agent
-- with pinned tasks waiting), which holds broadcast tasks only while they
-- wait.
CREATE INDEX task_pinned_pending_idx ON ax.task (preferred_agent_id) WHERE pinned AND state = 'pending';

-- +goose Down
DROP INDEX ax.task_pinned_pending_idx;
