-- +goose Up

-- Moving a job's unfinished tasks to its new pool (job_pool_moved, and
-- the reaper's catch-up for 30 s after, 00082) looked the pool up per
-- task (ax.task_pool_for: md5 of the labels and an index probe). With a
-- job of 20,000 unfinished tasks, each reaper sweep spent 135-146 ms on
-- it for the 30 s after the job's labels changed, in the transaction
-- that also expires every tenant's leases, and the job's update took
-- 350 ms. A job's tasks differ only by their rate class (a class changed
-- after a fire): the job's own class has the job's pool, and each other
-- class is looked up once.
-- +goose StatementBegin
CREATE FUNCTION ax.job_pool_follow(j ax.job) RETURNS integer LANGUAGE sql AS $$
    WITH live AS MATERIALIZED (
        SELECT u.id, u.pool_id, u.rate_class
        FROM ax.task u
        WHERE u.execution_id IN (SELECT e.id FROM ax.execution e WHERE e.job_id = j.id AND e.finished_at IS NULL)
          AND u.state IN ('pending', 'leased', 'running') AND NOT u.agentless AND NOT u.pinned
    ), pools AS MATERIALIZED (
        SELECT c.rate_class,
               CASE WHEN c.rate_class IS NOT DISTINCT FROM j.rate_limit_class THEN j.pool_id
                    ELSE ax.task_pool_for(j.target_labels, j.executor_kind, c.rate_class) END AS pool_id
        FROM (SELECT DISTINCT l.rate_class FROM live l) c
    ), moved AS (
        UPDATE ax.task t SET pool_id = p.pool_id
        FROM live l
        JOIN pools p ON p.rate_class IS NOT DISTINCT FROM l.rate_class
        WHERE t.id = l.id AND l.pool_id <> p.pool_id
        RETURNING 1
    )
    SELECT count(*)::integer FROM moved
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION ax.job_pool_moved() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM ax.job_pool_follow(NEW);
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
            AND u.state IN ('pending', 'leased', 'running') AND NOT u.agentless AND NOT u.pinned) m
    WHERE t.id = m.id AND t.pool_id <> m.pool_id;
    INSERT INTO ax.job_pool_change (job_id, changed_at) VALUES (NEW.id, now())
    ON CONFLICT (job_id) DO UPDATE SET changed_at = excluded.changed_at;
    RETURN NULL;
END $$;
-- +goose StatementEnd
DROP FUNCTION ax.job_pool_follow(ax.job);
