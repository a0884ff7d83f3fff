-- +goose Up

-- upcoming_fire holds every tick of the next hour (and a little more) of
-- the unpaused cron and interval jobs, computed by the replicas (cron is
-- evaluated in Go, in each job's zone): one replica at a time replaces
-- it, every half minute and when jobs change. ax.upcoming_hour reads it,
-- so an operator sees every fire of the hour, not only each job's next.
-- computed_at tells the other replicas the list is fresh, so the work is
-- done once per period, not once per replica.
CREATE TABLE ax.upcoming_fire (
    job_id uuid NOT NULL REFERENCES ax.job (id) ON DELETE CASCADE,
    fire_at timestamptz NOT NULL,
    computed_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (job_id, fire_at)
);
CREATE INDEX upcoming_fire_at_idx ON ax.upcoming_fire (fire_at);

DROP VIEW ax.upcoming_hour;
CREATE VIEW ax.upcoming_hour AS
SELECT * FROM (
    -- every tick of the cron and interval jobs, as the replicas computed them
    SELECT j.id AS job_id, j.group_name, j.name, j.trigger_kind, j.cron_expr, j.timezone, u.fire_at AS next_fire_at,
           NULL::uuid AS delayed_run_id
    FROM ax.upcoming_fire u
    JOIN ax.job j ON j.id = u.job_id
    JOIN ax.trigger t ON t.job_id = u.job_id
    WHERE u.fire_at > now() AND u.fire_at <= now() + interval '1 hour' AND NOT t.paused
    UNION ALL
    -- the one fire of delay jobs
    SELECT j.id, j.group_name, j.name, j.trigger_kind, j.cron_expr, j.timezone, t.next_fire_at, NULL::uuid
    FROM ax.trigger t
    JOIN ax.job j ON j.id = t.job_id
    WHERE j.trigger_kind = 'delay' AND t.next_fire_at > now() AND t.next_fire_at <= now() + interval '1 hour' AND NOT t.paused
    UNION ALL
    -- runs for later
    SELECT j.id, j.group_name, j.name, j.trigger_kind, j.cron_expr, j.timezone, d.run_at, d.id
    FROM ax.delayed_run d
    JOIN ax.job j ON j.id = d.job_id
    JOIN ax.trigger t ON t.job_id = d.job_id
    WHERE d.run_at > now() AND d.run_at <= now() + interval '1 hour' AND d.cancelled_at IS NULL AND NOT t.paused
) u
ORDER BY next_fire_at;

-- +goose Down

DROP VIEW ax.upcoming_hour;
CREATE VIEW ax.upcoming_hour AS
SELECT * FROM (
    SELECT j.id AS job_id, j.group_name, j.name, j.trigger_kind, j.cron_expr, j.timezone, t.next_fire_at,
           NULL::uuid AS delayed_run_id
    FROM ax.trigger t
    JOIN ax.job j ON j.id = t.job_id
    WHERE t.next_fire_at > now() AND t.next_fire_at <= now() + interval '1 hour' AND NOT t.paused
    UNION ALL
    SELECT j.id, j.group_name, j.name, j.trigger_kind, j.cron_expr, j.timezone, d.run_at, d.id
    FROM ax.delayed_run d
    JOIN ax.job j ON j.id = d.job_id
    JOIN ax.trigger t ON t.job_id = d.job_id
    WHERE d.run_at > now() AND d.run_at <= now() + interval '1 hour' AND d.cancelled_at IS NULL AND NOT t.paused
) u
ORDER BY next_fire_at;
DROP TABLE ax.upcoming_fire;
