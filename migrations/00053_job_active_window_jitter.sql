-- +goose Up

-- Schedules as teams write them (issue #41): a job may fire only within an
-- active window [active_from, active_until) (no tick outside; either end
-- may be open), and may spread its ticks by jitter_seconds: each
-- scheduled run's tasks become leasable at the tick plus a deterministic
-- offset in [0, jitter_seconds), so a thousand jobs at 00:00 reach their
-- backends spread over the jitter. The run keeps the tick as
-- scheduled_for, so a tick still fires once.
ALTER TABLE ax.job
    ADD COLUMN active_from timestamptz,
    ADD COLUMN active_until timestamptz,
    ADD COLUMN jitter_seconds integer NOT NULL DEFAULT 0,
    ADD CONSTRAINT job_active_window_order CHECK (active_until > active_from),
    ADD CONSTRAINT job_jitter_bounds CHECK (jitter_seconds BETWEEN 0 AND 86400);

-- ax.jitter_offset is the offset of one tick: the first 32 bits of
-- md5(job id || '/' || the tick's Unix seconds) modulo the jitter in
-- milliseconds. Every replica computes the same one; the Go twin
-- (schedule.JitterOffset) shows it in previews, and a test holds the two
-- equal.
-- +goose StatementBegin
CREATE FUNCTION ax.jitter_offset(job_id uuid, tick timestamptz, jitter_seconds integer)
RETURNS interval
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
AS $$
    SELECT CASE WHEN jitter_seconds > 0 THEN
        make_interval(secs => (('x' || substr(md5(job_id::text || '/' || floor(extract(epoch FROM tick))::bigint::text), 1, 8))::bit(32)::bigint
                               % (jitter_seconds::bigint * 1000)) / 1000.0)
    ELSE interval '0' END
$$;
-- +goose StatementEnd

-- +goose Down

DROP FUNCTION ax.jitter_offset(uuid, timestamptz, integer);
ALTER TABLE ax.job DROP CONSTRAINT job_jitter_bounds, DROP CONSTRAINT job_active_window_order,
    DROP COLUMN jitter_seconds, DROP COLUMN active_until, DROP COLUMN active_from;
