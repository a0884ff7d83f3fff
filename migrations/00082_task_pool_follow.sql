-- +goose Up

-- Tasks follow their job's pool in every state, and a fire that raced a
-- job's change is caught up (a review of 00079-00081 found both).
--
-- 1. A task leased or running when its job's labels, executor kind or
--    class changed kept the old pool, and went back to pending with it
--    (a release, a retry, a lost lease): no agent that may take it reads
--    that pool. job_pool_moved now moves unfinished tasks in any state.
-- 2. A fire reads the job's pool without a lock (a job's update does not
--    wait for fires): tasks written by a fire that began before the
--    change and committed after it have the old pool. Each change is
--    recorded in ax.job_pool_change; the reaper moves the tasks of jobs
--    changed in the last 30 seconds once a second (TaskPoolCatchUp) and
--    then forgets the change.
-- 3. A pinned (broadcast) task stays in the pool it was written in: its
--    agent matched that pool, and may match no other. Before, a keyed
--    pinned task moved to the new pool was read by no lease of its agent,
--    and its run never ended.
CREATE TABLE ax.job_pool_change (
    job_id uuid PRIMARY KEY,
    changed_at timestamptz NOT NULL DEFAULT now()
);
COMMENT ON TABLE ax.job_pool_change IS
    'jobs whose pool changed lately: the reaper moves their unfinished tasks for 30 s (fires that raced the change)';

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION ax.job_pool_moved() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE ax.task t SET pool_id = m.pool_id
    FROM (SELECT u.id, ax.task_pool_for(NEW.target_labels, NEW.executor_kind, u.rate_class) AS pool_id
          FROM ax.task u
          WHERE u.execution_id IN (SELECT e.id FROM ax.execution e WHERE e.job_id = NEW.id AND e.finished_at IS NULL)
            AND u.state IN ('pending', 'leased', 'running') AND NOT u.agentless AND NOT u.pinned) m
    WHERE t.id = m.id AND t.pool_id <> m.pool_id;
    INSERT INTO ax.job_pool_change (job_id, changed_at) VALUES (NEW.id, now())
    ON CONFLICT (job_id) DO UPDATE SET changed_at = excluded.changed_at;
    RETURN NULL;
END $$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION ax.job_pool_moved() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE ax.task t SET pool_id = m.pool_id
    FROM (SELECT u.id, ax.task_pool_for(NEW.target_labels, NEW.executor_kind, u.rate_class) AS pool_id
          FROM ax.task u
          WHERE u.execution_id IN (SELECT e.id FROM ax.execution e WHERE e.job_id = NEW.id AND e.finished_at IS NULL)
            AND u.state = 'pending' AND NOT u.agentless) m
    WHERE t.id = m.id AND t.pool_id <> m.pool_id;
    RETURN NULL;
END $$;
-- +goose StatementEnd
DROP TABLE ax.job_pool_change;
