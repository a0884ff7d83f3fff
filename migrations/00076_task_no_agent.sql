-- +goose Up

-- A task no live agent could take when it was written (its job's target
-- labels or executor kind matched no candidate of the router) is parked:
-- no_agent is set and it leaves the indexes the lease's pick and the long
-- polls walk. Before, every lease walked such tasks and dropped them one
-- by one on the job's labels: a job aimed at labels no agent has, firing
-- for a week, left tens of thousands of pending tasks that every other
-- tenant's lease read (the starved branch first, oldest first). The
-- reaper unparks a job's tasks once a live agent can take them (see
-- TaskNoAgentUnpark). The default (false) is the old behaviour, so rows
-- written before this migration, and tasks written without a router,
-- stay leasable as they were; adding the column rewrites nothing. The
-- old build's pick and long-poll check do not say NOT no_agent, so the
-- rebuilt indexes no longer match them: until its replicas are replaced,
-- their leases read ax.task whole (the production guide says so).
ALTER TABLE ax.task ADD COLUMN no_agent boolean NOT NULL DEFAULT false;
COMMENT ON COLUMN ax.task.no_agent IS
    'parked: no live agent could take the task (labels, executor kind) when it was written; the reaper clears it once one can';
-- History keeps it (a run cancelled while parked never found an agent),
-- and the views show it before retain_until, as every column of the task
-- (TestHistoryTablesMatchLiveTables); ax.all_task_events reads
-- ax.all_tasks, and is remade as it was.
ALTER TABLE ax.task_history ADD COLUMN no_agent boolean NOT NULL DEFAULT false;
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

SELECT ax.history_define_move();

DROP INDEX ax.task_unassigned_idx;
CREATE INDEX task_unassigned_idx ON ax.task (priority DESC, created_at)
    WHERE state = 'pending' AND preferred_agent_id IS NULL AND NOT agentless AND concurrency_key IS NULL AND NOT no_agent;
DROP INDEX ax.task_preferred_idx;
CREATE INDEX task_preferred_idx ON ax.task (preferred_agent_id, priority DESC, created_at)
    WHERE state = 'pending' AND preferred_agent_id IS NOT NULL AND concurrency_key IS NULL AND NOT no_agent;
DROP INDEX ax.task_pending_age_idx;
CREATE INDEX task_pending_age_idx ON ax.task (not_before) WHERE state = 'pending' AND NOT no_agent;
DROP INDEX ax.task_concurrency_pending_idx;
CREATE INDEX task_concurrency_pending_idx ON ax.task (priority DESC, not_before)
    WHERE concurrency_key IS NOT NULL AND state = 'pending' AND NOT agentless AND NOT key_parked AND NOT no_agent;
-- The reaper's unpark walks the jobs of parked tasks (a skip scan, one
-- probe a job) and then each such job's tasks.
CREATE INDEX task_no_agent_idx ON ax.task (job_id) WHERE no_agent AND state = 'pending';

-- +goose Down
DROP INDEX ax.task_no_agent_idx;
DROP INDEX ax.task_concurrency_pending_idx;
CREATE INDEX task_concurrency_pending_idx ON ax.task (priority DESC, not_before)
    WHERE concurrency_key IS NOT NULL AND state = 'pending' AND NOT agentless AND NOT key_parked;
DROP INDEX ax.task_pending_age_idx;
CREATE INDEX task_pending_age_idx ON ax.task (not_before) WHERE state = 'pending';
DROP INDEX ax.task_preferred_idx;
CREATE INDEX task_preferred_idx ON ax.task (preferred_agent_id, priority DESC, created_at)
    WHERE state = 'pending' AND preferred_agent_id IS NOT NULL AND concurrency_key IS NULL;
DROP INDEX ax.task_unassigned_idx;
CREATE INDEX task_unassigned_idx ON ax.task (priority DESC, created_at)
    WHERE state = 'pending' AND preferred_agent_id IS NULL AND NOT agentless AND concurrency_key IS NULL;
DROP VIEW ax.all_task_events;
DROP VIEW ax.all_tasks;
ALTER TABLE ax.task DROP COLUMN no_agent;
ALTER TABLE ax.task_history DROP COLUMN no_agent;
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
