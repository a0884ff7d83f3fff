-- TaskEventListByExecution lists an execution's events after @after_id,
-- oldest first: at most @max, and only those whose earlier messages in the
-- page total at most @max_bytes, so a page's size is bounded by bytes as
-- well as count (the first event always comes; the caller drops the one
-- that passes the cap). bytes_before is that running total.
-- name: TaskEventListByExecution :many
SELECT id, task_id, execution_id, shard_index, attempt, kind, state, agent_id, stream, message, at, bytes_before,
       coalesce(worker_host, '')::text AS worker_host, coalesce(host(worker_ip), '')::text AS worker_ip
FROM (
    SELECT e.id, e.task_id, e.execution_id, e.shard_index, e.attempt, e.kind, e.state, e.agent_id, e.stream,
           e.message, e.at, e.worker_host, e.worker_ip,
           (coalesce(sum(octet_length(e.message)) OVER (ORDER BY e.id ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0))::bigint AS bytes_before
    -- Every event: the rows of ax.task_event and the leases and successes
    -- held on the tasks' rows (migration 00067).
    FROM ax.all_task_events e
    WHERE e.execution_id = @execution_id AND e.id > @after_id
      AND (sqlc.narg('kind')::text IS NULL OR e.kind = sqlc.narg('kind')::ax.task_event_kind)
    ORDER BY e.id
) page
WHERE bytes_before <= @max_bytes::bigint
ORDER BY id
LIMIT @max;
