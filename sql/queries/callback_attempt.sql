-- CallbackAttemptList returns the last @max attempts of an execution's
-- callback, oldest first.
-- name: CallbackAttemptList :many
SELECT * FROM (
    SELECT * FROM ax.callback_attempt WHERE execution_id = @execution_id ORDER BY id DESC LIMIT @max
) a ORDER BY id;
