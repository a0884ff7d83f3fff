-- name: TriggerInsert :one
INSERT INTO ax.trigger (job_id, next_fire_at, paused, paused_at)
VALUES (@job_id, sqlc.narg('next_fire_at'), @paused,
        CASE WHEN @paused::boolean THEN now() END)
RETURNING *;

-- name: TriggerSetNextFire :one
UPDATE ax.trigger
SET next_fire_at = sqlc.narg('next_fire_at'), updated_at = now()
WHERE job_id = @job_id
RETURNING *;

-- name: TriggerPause :one
UPDATE ax.trigger
SET paused = true, paused_at = coalesce(paused_at, now()), updated_at = now()
WHERE job_id = @job_id
RETURNING *;

-- name: TriggerResume :one
UPDATE ax.trigger
SET paused = false, paused_at = NULL, updated_at = now()
WHERE job_id = @job_id
RETURNING *;
