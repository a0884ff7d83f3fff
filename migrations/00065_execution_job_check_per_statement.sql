-- +goose Up

-- A run's job is checked once per job and statement, not once per run
-- (issue #43). The foreign key execution_job_id_fkey ran its check per
-- inserted row: a query that locks the job's row FOR KEY SHARE, 5.3 ms of
-- the 15.9 a fire of 500 runs spent in ExecutionInsertMany (auto_explain,
-- BenchmarkFireThroughput), though those 500 runs name a handful of jobs.
-- The same rule, held the same way, now costs one lock per job:
--   - an insert locks the jobs its rows name FOR KEY SHARE, in id order,
--     at the end of the statement, and fails with foreign_key_violation
--     (constraint execution_job_id_fkey, as before) when one is gone.
--     The lock holds to commit, so a job's deletion waits for the
--     transaction that fires it, and a fire waits for a deletion, then
--     fails: no run outlives its job;
--   - deleting a job deletes its live runs, in the same statement (the
--     cascade), read with a snapshot taken then, so runs whose fire
--     committed while the deletion waited are deleted too.
-- Neither a job's id nor a run's job_id changes (no statement updates
-- them), so updates need no check.
ALTER TABLE ax.execution DROP CONSTRAINT execution_job_id_fkey;

-- +goose StatementBegin
CREATE FUNCTION ax.execution_job_exists() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    jobs    uuid[];
    locked  integer;
    missing uuid;
BEGIN
    jobs := ARRAY(SELECT DISTINCT r.job_id FROM new_rows r ORDER BY r.job_id);
    -- By = ANY of an array: a probe of job_pkey per job, whatever the plan.
    PERFORM 1 FROM ax.job j WHERE j.id = ANY(jobs) ORDER BY j.id FOR KEY SHARE;
    GET DIAGNOSTICS locked = ROW_COUNT;
    IF locked < cardinality(jobs) THEN
        SELECT u.id INTO missing FROM unnest(jobs) AS u(id)
        WHERE NOT EXISTS (SELECT 1 FROM ax.job j WHERE j.id = u.id)
        LIMIT 1;
        RAISE EXCEPTION 'insert or update on table "execution" violates foreign key constraint "execution_job_id_fkey"'
            USING ERRCODE = 'foreign_key_violation', CONSTRAINT = 'execution_job_id_fkey', TABLE = 'execution',
                  SCHEMA = 'ax', DETAIL = format('Key (job_id)=(%s) is not present in table "job".', missing);
    END IF;
    RETURN NULL;
END $$;
-- +goose StatementEnd

CREATE TRIGGER execution_job_exists AFTER INSERT ON ax.execution
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION ax.execution_job_exists();

-- +goose StatementBegin
CREATE FUNCTION ax.execution_job_deleted() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM ax.execution e WHERE e.job_id IN (SELECT o.id FROM old_rows o);
    RETURN NULL;
END $$;
-- +goose StatementEnd

CREATE TRIGGER execution_job_deleted AFTER DELETE ON ax.job
    REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION ax.execution_job_deleted();

-- +goose Down

DROP TRIGGER execution_job_deleted ON ax.job;
DROP FUNCTION ax.execution_job_deleted();
DROP TRIGGER execution_job_exists ON ax.execution;
DROP FUNCTION ax.execution_job_exists();
ALTER TABLE ax.execution ADD CONSTRAINT execution_job_id_fkey
    FOREIGN KEY (job_id) REFERENCES ax.job (id) ON DELETE CASCADE;
