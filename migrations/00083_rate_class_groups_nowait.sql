-- +goose Up

-- A change of a class's groups (00080) locked the class FOR UPDATE and
-- waited for every open transaction that wrote a job naming it; behind
-- it queued every lease's token take (FOR NO KEY UPDATE, which the
-- waiting FOR UPDATE goes before). A long declaration could so stall the
-- class's leases, and the CLI's update sends the groups back unchanged,
-- which took that path too. Now the check runs only when the groups
-- change, and the lock is taken NOWAIT: a job being written answers the
-- change 409 (try again) instead of a queue. The token take skips a
-- class whose row is locked (RateClassTake: that lease gets no token of
-- it this time).
DROP TRIGGER rate_class_groups_in_use ON ax.rate_class;
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION ax.rate_class_groups_in_use() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    outside text;
BEGIN
    PERFORM 1 FROM ax.rate_class c WHERE c.name = OLD.name FOR UPDATE NOWAIT;
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
    FOR EACH ROW WHEN (NEW.groups IS NOT NULL AND OLD.groups IS DISTINCT FROM NEW.groups)
    EXECUTE FUNCTION ax.rate_class_groups_in_use();

-- +goose Down
DROP TRIGGER rate_class_groups_in_use ON ax.rate_class;
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION ax.rate_class_groups_in_use() RETURNS trigger LANGUAGE plpgsql AS $$
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
