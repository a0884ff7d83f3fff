-- +goose Up

-- Jobs declared in code (the agent SDK) or in files (ax apply) belong to a
-- declaration set, named by managed_by ("sdk:billing-agent",
-- "file:jobs.yaml"). The API refuses to edit such a job unless forced; the
-- set's next declaration is its truth. declared_version and declared_in
-- are the version and the place of the declaration that last changed it.
ALTER TABLE ax.job
    ADD COLUMN managed_by text,
    ADD COLUMN declared_version text,
    ADD COLUMN declared_in text,
    ADD CONSTRAINT job_declared_has_manager CHECK (managed_by IS NOT NULL OR (declared_version IS NULL AND declared_in IS NULL));
CREATE INDEX job_managed_by_idx ON ax.job (managed_by) WHERE managed_by IS NOT NULL;

-- paused_reason says why a job was paused when ax paused it (a job
-- dropped from its declaration set); NULL when paused through the API.
-- Declaring the job again resumes it only when it carries a reason.
ALTER TABLE ax.trigger
    ADD COLUMN paused_reason text,
    ADD CONSTRAINT trigger_paused_reason_when_paused CHECK (paused_reason IS NULL OR paused);

-- declaration_set is one row per set: the version it was last applied at
-- (the flap rule: an older version is refused), where from, and the last
-- declaration refused as a conflict.
CREATE TABLE ax.declaration_set (
    managed_by text PRIMARY KEY,
    version text NOT NULL DEFAULT '',
    source text NOT NULL DEFAULT '',
    jobs integer NOT NULL DEFAULT 0,
    applied_at timestamptz NOT NULL DEFAULT now(),
    conflict_version text,
    conflict_source text,
    conflict_reason text,
    conflict_at timestamptz,
    CONSTRAINT declaration_set_conflict_complete CHECK ((conflict_at IS NULL) = (conflict_reason IS NULL))
);

-- declared_jobs answers "what is managed, by what, and is it running?".
CREATE VIEW ax.declared_jobs AS
SELECT j.managed_by, j.group_name, j.name, j.declared_version, s.version AS set_version, j.declared_in,
       t.paused, t.paused_reason, s.conflict_version, s.conflict_reason, s.conflict_at
FROM ax.job j
JOIN ax.trigger t ON t.job_id = j.id
LEFT JOIN ax.declaration_set s ON s.managed_by = j.managed_by
WHERE j.managed_by IS NOT NULL
ORDER BY j.managed_by, j.group_name, j.name;

-- +goose Down

DROP VIEW ax.declared_jobs;
DROP TABLE ax.declaration_set;
ALTER TABLE ax.trigger DROP CONSTRAINT trigger_paused_reason_when_paused, DROP COLUMN paused_reason;
DROP INDEX ax.job_managed_by_idx;
ALTER TABLE ax.job DROP CONSTRAINT job_declared_has_manager,
    DROP COLUMN declared_in, DROP COLUMN declared_version, DROP COLUMN managed_by;
