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

-- +goose Down
DROP TRIGGER rate_class_loosened ON ax.rate_class;
DROP FUNCTION ax.rate_class_loosened();
