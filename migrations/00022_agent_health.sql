-- +goose Up
-- Health that routing reads (issue #17): a smoothed load per agent, the
-- free disk it reports, where it runs (host name and IP), and that host on
-- the task events it causes. Additive only: columns with defaults or
-- nullable, no rewrite of ax.agent or ax.task_event.

ALTER TABLE ax.agent
    -- load is the agent's combined load (the busiest of running/capacity,
    -- CPU and memory use) smoothed over a few minutes: an exponential
    -- moving average updated by each heartbeat, load_at being when. A
    -- first heartbeat (load_at null) takes its sample as it is.
    ADD COLUMN load double precision NOT NULL DEFAULT 0,
    ADD COLUMN load_at timestamptz,
    -- disk_free_bytes is the free space of the agent's work disk at its
    -- last heartbeat; null when it did not say.
    ADD COLUMN disk_free_bytes bigint,
    -- host_name and host_ip are where the agent runs, as it registered.
    ADD COLUMN host_name text NOT NULL DEFAULT '',
    ADD COLUMN host_ip inet,
    ADD CONSTRAINT agent_disk_free_bytes_nonnegative CHECK (disk_free_bytes >= 0),
    ADD CONSTRAINT agent_host_name_length CHECK (length(host_name) <= 255);

-- The host of the agent behind a state event (lease, result, release,
-- reaped lease): which machine ran what, after the agent row is gone. A
-- failed attempt's event keeps its error code (ax.task.error_code holds
-- only the latest attempt's), which the error-share quarantine counts; a
-- success's event keeps its duration from lease to result, which
-- least_active's tie-break averages without reading tasks (which move to
-- history as their run ends).
ALTER TABLE ax.task_event
    ADD COLUMN worker_host text,
    ADD COLUMN worker_ip inet,
    ADD COLUMN error_code text,
    ADD COLUMN duration_ms bigint;

-- +goose Down
ALTER TABLE ax.task_event
    DROP COLUMN duration_ms,
    DROP COLUMN error_code,
    DROP COLUMN worker_ip,
    DROP COLUMN worker_host;
ALTER TABLE ax.agent
    DROP CONSTRAINT agent_host_name_length,
    DROP CONSTRAINT agent_disk_free_bytes_nonnegative,
    DROP COLUMN host_ip,
    DROP COLUMN host_name,
    DROP COLUMN disk_free_bytes,
    DROP COLUMN load_at,
    DROP COLUMN load;
