-- +goose Up
-- Agents and the lease protocol: who runs what, under which lease, and the
-- event trail of every task.

CREATE TYPE ax.agent_state AS ENUM ('active', 'draining', 'offline', 'quarantined');

CREATE TABLE ax.agent (
    id                 uuid PRIMARY KEY,
    name               text NOT NULL,
    labels             jsonb NOT NULL DEFAULT '{}',
    capacity           integer NOT NULL,
    version            text NOT NULL DEFAULT '',
    state              ax.agent_state NOT NULL DEFAULT 'active',
    ready              boolean NOT NULL DEFAULT true,
    api_key_id         uuid NOT NULL REFERENCES ax.api_key (id) ON DELETE CASCADE,
    running            integer NOT NULL DEFAULT 0,
    cpu                double precision NOT NULL DEFAULT 0,
    load1              double precision NOT NULL DEFAULT 0,
    memory             double precision NOT NULL DEFAULT 0,
    registered_at      timestamptz NOT NULL DEFAULT now(),
    last_heartbeat_at  timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT agent_capacity_range CHECK (capacity BETWEEN 1 AND 10000),
    CONSTRAINT agent_labels_is_object CHECK (jsonb_typeof(labels) = 'object')
);
CREATE INDEX agent_live_idx ON ax.agent (last_heartbeat_at) WHERE state IN ('active', 'draining');

ALTER TABLE ax.task
    ADD COLUMN agent_id uuid,
    ADD COLUMN lease_token uuid,
    ADD COLUMN lease_expires_at timestamptz,
    ADD COLUMN leased_at timestamptz,
    ADD CONSTRAINT task_lease_consistent CHECK (
        (state IN ('leased', 'running')) = (lease_token IS NOT NULL AND lease_expires_at IS NOT NULL));

-- The reaper finds expired leases and overdue tasks through this index.
CREATE INDEX task_leased_idx ON ax.task (lease_expires_at) WHERE state IN ('leased', 'running');
CREATE INDEX task_agent_idx ON ax.task (agent_id) WHERE state IN ('leased', 'running');

CREATE TYPE ax.task_event_kind AS ENUM ('state', 'log');

-- task_event is the audit trail: every state change and log chunk of a
-- task, keyed by execution and shard.
CREATE TABLE ax.task_event (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    task_id       uuid NOT NULL,
    execution_id  uuid NOT NULL,
    shard_index   integer NOT NULL,
    attempt       integer NOT NULL,
    kind          ax.task_event_kind NOT NULL,
    state         ax.task_state,
    agent_id      uuid,
    stream        text,
    message       text NOT NULL DEFAULT '',
    at            timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX task_event_execution_idx ON ax.task_event (execution_id, id);

-- What runs where, right now.
CREATE VIEW ax.running_tasks AS
SELECT a.name AS agent, j.name AS job, t.execution_id, t.shard_index, t.state, t.attempt,
       t.leased_at, t.lease_expires_at
FROM ax.task t
JOIN ax.job j ON j.id = t.job_id
LEFT JOIN ax.agent a ON a.id = t.agent_id
WHERE t.state IN ('leased', 'running')
ORDER BY t.leased_at;

-- +goose Down
DROP VIEW ax.running_tasks;
DROP TABLE ax.task_event;
DROP TYPE ax.task_event_kind;
DROP INDEX ax.task_agent_idx;
DROP INDEX ax.task_leased_idx;
ALTER TABLE ax.task
    DROP CONSTRAINT task_lease_consistent,
    DROP COLUMN leased_at,
    DROP COLUMN lease_expires_at,
    DROP COLUMN lease_token,
    DROP COLUMN agent_id;
DROP TABLE ax.agent;
DROP TYPE ax.agent_state;
