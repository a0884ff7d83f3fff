-- +goose Up
-- error_code is a short machine-readable reason beside a task's error
-- text: exit_3, signal_killed, http_503, connect, timeout, or what a
-- handler or an HTTP target reports. NULL when the outcome has none (a
-- success, or a failure without a code). Bounded so it can label metrics
-- and group the "what failed" questions; the API refuses anything else
-- with a 422 naming the field, and this check holds every writer to it.
ALTER TABLE ax.task ADD COLUMN error_code text
    CONSTRAINT task_error_code_format CHECK (error_code ~ '^[a-z0-9_.-]{1,64}$');

-- +goose Down
ALTER TABLE ax.task DROP COLUMN error_code;
