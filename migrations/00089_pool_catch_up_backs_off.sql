-- +goose Up

-- The reaper's catch-up of a job whose pool changed (TaskPoolCatchUp,
-- 00082) reads every unfinished task of the job. It did so every sweep,
-- once a second, for 30 s: 33-39 ms a sweep for a job with 20,000 tasks,
-- in the transaction that expires every tenant's leases. The tasks it
-- looks for were written by a fire that read the old pool and committed
-- after the change: most such fires commit within a second, and the
-- later the fewer. A change is now caught up at once and then at
-- intervals that double from the change (1, 2, 4, 8, 16 s, and the last
-- pass past 30 s): 7 passes, not 30, and a task written by such a fire
-- waits at most as long again as its fire ran past the change.
ALTER TABLE ax.job_pool_change ADD COLUMN next_at timestamptz NOT NULL DEFAULT now();
COMMENT ON TABLE ax.job_pool_change IS
    'jobs whose pool changed lately: the reaper moves their unfinished tasks at next_at, then at doubling intervals, until 30 s have passed (fires that raced the change)';

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION ax.job_pool_moved() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM ax.job_pool_follow(NEW);
    INSERT INTO ax.job_pool_change (job_id, changed_at, next_at) VALUES (NEW.id, now(), now())
    ON CONFLICT (job_id) DO UPDATE SET changed_at = excluded.changed_at, next_at = excluded.next_at;
    RETURN NULL;
END $$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION ax.job_pool_moved() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM ax.job_pool_follow(NEW);
    INSERT INTO ax.job_pool_change (job_id, changed_at) VALUES (NEW.id, now())
    ON CONFLICT (job_id) DO UPDATE SET changed_at = excluded.changed_at;
    RETURN NULL;
END $$;
-- +goose StatementEnd
COMMENT ON TABLE ax.job_pool_change IS
    'jobs whose pool changed lately: the reaper moves their unfinished tasks for 30 s (fires that raced the change)';
ALTER TABLE ax.job_pool_change DROP COLUMN next_at;
