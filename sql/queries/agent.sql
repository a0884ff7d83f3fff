-- name: AgentInsert :one
INSERT INTO ax.agent (id, name, labels, capacity, version, api_key_id, ready)
VALUES (@id, @name, @labels, @capacity, @version, @api_key_id, false)
RETURNING *;

-- name: AgentGetByID :one
SELECT * FROM ax.agent WHERE id = @id;

-- AgentHeartbeat records an agent's load and that it is alive; an agent
-- marked offline comes back as active.
-- name: AgentHeartbeat :one
UPDATE ax.agent
SET last_heartbeat_at = now(), running = @running, cpu = @cpu, load1 = @load1, memory = @memory,
    ready = coalesce(sqlc.narg('ready')::boolean, ready),
    state = CASE WHEN state = 'offline' THEN 'active' ELSE state END
WHERE id = @id
RETURNING state;

-- name: AgentSetState :exec
UPDATE ax.agent SET state = @state::ax.agent_state WHERE id = @id;

-- name: AgentList :many
SELECT a.*,
       (SELECT count(*) FROM ax.task t WHERE t.agent_id = a.id AND t.state IN ('leased', 'running'))::integer AS leased
FROM ax.agent a
ORDER BY a.name, a.id;

-- AgentMarkOffline turns agents silent for longer than @silent_seconds
-- offline and returns them.
-- name: AgentMarkOffline :many
UPDATE ax.agent SET state = 'offline'
WHERE state IN ('active', 'draining', 'quarantined')
  AND last_heartbeat_at < now() - make_interval(secs => sqlc.arg('silent_seconds')::double precision)
RETURNING id;
