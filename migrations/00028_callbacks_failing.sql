-- +goose Up

-- callbacks_failing lists the callbacks of ended runs whose receiver has
-- not taken them: those still retrying (pending after at least one failed
-- attempt, with the next attempt's time) and those that gave up
-- (callbacks_failed lists only the latter, so a receiver down for an hour
-- showed nothing until the retries ran out). Newest change first.
CREATE INDEX callback_retrying_idx ON ax.callback (updated_at) WHERE state = 'pending' AND attempts > 0;
CREATE VIEW ax.callbacks_failing AS
SELECT j.group_name, j.name, c.execution_id, c.state, c.attempts, c.last_status, c.last_error,
       c.next_attempt_at, c.failed_at, c.updated_at
FROM ax.callback c
JOIN ax.job j ON j.id = c.job_id
WHERE c.state = 'callback_failed' OR (c.state = 'pending' AND c.attempts > 0)
ORDER BY c.updated_at DESC;

-- +goose Down

DROP VIEW ax.callbacks_failing;
DROP INDEX ax.callback_retrying_idx;
