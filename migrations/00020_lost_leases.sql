-- +goose Up
-- lost_leases counts the leases of a task that ended because its agent
-- died or went silent (lease expired, agent offline or silent for a whole
-- lease). Such a task runs again on another agent without using up an
-- attempt of the job's retry policy, up to the reaper's own cap (3 by
-- default): the lease lost that many times fails it with error "lost: …".
-- A constant default: adding the column rewrites nothing.
ALTER TABLE ax.task ADD COLUMN lost_leases integer NOT NULL DEFAULT 0;
-- NOT VALID: every row there is has the default 0, so there is nothing to
-- check, and a scan of a large task table under this lock is avoided; the
-- constraint holds for every row written from now on.
ALTER TABLE ax.task ADD CONSTRAINT task_lost_leases_nonnegative CHECK (lost_leases >= 0) NOT VALID;

-- The default retry policy (db.Job.FillDefaults) is 3 retries: 4 attempts,
-- after 5, 10 and 20 s. Jobs stored before keep what they have.
ALTER TABLE ax.job ALTER COLUMN retry_max_attempts SET DEFAULT 4;

-- +goose Down
ALTER TABLE ax.job ALTER COLUMN retry_max_attempts SET DEFAULT 1;
ALTER TABLE ax.task DROP COLUMN lost_leases;
