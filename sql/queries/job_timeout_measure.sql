-- Queries on ax.job_timeout_measure, the stored measure of an adaptive
-- job's history (written by TaskPlanForExecutions as it fires).

-- JobTimeoutMeasureGet returns the stored measure of an adaptive job's
-- history.
-- name: JobTimeoutMeasureGet :one
SELECT samples, p95_ms, computed_at FROM ax.job_timeout_measure WHERE job_id = @job_id;
