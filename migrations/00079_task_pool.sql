-- +goose Up

-- Pools: the lease's pick reads each pool its agents match, not every
-- pending task. A pool is a job's target labels with its executor kind;
-- a task carries its job's pool (pool_id) and the pick's indexes lead
-- with it. Before, a pool whose agents were busy (20,000 pending tasks of
-- a pool=gpu job, its one agent not polling) had every other tenant's
-- lease read 40,003 task rows (the starved and stealable groups walk all
-- pending tasks oldest first and drop them on the job's labels) and
-- every idle long poll's check 40,000. Now a lease reads the pools whose
-- labels are a subset of its agents' (ax.task_pool, one probe of its GIN
-- index per agent label) and, per pool, its tasks in index order.
--
-- Pool 0 is read by every pick: a task written by a build that knows no
-- pools (a rolling upgrade) gets it by default. The pick still checks each
-- task's job labels, so a pool is only where to look, never who may take.
-- Agentless tasks (ax serve runs them) are in pool -1, which no pick
-- reads. Pools are never deleted: a row is a label set some job used.
CREATE TABLE ax.task_pool (
    id integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    target_labels jsonb NOT NULL,
    executor_kind ax.executor_kind NOT NULL,
    -- Labels may be 100 of 255 bytes, past a btree entry's limit: unique
    -- by their digest (jsonb's text is canonical: keys in one order).
    labels_digest uuid NOT NULL,
    UNIQUE (labels_digest, executor_kind)
);
COMMENT ON TABLE ax.task_pool IS
    'a job target (labels and executor kind): tasks carry theirs (pool_id) so a lease reads only the pools its agents match';
CREATE INDEX task_pool_labels_idx ON ax.task_pool USING gin (target_labels jsonb_path_ops);

-- ax.task_pool_for returns the pool of labels and kind, made if new. Two
-- writers making it at once: one inserts, the other waits for it, finds
-- nothing inserted and reads it on the next turn.
-- +goose StatementBegin
CREATE FUNCTION ax.task_pool_for(labels jsonb, kind ax.executor_kind) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    pid integer;
    digest uuid := md5(labels::text)::uuid;
BEGIN
    LOOP
        SELECT p.id INTO pid FROM ax.task_pool p WHERE p.labels_digest = digest AND p.executor_kind = kind;
        IF FOUND THEN
            RETURN pid;
        END IF;
        INSERT INTO ax.task_pool (target_labels, executor_kind, labels_digest)
        VALUES (labels, kind, digest)
        ON CONFLICT DO NOTHING
        RETURNING id INTO pid;
        IF pid IS NOT NULL THEN
            RETURN pid;
        END IF;
    END LOOP;
END $$;
-- +goose StatementEnd

ALTER TABLE ax.job ADD COLUMN pool_id integer;
INSERT INTO ax.task_pool (target_labels, executor_kind, labels_digest)
SELECT DISTINCT target_labels, executor_kind, md5(target_labels::text)::uuid FROM ax.job;
UPDATE ax.job j SET pool_id = p.id
FROM ax.task_pool p
WHERE p.labels_digest = md5(j.target_labels::text)::uuid AND p.executor_kind = j.executor_kind;
ALTER TABLE ax.job ALTER COLUMN pool_id SET NOT NULL;

-- A job's pool follows its labels and kind; so do its pending tasks
-- (through its unfinished runs: no index of tasks leads with job_id but
-- the parked one), or a pick of the new pool would never read them.
-- +goose StatementBegin
CREATE FUNCTION ax.job_pool_set() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.pool_id := ax.task_pool_for(NEW.target_labels, NEW.executor_kind);
    RETURN NEW;
END $$;
-- +goose StatementEnd
CREATE TRIGGER job_pool_set BEFORE INSERT OR UPDATE OF target_labels, executor_kind ON ax.job
    FOR EACH ROW EXECUTE FUNCTION ax.job_pool_set();

-- +goose StatementBegin
CREATE FUNCTION ax.job_pool_moved() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE ax.task t SET pool_id = NEW.pool_id
    WHERE t.execution_id IN (SELECT e.id FROM ax.execution e WHERE e.job_id = NEW.id AND e.finished_at IS NULL)
      AND t.state = 'pending' AND NOT t.agentless AND t.pool_id <> NEW.pool_id;
    RETURN NULL;
END $$;
-- +goose StatementEnd
CREATE TRIGGER job_pool_moved AFTER UPDATE OF target_labels, executor_kind ON ax.job
    FOR EACH ROW WHEN (OLD.pool_id IS DISTINCT FROM NEW.pool_id) EXECUTE FUNCTION ax.job_pool_moved();

ALTER TABLE ax.task ADD COLUMN pool_id integer NOT NULL DEFAULT 0;
COMMENT ON COLUMN ax.task.pool_id IS
    'its job''s pool (ax.task_pool) when it was written: where a lease looks for it; 0: every lease looks (written by a build before pools), -1: none (agentless)';
UPDATE ax.task t SET pool_id = CASE WHEN t.agentless THEN -1 ELSE j.pool_id END
FROM ax.job j
WHERE j.id = t.job_id;
ALTER TABLE ax.task_history ADD COLUMN pool_id integer NOT NULL DEFAULT 0;
DROP VIEW ax.all_task_events;
DROP VIEW ax.all_tasks;
CREATE VIEW ax.all_tasks AS
SELECT t.id, t.execution_id, t.job_id, t.shard_index, t.shard_total, t.shard_param, t.state, t.priority,
       t.attempt, t.max_attempts, t.timeout_seconds, t.not_before, t.started_at, t.finished_at,
       t.cancel_requested_at, t.result, t.error, t.created_at, t.updated_at, t.agent_id, t.lease_token,
       t.lease_expires_at, t.leased_at, t.preferred_agent_id, t.fallback_agent_id, t.pinned, t.route_key,
       t.rate_class, t.agentless, t.log_bytes, t.lost_leases, t.error_code, t.concurrency_scope,
       t.concurrency_key, t.concurrency_limit, t.key_parked, t.worker_host, t.worker_ip, t.lease_event_id,
       t.end_event_id, t.params_bytes, t.no_agent, t.pool_id, NULL::timestamptz AS retain_until
FROM ax.task t
UNION ALL
SELECT t.id, t.execution_id, t.job_id, t.shard_index, t.shard_total, t.shard_param, t.state, t.priority,
       t.attempt, t.max_attempts, t.timeout_seconds, t.not_before, t.started_at, t.finished_at,
       t.cancel_requested_at, t.result, t.error, t.created_at, t.updated_at, t.agent_id, t.lease_token,
       t.lease_expires_at, t.leased_at, t.preferred_agent_id, t.fallback_agent_id, t.pinned, t.route_key,
       t.rate_class, t.agentless, t.log_bytes, t.lost_leases, t.error_code, t.concurrency_scope,
       t.concurrency_key, t.concurrency_limit, t.key_parked, t.worker_host, t.worker_ip, t.lease_event_id,
       t.end_event_id, t.params_bytes, t.no_agent, t.pool_id, t.retain_until
FROM ax.task_history t;

CREATE VIEW ax.all_task_events AS
SELECT e.id, e.task_id, e.execution_id, e.shard_index, e.attempt, e.kind, e.state, e.agent_id, e.stream,
       e.message, e.at, e.worker_host, e.worker_ip, e.error_code, e.duration_ms
FROM ax.task_event e
UNION ALL
SELECT t.lease_event_id, t.id, t.execution_id, t.shard_index, t.attempt, 'state'::ax.task_event_kind,
       'leased'::ax.task_state, t.agent_id, NULL::text, ax.lease_message(t.preferred_agent_id, t.agent_id),
       t.leased_at, t.worker_host, t.worker_ip, NULL::text, NULL::bigint
FROM ax.all_tasks t
WHERE t.lease_event_id IS NOT NULL
UNION ALL
SELECT t.end_event_id, t.id, t.execution_id, t.shard_index, t.attempt, 'state'::ax.task_event_kind,
       'succeeded'::ax.task_state, t.agent_id, NULL::text, coalesce(t.error, ''), t.finished_at, t.worker_host,
       t.worker_ip, t.error_code, (extract(epoch FROM t.finished_at - t.leased_at) * 1000)::bigint
FROM ax.all_tasks t
WHERE t.end_event_id IS NOT NULL;

SELECT ax.history_define_move();

-- The pick's indexes lead with the pool (task_preferred_idx leads with
-- the agent, and stays).
DROP INDEX ax.task_unassigned_idx;
CREATE INDEX task_unassigned_idx ON ax.task (pool_id, priority DESC, created_at)
    WHERE state = 'pending' AND preferred_agent_id IS NULL AND NOT agentless AND concurrency_key IS NULL AND NOT no_agent;
DROP INDEX ax.task_pending_age_idx;
CREATE INDEX task_pending_age_idx ON ax.task (pool_id, not_before) WHERE state = 'pending' AND NOT no_agent;
DROP INDEX ax.task_concurrency_pending_idx;
CREATE INDEX task_concurrency_pending_idx ON ax.task (pool_id, priority DESC, not_before)
    WHERE concurrency_key IS NOT NULL AND state = 'pending' AND NOT agentless AND NOT key_parked AND NOT no_agent;

-- +goose Down
DROP INDEX ax.task_concurrency_pending_idx;
CREATE INDEX task_concurrency_pending_idx ON ax.task (priority DESC, not_before)
    WHERE concurrency_key IS NOT NULL AND state = 'pending' AND NOT agentless AND NOT key_parked AND NOT no_agent;
DROP INDEX ax.task_pending_age_idx;
CREATE INDEX task_pending_age_idx ON ax.task (not_before) WHERE state = 'pending' AND NOT no_agent;
DROP INDEX ax.task_unassigned_idx;
CREATE INDEX task_unassigned_idx ON ax.task (priority DESC, created_at)
    WHERE state = 'pending' AND preferred_agent_id IS NULL AND NOT agentless AND concurrency_key IS NULL AND NOT no_agent;
DROP VIEW ax.all_task_events;
DROP VIEW ax.all_tasks;
CREATE VIEW ax.all_tasks AS
SELECT t.id, t.execution_id, t.job_id, t.shard_index, t.shard_total, t.shard_param, t.state, t.priority,
       t.attempt, t.max_attempts, t.timeout_seconds, t.not_before, t.started_at, t.finished_at,
       t.cancel_requested_at, t.result, t.error, t.created_at, t.updated_at, t.agent_id, t.lease_token,
       t.lease_expires_at, t.leased_at, t.preferred_agent_id, t.fallback_agent_id, t.pinned, t.route_key,
       t.rate_class, t.agentless, t.log_bytes, t.lost_leases, t.error_code, t.concurrency_scope,
       t.concurrency_key, t.concurrency_limit, t.key_parked, t.worker_host, t.worker_ip, t.lease_event_id,
       t.end_event_id, t.params_bytes, t.no_agent, NULL::timestamptz AS retain_until
FROM ax.task t
UNION ALL
SELECT t.id, t.execution_id, t.job_id, t.shard_index, t.shard_total, t.shard_param, t.state, t.priority,
       t.attempt, t.max_attempts, t.timeout_seconds, t.not_before, t.started_at, t.finished_at,
       t.cancel_requested_at, t.result, t.error, t.created_at, t.updated_at, t.agent_id, t.lease_token,
       t.lease_expires_at, t.leased_at, t.preferred_agent_id, t.fallback_agent_id, t.pinned, t.route_key,
       t.rate_class, t.agentless, t.log_bytes, t.lost_leases, t.error_code, t.concurrency_scope,
       t.concurrency_key, t.concurrency_limit, t.key_parked, t.worker_host, t.worker_ip, t.lease_event_id,
       t.end_event_id, t.params_bytes, t.no_agent, t.retain_until
FROM ax.task_history t;

CREATE VIEW ax.all_task_events AS
SELECT e.id, e.task_id, e.execution_id, e.shard_index, e.attempt, e.kind, e.state, e.agent_id, e.stream,
       e.message, e.at, e.worker_host, e.worker_ip, e.error_code, e.duration_ms
FROM ax.task_event e
UNION ALL
SELECT t.lease_event_id, t.id, t.execution_id, t.shard_index, t.attempt, 'state'::ax.task_event_kind,
       'leased'::ax.task_state, t.agent_id, NULL::text, ax.lease_message(t.preferred_agent_id, t.agent_id),
       t.leased_at, t.worker_host, t.worker_ip, NULL::text, NULL::bigint
FROM ax.all_tasks t
WHERE t.lease_event_id IS NOT NULL
UNION ALL
SELECT t.end_event_id, t.id, t.execution_id, t.shard_index, t.attempt, 'state'::ax.task_event_kind,
       'succeeded'::ax.task_state, t.agent_id, NULL::text, coalesce(t.error, ''), t.finished_at, t.worker_host,
       t.worker_ip, t.error_code, (extract(epoch FROM t.finished_at - t.leased_at) * 1000)::bigint
FROM ax.all_tasks t
WHERE t.end_event_id IS NOT NULL;

ALTER TABLE ax.task DROP COLUMN pool_id;
ALTER TABLE ax.task_history DROP COLUMN pool_id;
SELECT ax.history_define_move();
DROP TRIGGER job_pool_moved ON ax.job;
DROP FUNCTION ax.job_pool_moved();
DROP TRIGGER job_pool_set ON ax.job;
DROP FUNCTION ax.job_pool_set();
ALTER TABLE ax.job DROP COLUMN pool_id;
DROP FUNCTION ax.task_pool_for(jsonb, ax.executor_kind);
DROP TABLE ax.task_pool;
