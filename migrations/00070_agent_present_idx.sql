-- +goose Up

-- Agents are never deleted (their ids stay in the history), and each
-- registration is a new one: a fleet whose pods restart daily leaves
-- hundreds of thousands of offline rows in a year. The router reads the
-- live agents once a second inside fires (AgentListCandidates: active or
-- quarantined), and the reaper marks the silent ones offline (active,
-- draining or quarantined); neither predicate implies the one of
-- agent_live_idx (active or draining), so both read the whole table. One
-- index of the agents not offline serves both, and the broadcast plan's
-- active ones, and replaces agent_live_idx: a heartbeat updates one
-- index entry, not two.
CREATE INDEX agent_present_idx ON ax.agent (last_heartbeat_at) WHERE state IN ('active', 'draining', 'quarantined');
DROP INDEX ax.agent_live_idx;

-- +goose Down
CREATE INDEX agent_live_idx ON ax.agent (last_heartbeat_at) WHERE state IN ('active', 'draining');
DROP INDEX ax.agent_present_idx;
