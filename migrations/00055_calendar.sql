-- +goose Up

-- Exclusion calendars (issue #41): named lists of dates that jobs share.
-- A job names them in exclude; a tick whose date, read in the calendar's
-- own timezone, is in one is recorded as skipped (reason calendar) instead
-- of fired. The trigger loop reads a calendar at fire time and caches it
-- by version, so an edit reaches every job on its next tick without the
-- jobs being written.
ALTER TYPE ax.skip_reason ADD VALUE IF NOT EXISTS 'calendar';

CREATE TABLE ax.calendar (
    name        text PRIMARY KEY CONSTRAINT calendar_name_format CHECK (name ~ '^[a-z0-9][a-z0-9._-]{0,62}$'),
    description text NOT NULL DEFAULT '' CONSTRAINT calendar_description_length CHECK (length(description) <= 1000),
    timezone    text NOT NULL,
    -- entries: [{"date":"2026-12-25"} | {"from":"…","to":"…"} | {"yearly":"12-25"}]
    entries     jsonb NOT NULL DEFAULT '[]' CONSTRAINT calendar_entries_bounds
                CHECK (jsonb_typeof(entries) = 'array' AND jsonb_array_length(entries) <= 1000),
    -- version grows on every change: the trigger loops' caches compare it.
    version     bigint NOT NULL DEFAULT 1,
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now()
);

ALTER TABLE ax.job
    ADD COLUMN exclude text[] NOT NULL DEFAULT '{}',
    ADD CONSTRAINT job_exclude_bounds CHECK (cardinality(exclude) <= 16);

-- ax.job_calendar mirrors job.exclude as rows, so a foreign key keeps a
-- named calendar from being deleted (or a job from naming a missing one)
-- whatever path writes the job, and "which jobs use cn-holidays" is an
-- index lookup. A trigger keeps it in step; jobs without exclude never
-- run it.
CREATE TABLE ax.job_calendar (
    job_id        uuid NOT NULL REFERENCES ax.job (id) ON DELETE CASCADE,
    calendar_name text NOT NULL CONSTRAINT job_calendar_calendar_fk REFERENCES ax.calendar (name),
    PRIMARY KEY (job_id, calendar_name)
);
CREATE INDEX job_calendar_calendar_idx ON ax.job_calendar (calendar_name);

-- +goose StatementBegin
CREATE FUNCTION ax.job_calendar_sync() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM ax.job_calendar WHERE job_id = NEW.id;
    INSERT INTO ax.job_calendar (job_id, calendar_name)
    SELECT DISTINCT NEW.id, n FROM unnest(NEW.exclude) AS n;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER job_calendar_sync_insert AFTER INSERT ON ax.job
    FOR EACH ROW WHEN (cardinality(NEW.exclude) > 0) EXECUTE FUNCTION ax.job_calendar_sync();
CREATE TRIGGER job_calendar_sync_update AFTER UPDATE OF exclude ON ax.job
    FOR EACH ROW WHEN (OLD.exclude IS DISTINCT FROM NEW.exclude) EXECUTE FUNCTION ax.job_calendar_sync();

-- +goose Down

DROP TRIGGER job_calendar_sync_update ON ax.job;
DROP TRIGGER job_calendar_sync_insert ON ax.job;
DROP FUNCTION ax.job_calendar_sync();
DROP TABLE ax.job_calendar;
ALTER TABLE ax.job DROP CONSTRAINT job_exclude_bounds, DROP COLUMN exclude;
DROP TABLE ax.calendar;
-- The enum value 'calendar' stays: Postgres cannot drop one, and skip
-- records may use it.
