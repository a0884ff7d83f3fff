-- +goose Up

-- A task's run params travel with each of its leases, on each task: one
-- lease of 1,000 tasks of a run with params of 256 KiB answered 256 MB,
-- read from the database and written to the agent by a replica that
-- serves every other agent too. The lease hands out tasks within a byte
-- budget of params (dispatch), and the pick must know each task's share
-- without reading its run: the size of its run's params, written with
-- the task (NULL: the run has none).
ALTER TABLE ax.task ADD COLUMN params_bytes integer;
ALTER TABLE ax.task_history ADD COLUMN params_bytes integer;
-- The tasks of live runs count too: those still to lease, and those
-- leased or running now, which may be leased again (a retry, a lost lease).
UPDATE ax.task t SET params_bytes = octet_length(e.params::text)
FROM ax.execution e
WHERE e.id = t.execution_id AND t.state IN ('pending', 'leased', 'running') AND e.params IS NOT NULL;

-- The views show it before retain_until, as every column of the task
-- (TestHistoryTablesMatchLiveTables); ax.all_task_events reads
-- ax.all_tasks, and is remade as it was.
DROP VIEW ax.all_task_events;
DROP VIEW ax.all_tasks;
CREATE VIEW ax.all_tasks AS
SELECT t.id, t.execution_id, t.job_id, t.shard_index, t.shard_total, t.shard_param, t.state, t.priority,
       t.attempt, t.max_attempts, t.timeout_seconds, t.not_before, t.started_at, t.finished_at,
       t.cancel_requested_at, t.result, t.error, t.created_at, t.updated_at, t.agent_id, t.lease_token,
       t.lease_expires_at, t.leased_at, t.preferred_agent_id, t.fallback_agent_id, t.pinned, t.route_key,
       t.rate_class, t.agentless, t.log_bytes, t.lost_leases, t.error_code, t.concurrency_scope,
       t.concurrency_key, t.concurrency_limit, t.key_parked, t.worker_host, t.worker_ip, t.lease_event_id,
       t.end_event_id, t.params_bytes, NULL::timestamptz AS retain_until
FROM ax.task t
UNION ALL
SELECT t.id, t.execution_id, t.job_id, t.shard_index, t.shard_total, t.shard_param, t.state, t.priority,
       t.attempt, t.max_attempts, t.timeout_seconds, t.not_before, t.started_at, t.finished_at,
       t.cancel_requested_at, t.result, t.error, t.created_at, t.updated_at, t.agent_id, t.lease_token,
       t.lease_expires_at, t.leased_at, t.preferred_agent_id, t.fallback_agent_id, t.pinned, t.route_key,
       t.rate_class, t.agentless, t.log_bytes, t.lost_leases, t.error_code, t.concurrency_scope,
       t.concurrency_key, t.concurrency_limit, t.key_parked, t.worker_host, t.worker_ip, t.lease_event_id,
       t.end_event_id, t.params_bytes, t.retain_until
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

-- +goose Down
DROP VIEW ax.all_task_events;
DROP VIEW ax.all_tasks;
ALTER TABLE ax.task DROP COLUMN params_bytes;
ALTER TABLE ax.task_history DROP COLUMN params_bytes;
CREATE VIEW ax.all_tasks AS
SELECT t.id, t.execution_id, t.job_id, t.shard_index, t.shard_total, t.shard_param, t.state, t.priority,
       t.attempt, t.max_attempts, t.timeout_seconds, t.not_before, t.started_at, t.finished_at,
       t.cancel_requested_at, t.result, t.error, t.created_at, t.updated_at, t.agent_id, t.lease_token,
       t.lease_expires_at, t.leased_at, t.preferred_agent_id, t.fallback_agent_id, t.pinned, t.route_key,
       t.rate_class, t.agentless, t.log_bytes, t.lost_leases, t.error_code, t.concurrency_scope,
       t.concurrency_key, t.concurrency_limit, t.key_parked, t.worker_host, t.worker_ip, t.lease_event_id,
       t.end_event_id, NULL::timestamptz AS retain_until
FROM ax.task t
UNION ALL
SELECT t.id, t.execution_id, t.job_id, t.shard_index, t.shard_total, t.shard_param, t.state, t.priority,
       t.attempt, t.max_attempts, t.timeout_seconds, t.not_before, t.started_at, t.finished_at,
       t.cancel_requested_at, t.result, t.error, t.created_at, t.updated_at, t.agent_id, t.lease_token,
       t.lease_expires_at, t.leased_at, t.preferred_agent_id, t.fallback_agent_id, t.pinned, t.route_key,
       t.rate_class, t.agentless, t.log_bytes, t.lost_leases, t.error_code, t.concurrency_scope,
       t.concurrency_key, t.concurrency_limit, t.key_parked, t.worker_host, t.worker_ip, t.lease_event_id,
       t.end_event_id, t.retain_until
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
