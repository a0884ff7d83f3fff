-- +goose Up
-- Flow control: token buckets per rate class cap how fast the tasks of a
-- class are leased; a class under pressure (or switched by an operator)
-- leases only tasks at or above a priority floor. Old tasks gain priority
-- so low-priority work is delayed, never starved.

CREATE TABLE ax.rate_class (
    name                   text PRIMARY KEY,
    description            text NOT NULL DEFAULT '',
    -- rate is tokens per second, burst the bucket size; tokens is the
    -- level at refilled_at. Readers refill lazily from now():
    -- least(burst, tokens + rate * seconds since refilled_at).
    rate                   double precision NOT NULL,
    burst                  double precision NOT NULL,
    tokens                 double precision NOT NULL,
    refilled_at            timestamptz NOT NULL DEFAULT now(),
    -- An operator's floor: while set, tasks below it wait.
    manual_min_priority    integer,
    -- Automatic degradation: while waiting tasks number more than
    -- auto_depth or the oldest has waited more than auto_age_seconds, the
    -- floor is auto_min_priority. degraded_since is set by maintenance.
    auto_min_priority      integer,
    auto_depth             integer,
    auto_age_seconds       integer,
    degraded_since         timestamptz,
    created_at             timestamptz NOT NULL DEFAULT now(),
    updated_at             timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT rate_class_name_format CHECK (name ~ '^[A-Za-z0-9_.-]{1,100}$'),
    CONSTRAINT rate_class_rate_positive CHECK (rate > 0),
    CONSTRAINT rate_class_burst_range CHECK (burst >= 1),
    CONSTRAINT rate_class_tokens_range CHECK (tokens >= 0 AND tokens <= burst),
    -- An automatic floor needs a threshold, and a threshold a floor.
    CONSTRAINT rate_class_auto_complete CHECK (
        (auto_min_priority IS NULL) = (auto_depth IS NULL AND auto_age_seconds IS NULL))
);

-- Jobs named classes before classes existed: give those a generous bucket
-- so the foreign key below holds and nothing slows down.
INSERT INTO ax.rate_class (name, rate, burst, tokens)
SELECT DISTINCT rate_limit_class, 1000, 1000, 1000 FROM ax.job WHERE rate_limit_class IS NOT NULL
ON CONFLICT DO NOTHING;

CREATE TYPE ax.degrade_action AS ENUM ('wait', 'skip');

ALTER TABLE ax.job
    ADD COLUMN degrade_action ax.degrade_action NOT NULL DEFAULT 'wait',
    ADD CONSTRAINT job_rate_limit_class_fk FOREIGN KEY (rate_limit_class)
        REFERENCES ax.rate_class (name) ON UPDATE CASCADE;
CREATE INDEX job_rate_limit_class_idx ON ax.job (rate_limit_class) WHERE rate_limit_class IS NOT NULL;

-- A task carries its class so leasing filters without a join per row.
ALTER TABLE ax.task ADD COLUMN rate_class text;

-- The starvation guard reads pending tasks oldest first.
CREATE INDEX task_pending_age_idx ON ax.task (not_before) WHERE state = 'pending';

-- Rate classes at a glance: refilled tokens, waiting depth, floor.
CREATE VIEW ax.rate_class_status AS
SELECT c.name, c.rate, c.burst,
       least(c.burst, c.tokens + c.rate * extract(epoch FROM now() - c.refilled_at)) AS tokens_now,
       coalesce(c.manual_min_priority, CASE WHEN c.degraded_since IS NOT NULL THEN c.auto_min_priority END) AS min_priority,
       (SELECT count(*) FROM ax.task t WHERE t.state = 'pending' AND t.rate_class = c.name AND t.not_before <= now()) AS waiting
FROM ax.rate_class c
ORDER BY c.name;

-- +goose Down
DROP VIEW ax.rate_class_status;
DROP INDEX ax.task_pending_age_idx;
ALTER TABLE ax.task DROP COLUMN rate_class;
DROP INDEX ax.job_rate_limit_class_idx;
ALTER TABLE ax.job
    DROP CONSTRAINT job_rate_limit_class_fk,
    DROP COLUMN degrade_action;
DROP TYPE ax.degrade_action;
DROP TABLE ax.rate_class;
