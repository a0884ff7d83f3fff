-- +goose Up
-- ax.all_tasks lists the columns ax.task had when it was made (a view's *
-- is expanded then): the concurrency columns of migration 00057 were
-- missing from it. It lists both tables' columns by name, the live
-- table's then retain_until: the history table has retain_until before
-- the new columns.
DROP VIEW ax.all_tasks;
CREATE VIEW ax.all_tasks AS
    SELECT id, execution_id, job_id, shard_index, shard_total, shard_param, state, priority, attempt,
           max_attempts, timeout_seconds, not_before, started_at, finished_at, cancel_requested_at,
           result, error, created_at, updated_at, agent_id, lease_token, lease_expires_at,
           leased_at, preferred_agent_id, fallback_agent_id, pinned, route_key, rate_class,
           agentless, log_bytes, lost_leases, error_code, concurrency_scope, concurrency_key,
           concurrency_limit, NULL::timestamptz AS retain_until
    FROM ax.task
    UNION ALL
    SELECT id, execution_id, job_id, shard_index, shard_total, shard_param, state, priority, attempt,
           max_attempts, timeout_seconds, not_before, started_at, finished_at, cancel_requested_at,
           result, error, created_at, updated_at, agent_id, lease_token, lease_expires_at,
           leased_at, preferred_agent_id, fallback_agent_id, pinned, route_key, rate_class,
           agentless, log_bytes, lost_leases, error_code, concurrency_scope, concurrency_key,
           concurrency_limit, retain_until
    FROM ax.task_history;

-- +goose Down
DROP VIEW ax.all_tasks;
CREATE VIEW ax.all_tasks AS
 SELECT task.id,
    task.execution_id,
    task.job_id,
    task.shard_index,
    task.shard_total,
    task.shard_param,
    task.state,
    task.priority,
    task.attempt,
    task.max_attempts,
    task.timeout_seconds,
    task.not_before,
    task.started_at,
    task.finished_at,
    task.cancel_requested_at,
    task.result,
    task.error,
    task.created_at,
    task.updated_at,
    task.agent_id,
    task.lease_token,
    task.lease_expires_at,
    task.leased_at,
    task.preferred_agent_id,
    task.fallback_agent_id,
    task.pinned,
    task.route_key,
    task.rate_class,
    task.agentless,
    task.log_bytes,
    task.lost_leases,
    task.error_code,
    NULL::timestamp with time zone AS retain_until
   FROM ax.task
UNION ALL
 SELECT task_history.id,
    task_history.execution_id,
    task_history.job_id,
    task_history.shard_index,
    task_history.shard_total,
    task_history.shard_param,
    task_history.state,
    task_history.priority,
    task_history.attempt,
    task_history.max_attempts,
    task_history.timeout_seconds,
    task_history.not_before,
    task_history.started_at,
    task_history.finished_at,
    task_history.cancel_requested_at,
    task_history.result,
    task_history.error,
    task_history.created_at,
    task_history.updated_at,
    task_history.agent_id,
    task_history.lease_token,
    task_history.lease_expires_at,
    task_history.leased_at,
    task_history.preferred_agent_id,
    task_history.fallback_agent_id,
    task_history.pinned,
    task_history.route_key,
    task_history.rate_class,
    task_history.agentless,
    task_history.log_bytes,
    task_history.lost_leases,
    task_history.error_code,
    task_history.retain_until
   FROM ax.task_history;
