-- +goose Up
-- Routing: each task may prefer an agent (chosen by the job's strategy when
-- the task is made); the lease broker hands an agent its own preferred
-- tasks first, then unassigned ones, then others' tasks whose preference
-- has waited longer than the steal delay. Broadcast tasks are pinned to
-- their agent and never stolen.

ALTER TABLE ax.agent
    ADD COLUMN weight integer NOT NULL DEFAULT 1,
    -- health_since starts the sliding window of results that decides
    -- quarantine; it moves forward when an agent is restored, so old
    -- failures do not quarantine it again.
    ADD COLUMN health_since timestamptz NOT NULL DEFAULT now(),
    ADD COLUMN quarantined_at timestamptz,
    -- last_probe_at rate-limits the work a quarantined agent is given to
    -- prove itself again.
    ADD COLUMN last_probe_at timestamptz,
    ADD CONSTRAINT agent_weight_range CHECK (weight BETWEEN 1 AND 1000),
    ADD CONSTRAINT agent_quarantined_at_set CHECK ((state = 'quarantined') = (quarantined_at IS NOT NULL));

ALTER TABLE ax.task
    ADD COLUMN preferred_agent_id uuid,
    -- fallback_agent_id is the runner-up of keyed strategies: it takes the
    -- task first when the preferred agent does not, so a key that moves
    -- moves to one agent, the one that owns it once the other is gone.
    ADD COLUMN fallback_agent_id uuid,
    ADD COLUMN pinned boolean NOT NULL DEFAULT false,
    ADD COLUMN route_key text NOT NULL DEFAULT '',
    ADD CONSTRAINT task_pinned_has_agent CHECK (NOT pinned OR preferred_agent_id IS NOT NULL);

-- An agent's own preferred tasks, in lease order.
CREATE INDEX task_preferred_idx ON ax.task (preferred_agent_id, priority DESC, created_at)
    WHERE state = 'pending' AND preferred_agent_id IS NOT NULL;
-- Recent outcomes per agent (sliding windows of quarantine, success rate
-- and duration) are read from task events.
CREATE INDEX task_event_agent_idx ON ax.task_event (agent_id, at)
    WHERE kind = 'state' AND agent_id IS NOT NULL;

-- Shards without a parameter list get ranges of [shard_range_from,
-- shard_range_to), by default the 32-bit hash space.
ALTER TABLE ax.job
    ADD COLUMN shard_range_from bigint NOT NULL DEFAULT 0,
    ADD COLUMN shard_range_to bigint NOT NULL DEFAULT 4294967296,
    ADD CONSTRAINT job_shard_range_order CHECK (shard_range_from < shard_range_to);

-- An execution may end without tasks (a broadcast with no live agent);
-- error says why.
ALTER TABLE ax.execution ADD COLUMN error text;

-- +goose Down
ALTER TABLE ax.execution DROP COLUMN error;
ALTER TABLE ax.job
    DROP CONSTRAINT job_shard_range_order,
    DROP COLUMN shard_range_to,
    DROP COLUMN shard_range_from;
DROP INDEX ax.task_event_agent_idx;
DROP INDEX ax.task_preferred_idx;
ALTER TABLE ax.task
    DROP CONSTRAINT task_pinned_has_agent,
    DROP COLUMN route_key,
    DROP COLUMN pinned,
    DROP COLUMN fallback_agent_id,
    DROP COLUMN preferred_agent_id;
ALTER TABLE ax.agent
    DROP CONSTRAINT agent_quarantined_at_set,
    DROP CONSTRAINT agent_weight_range,
    DROP COLUMN last_probe_at,
    DROP COLUMN quarantined_at,
    DROP COLUMN health_since,
    DROP COLUMN weight;
