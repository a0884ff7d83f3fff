-- +goose Up

-- A job switched to "degrade_action": "skip" lets go of its tasks held
-- below their class's floor (migration 00086): the reaper's skip reads
-- only tasks not held, so they would have waited for the floor to lift
-- and then run, where the job now says to skip them (a review of 00086
-- found it). Its unfinished runs' tasks are found as job_pool_moved finds
-- them, through execution_unfinished_idx.
-- +goose StatementBegin
CREATE FUNCTION ax.job_skips_below_floor() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE ax.task t SET floor_held = false
    WHERE t.execution_id IN (SELECT e.id FROM ax.execution e WHERE e.job_id = NEW.id AND e.finished_at IS NULL)
      AND t.floor_held AND t.state = 'pending';
    RETURN NULL;
END $$;
-- +goose StatementEnd
CREATE TRIGGER job_skips_below_floor AFTER UPDATE OF degrade_action ON ax.job
    FOR EACH ROW WHEN (NEW.degrade_action = 'skip' AND OLD.degrade_action IS DISTINCT FROM NEW.degrade_action)
    EXECUTE FUNCTION ax.job_skips_below_floor();

-- +goose Down
DROP TRIGGER job_skips_below_floor ON ax.job;
DROP FUNCTION ax.job_skips_below_floor();
