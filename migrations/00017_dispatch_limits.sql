-- +goose Up

-- rate_class_loosened tells waiting long polls (ax_task_ready) when a class
-- lets more of its tasks through: a floor lowered or lifted (manual, or
-- automatic degradation ending), a faster rate or a bigger bucket. Token
-- takes and give-backs change only tokens and refilled_at and never
-- notify: a poll computes when a dry class's next token comes.
-- +goose StatementBegin
CREATE FUNCTION ax.rate_class_loosened() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('ax_task_ready', '');
    RETURN NULL;
END $$;
-- +goose StatementEnd

CREATE TRIGGER rate_class_loosened AFTER UPDATE ON ax.rate_class
    FOR EACH ROW
    WHEN (OLD.manual_min_priority IS DISTINCT FROM NEW.manual_min_priority
          OR OLD.auto_min_priority IS DISTINCT FROM NEW.auto_min_priority
          OR OLD.degraded_since IS DISTINCT FROM NEW.degraded_since
          OR OLD.rate < NEW.rate OR OLD.burst < NEW.burst)
    EXECUTE FUNCTION ax.rate_class_loosened();

-- http_task_slot is one agentless HTTP request in flight: a replica's
-- worker holds a slot while it waits for the answer, so that one job (or
-- one slow host) holds at most a bounded share of every replica's HTTP
-- workers. A 202 awaiting its posted result holds none. held_until bounds
-- a slot whose replica died (request time cap + grace); expired slots
-- count for nothing and the cleanup deletes them.
CREATE TABLE ax.http_task_slot (
    task_id    uuid PRIMARY KEY,
    job_id     uuid NOT NULL,
    host       text NOT NULL,
    held_until timestamptz NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX http_task_slot_job_idx ON ax.http_task_slot (job_id);
CREATE INDEX http_task_slot_host_idx ON ax.http_task_slot (host);

-- +goose Down
DROP TABLE ax.http_task_slot;
DROP TRIGGER rate_class_loosened ON ax.rate_class;
DROP FUNCTION ax.rate_class_loosened();
