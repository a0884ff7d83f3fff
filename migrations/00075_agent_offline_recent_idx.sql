-- +goose Up

-- The agents metric (AgentCountByState) counts the offline agents heard
-- from in the last day; agents are never deleted, so without an index of
-- offline agents by their last heartbeat every scrape of every replica
-- read them all. Partial: a live agent's heartbeat adds no entry to it.
CREATE INDEX agent_offline_recent_idx ON ax.agent (last_heartbeat_at) WHERE state = 'offline';

-- +goose Down
DROP INDEX ax.agent_offline_recent_idx;
