-- +goose Up

-- timeout_mode says how a job's tasks get their timeout: fixed (each
-- attempt gets timeout_seconds, as before) or adaptive (3 × the P95 of the
-- job's recent successful attempts, at least 5 s, timeout_seconds as the
-- ceiling and the start value; a retry after a timeout gets twice the
-- timeout of the attempt before it, up to the ceiling). Existing jobs stay
-- fixed.
CREATE TYPE ax.timeout_mode AS ENUM ('fixed', 'adaptive');
ALTER TABLE ax.job ADD COLUMN timeout_mode ax.timeout_mode NOT NULL DEFAULT 'fixed';
-- The 5 s floor must fit under the ceiling.
ALTER TABLE ax.job ADD CONSTRAINT job_adaptive_timeout_ceiling
    CHECK (timeout_mode <> 'adaptive' OR timeout_seconds >= 5);

-- job_timeout_measure is the last measure of an adaptive job's history,
-- taken by a fire (TaskInsertForExecutions) when there was none or it was
-- older than a minute, so a fire reads the history of a job at most once
-- a minute: samples successful attempts (at most 100, none older than
-- 24 h) whose P95 duration was p95_ms (null without samples). The timeout
-- itself is derived from it and the job's current ceiling when used.
-- Kept out of ax.job so measuring never touches a definition.
CREATE TABLE ax.job_timeout_measure (
    job_id      uuid PRIMARY KEY REFERENCES ax.job (id) ON DELETE CASCADE,
    samples     integer NOT NULL,
    p95_ms      bigint,
    computed_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT job_timeout_measure_samples_range CHECK (samples BETWEEN 0 AND 100),
    CONSTRAINT job_timeout_measure_p95_with_samples CHECK ((samples = 0) = (p95_ms IS NULL) AND (p95_ms IS NULL OR p95_ms >= 0))
);

-- +goose Down
DROP TABLE ax.job_timeout_measure;
ALTER TABLE ax.job DROP CONSTRAINT job_adaptive_timeout_ceiling;
ALTER TABLE ax.job DROP COLUMN timeout_mode;
DROP TYPE ax.timeout_mode;
