-- +goose Up

-- A rate class may be kept to job groups. Any job could name any class:
-- a team's jobs named another team's class took its tokens, and the
-- other team's tasks waited (a class of 10/s shared with a job firing
-- 1,000 tasks a minute is that job's). groups lists the job groups whose
-- jobs may name the class; NULL: any group, and the API then refuses the
-- class to keys limited to groups (openapi's groupGuard). Held here, for
-- every writer: a job naming a class outside its groups is refused
-- (job_rate_class_groups), and so is a change of a class's groups that
-- leaves out the group of a job naming it (rate_class_groups_in_use).
ALTER TABLE ax.rate_class ADD COLUMN groups text[];
ALTER TABLE ax.rate_class ADD CONSTRAINT rate_class_groups_size
    CHECK (groups IS NULL OR (cardinality(groups) BETWEEN 1 AND 100 AND array_position(groups, NULL) IS NULL));
COMMENT ON COLUMN ax.rate_class.groups IS
    'the job groups whose jobs may name the class; NULL: any (but not through keys limited to groups)';

-- The class row is read FOR KEY SHARE, as the foreign key reads it: the
-- leases' token takes (FOR NO KEY UPDATE) do not wait for a job's
-- transaction. A change of the class's groups locks the row FOR UPDATE
-- first (below).
-- +goose StatementBegin
CREATE FUNCTION ax.job_rate_class_groups() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    allowed text[];
BEGIN
    SELECT c.groups INTO allowed FROM ax.rate_class c WHERE c.name = NEW.rate_limit_class FOR KEY SHARE;
    IF allowed IS NOT NULL AND NOT NEW.group_name = ANY(allowed) THEN
        RAISE EXCEPTION 'rate class % is kept to groups %', NEW.rate_limit_class, allowed
            USING ERRCODE = 'check_violation', CONSTRAINT = 'job_rate_class_groups',
                  DETAIL = format('job group %s is not one of them', NEW.group_name);
    END IF;
    RETURN NEW;
END $$;
-- +goose StatementEnd
CREATE TRIGGER job_rate_class_groups BEFORE INSERT OR UPDATE OF rate_limit_class, group_name ON ax.job
    FOR EACH ROW WHEN (NEW.rate_limit_class IS NOT NULL) EXECUTE FUNCTION ax.job_rate_class_groups();

-- Before the update, the class's row is locked FOR UPDATE, which waits
-- for the jobs being written that name it (their KEY SHARE; a non-key
-- update alone does not conflict with it, and such a job would read the
-- groups as they were): then the check, a statement of its own with a
-- new snapshot, sees them. A job written after waits for the change and
-- reads the new groups. (A new class has no job naming it yet.)
-- +goose StatementBegin
CREATE FUNCTION ax.rate_class_groups_in_use() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    outside text;
BEGIN
    PERFORM 1 FROM ax.rate_class c WHERE c.name = OLD.name FOR UPDATE;
    SELECT j.group_name INTO outside FROM ax.job j
    WHERE j.rate_limit_class = OLD.name AND NOT j.group_name = ANY(NEW.groups)
    LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'jobs of group % name rate class %', outside, OLD.name
            USING ERRCODE = 'check_violation', CONSTRAINT = 'rate_class_groups_in_use',
                  DETAIL = format('group %s', outside);
    END IF;
    RETURN NEW;
END $$;
-- +goose StatementEnd
CREATE TRIGGER rate_class_groups_in_use BEFORE UPDATE OF groups ON ax.rate_class
    FOR EACH ROW WHEN (NEW.groups IS NOT NULL) EXECUTE FUNCTION ax.rate_class_groups_in_use();

-- +goose Down
DROP TRIGGER rate_class_groups_in_use ON ax.rate_class;
DROP FUNCTION ax.rate_class_groups_in_use();
DROP TRIGGER job_rate_class_groups ON ax.job;
DROP FUNCTION ax.job_rate_class_groups();
ALTER TABLE ax.rate_class DROP COLUMN groups;
