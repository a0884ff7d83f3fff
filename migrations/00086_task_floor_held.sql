-- +goose Up

-- A degraded rate class's tasks below its priority floor are held: the
-- reaper sets floor_held on them (TaskFloorHold) and they leave the
-- indexes the lease's pick and the long polls' check walk, as no_agent
-- and key_parked tasks do; it clears it once the floor no longer turns
-- them away (TaskFloorRelease). A class degrades when its backlog is
-- deep, so before, exactly then, every lease given the class's tokens
-- (and a class whose only ready tasks are below its floor gives its
-- tokens to every lease, which gives them back) read past the backlog
-- below the floor, in each group that walks the class's pool, and so
-- did every idle agent's check of those labels: 20,000 tasks below the
-- floor, 20,001 rows a check. The default (false) keeps every written
-- row as it was; adding the column rewrites nothing.
ALTER TABLE ax.task ADD COLUMN floor_held boolean NOT NULL DEFAULT false;
COMMENT ON COLUMN ax.task.floor_held IS
    'held: below its rate class''s priority floor when the reaper last looked; out of every lease''s way until the floor lifts';
-- History keeps it (a run cancelled while held waited below the floor).
ALTER TABLE ax.task_history ADD COLUMN floor_held boolean NOT NULL DEFAULT false;
DROP VIEW ax.all_task_events;
DROP VIEW ax.all_tasks;
CREATE VIEW ax.all_tasks AS
SELECT t.id, t.execution_id, t.job_id, t.shard_index, t.shard_total, t.shard_param, t.state, t.priority,
       t.attempt, t.max_attempts, t.timeout_seconds, t.not_before, t.started_at, t.finished_at,
       t.cancel_requested_at, t.result, t.error, t.created_at, t.updated_at, t.agent_id, t.lease_token,
       t.lease_expires_at, t.leased_at, t.preferred_agent_id, t.fallback_agent_id, t.pinned, t.route_key,
       t.rate_class, t.agentless, t.log_bytes, t.lost_leases, t.error_code, t.concurrency_scope,
       t.concurrency_key, t.concurrency_limit, t.key_parked, t.worker_host, t.worker_ip, t.lease_event_id,
       t.end_event_id, t.params_bytes, t.no_agent, t.pool_id, t.floor_held, NULL::timestamptz AS retain_until
FROM ax.task t
UNION ALL
SELECT t.id, t.execution_id, t.job_id, t.shard_index, t.shard_total, t.shard_param, t.state, t.priority,
       t.attempt, t.max_attempts, t.timeout_seconds, t.not_before, t.started_at, t.finished_at,
       t.cancel_requested_at, t.result, t.error, t.created_at, t.updated_at, t.agent_id, t.lease_token,
       t.lease_expires_at, t.leased_at, t.preferred_agent_id, t.fallback_agent_id, t.pinned, t.route_key,
       t.rate_class, t.agentless, t.log_bytes, t.lost_leases, t.error_code, t.concurrency_scope,
       t.concurrency_key, t.concurrency_limit, t.key_parked, t.worker_host, t.worker_ip, t.lease_event_id,
       t.end_event_id, t.params_bytes, t.no_agent, t.pool_id, t.floor_held, t.retain_until
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

-- The pick's and the check's indexes leave held tasks out. The old
-- build's statements do not say NOT floor_held, so the rebuilt indexes no
-- longer match them: until its replicas are replaced, their leases read
-- ax.task whole (the production guide says so, as for 00076).
DROP INDEX ax.task_pending_age_idx;
CREATE INDEX task_pending_age_idx ON ax.task (pool_id, not_before)
    WHERE state = 'pending' AND NOT no_agent AND NOT key_parked AND NOT floor_held;
DROP INDEX ax.task_unassigned_idx;
CREATE INDEX task_unassigned_idx ON ax.task (pool_id, priority DESC, created_at)
    WHERE state = 'pending' AND preferred_agent_id IS NULL AND NOT agentless AND concurrency_key IS NULL AND NOT no_agent
      AND NOT floor_held;
DROP INDEX ax.task_preferred_idx;
CREATE INDEX task_preferred_idx ON ax.task (preferred_agent_id, priority DESC, created_at)
    WHERE state = 'pending' AND preferred_agent_id IS NOT NULL AND concurrency_key IS NULL AND NOT no_agent
      AND NOT floor_held;
DROP INDEX ax.task_concurrency_pending_idx;
CREATE INDEX task_concurrency_pending_idx ON ax.task (pool_id, priority DESC, not_before)
    WHERE concurrency_key IS NOT NULL AND state = 'pending' AND NOT agentless AND NOT key_parked AND NOT no_agent
      AND NOT floor_held;
-- The hold (and the skip of TaskSkipBelowFloor) reads a class's tasks
-- not held below its floor, the release its held tasks at or above it:
-- each a range of its own index, so no sweep rereads the held backlog
-- (the skip read the class's whole backlog every sweep). Only tasks of a
-- class are in them.
CREATE INDEX task_floor_unheld_idx ON ax.task (rate_class, priority)
    WHERE state = 'pending' AND rate_class IS NOT NULL AND NOT floor_held;
CREATE INDEX task_floor_held_idx ON ax.task (rate_class, priority)
    WHERE state = 'pending' AND floor_held;

-- +goose Down
DROP INDEX ax.task_floor_held_idx;
DROP INDEX ax.task_floor_unheld_idx;
DROP INDEX ax.task_concurrency_pending_idx;
CREATE INDEX task_concurrency_pending_idx ON ax.task (pool_id, priority DESC, not_before)
    WHERE concurrency_key IS NOT NULL AND state = 'pending' AND NOT agentless AND NOT key_parked AND NOT no_agent;
DROP INDEX ax.task_preferred_idx;
CREATE INDEX task_preferred_idx ON ax.task (preferred_agent_id, priority DESC, created_at)
    WHERE state = 'pending' AND preferred_agent_id IS NOT NULL AND concurrency_key IS NULL AND NOT no_agent;
DROP INDEX ax.task_unassigned_idx;
CREATE INDEX task_unassigned_idx ON ax.task (pool_id, priority DESC, created_at)
    WHERE state = 'pending' AND preferred_agent_id IS NULL AND NOT agentless AND concurrency_key IS NULL AND NOT no_agent;
DROP INDEX ax.task_pending_age_idx;
CREATE INDEX task_pending_age_idx ON ax.task (pool_id, not_before) WHERE state = 'pending' AND NOT no_agent AND NOT key_parked;
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
ALTER TABLE ax.task DROP COLUMN floor_held;
ALTER TABLE ax.task_history DROP COLUMN floor_held;
SELECT ax.history_define_move();
