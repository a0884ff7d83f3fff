-- +goose Up

-- GET /v1/agents lists agents a page at a time in (name, id) order, the
-- agents not offline unless asked for another state. Those are read
-- through agent_present_idx and sorted (as many as the fleet). The
-- offline ones are most of the table in time (agents are never deleted
-- and each registration is a new one: a fleet whose pods restart daily
-- leaves hundreds of thousands), so a page of them is read in order
-- from an index of their own. It is partial: the heartbeats of live
-- agents, which update their rows several times a minute, add no entry
-- to it.
CREATE INDEX agent_offline_idx ON ax.agent (name, id) WHERE state = 'offline';

-- +goose Down
DROP INDEX ax.agent_offline_idx;
