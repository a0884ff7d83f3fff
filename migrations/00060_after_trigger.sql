-- +goose Up

-- A job of trigger kind 'after' fires once per logical time of its
-- upstream jobs (the scheduled_for of their runs): with mode 'all' when
-- every upstream's run for that time has ended as its edge asks, with
-- 'any' when the first has.
CREATE TABLE ax.after_trigger (
    job_id uuid PRIMARY KEY REFERENCES ax.job (id) ON DELETE CASCADE,
    mode   text NOT NULL DEFAULT 'all',
    CONSTRAINT after_trigger_mode_known CHECK (mode IN ('all', 'any'))
);

-- after_edge is one upstream of a downstream job: the condition its runs
-- must end in (success: succeeded; failure: failed or timed out;
-- completion: any end). Deleting an upstream job drops its edges.
CREATE TABLE ax.after_edge (
    job_id          uuid NOT NULL REFERENCES ax.after_trigger (job_id) ON DELETE CASCADE,
    upstream_job_id uuid NOT NULL REFERENCES ax.job (id) ON DELETE CASCADE,
    position        integer NOT NULL,
    on_state        text NOT NULL DEFAULT 'success',
    PRIMARY KEY (job_id, upstream_job_id),
    CONSTRAINT after_edge_on_known CHECK (on_state IN ('success', 'failure', 'completion')),
    CONSTRAINT after_edge_not_self CHECK (job_id <> upstream_job_id)
);
-- An ended run finds the jobs waiting on its job.
CREATE INDEX after_edge_upstream_idx ON ax.after_edge (upstream_job_id);

-- after_wait is one downstream job's wait for one logical time: which
-- upstream runs arrived (arrived: upstream job id → {execution_id, state,
-- met}) and what became of it. It is written in the transaction that ends
-- an upstream run (trigger after_upstream_ended), so the decision is
-- never only in a process's memory:
--
--   waiting ──► ready ──► fired      (a replica made the run: execution_id)
--      └──────► skipped              (an upstream ended against its edge: skip_run)
--   fired / skipped ──► ready        (a re-run of an upstream with cascade)
--
-- The primary key makes the decision once per (job, logical time),
-- whatever replicas, crashes and retries.
CREATE TABLE ax.after_wait (
    job_id        uuid NOT NULL REFERENCES ax.job (id) ON DELETE CASCADE,
    logical_time  timestamptz NOT NULL,
    state         text NOT NULL DEFAULT 'waiting',
    arrived       jsonb NOT NULL DEFAULT '{}',
    execution_id  uuid,
    skip_run      uuid,
    cascade_from  uuid,
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (job_id, logical_time),
    CONSTRAINT after_wait_state_known CHECK (state IN ('waiting', 'ready', 'fired', 'skipped')),
    CONSTRAINT after_wait_arrived_object CHECK (jsonb_typeof(arrived) = 'object')
);
-- Firers look for ready waits only.
CREATE INDEX after_wait_ready_idx ON ax.after_wait (updated_at) WHERE state = 'ready';

-- A re-run made with cascade fires its job's downstreams again.
ALTER TABLE ax.execution_rerun ADD COLUMN cascade boolean NOT NULL DEFAULT false;

-- A downstream run holds its logical time like a tick: once per
-- (job, scheduled_for).
DROP INDEX ax.execution_tick_once_idx;
CREATE UNIQUE INDEX execution_tick_once_idx ON ax.execution (job_id, scheduled_for)
    WHERE cause IN ('schedule', 'catch_up', 'backfill', 'after');

-- after_upstream_ended records the runs that reach history (every ended
-- run does, in the statement that ends it or, for a run whose tasks were
-- still busy, in the one that moves it) in the waits of their downstream
-- jobs. A re-run counts only when made with cascade; otherwise the first
-- run of an upstream for a logical time is the one that counts.
-- +goose StatementBegin
CREATE FUNCTION ax.after_upstream_ended() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    a      record;
    w      ax.after_wait;
    mode   text;
    edges  integer;
    met    integer;
    unmet  integer;
    st     text;
BEGIN
    -- Most ended runs have no downstream: one index probe per job.
    IF NOT EXISTS (SELECT 1 FROM ax.after_edge e WHERE e.upstream_job_id IN (SELECT DISTINCT n.job_id FROM new_rows n)) THEN
        RETURN NULL;
    END IF;
    FOR a IN
        SELECT n.id, n.job_id, n.scheduled_for, n.state::text AS state, e.job_id AS downstream,
               coalesce(r.cascade, false) AS cascade,
               CASE e.on_state WHEN 'success' THEN n.state = 'succeeded'
                               WHEN 'failure' THEN n.state IN ('failed', 'timed_out')
                               ELSE true END AS met,
               coalesce(j.group_name || '/' || j.name, n.job_id::text) AS upstream_name
        FROM new_rows n
        JOIN ax.after_edge e ON e.upstream_job_id = n.job_id
        LEFT JOIN ax.execution_rerun r ON r.execution_id = n.id
        LEFT JOIN ax.job j ON j.id = n.job_id
        WHERE n.cause <> 'rerun' OR r.cascade
        ORDER BY e.job_id, n.scheduled_for, n.id
    LOOP
        INSERT INTO ax.after_wait (job_id, logical_time) VALUES (a.downstream, a.scheduled_for)
        ON CONFLICT DO NOTHING;
        SELECT * INTO w FROM ax.after_wait
        WHERE job_id = a.downstream AND logical_time = a.scheduled_for FOR UPDATE;
        IF w.arrived ? a.job_id::text AND NOT a.cascade THEN
            CONTINUE;
        END IF;
        w.arrived := w.arrived || jsonb_build_object(a.job_id::text,
            jsonb_build_object('execution_id', a.id, 'state', a.state, 'met', a.met));
        SELECT t.mode INTO mode FROM ax.after_trigger t WHERE t.job_id = a.downstream;
        SELECT count(*), count(*) FILTER (WHERE (w.arrived -> e.upstream_job_id::text ->> 'met')::boolean),
               count(*) FILTER (WHERE NOT (w.arrived -> e.upstream_job_id::text ->> 'met')::boolean)
        INTO edges, met, unmet
        FROM ax.after_edge e WHERE e.job_id = a.downstream;
        st := CASE WHEN mode = 'all' AND unmet > 0 THEN 'skipped'
                   WHEN mode = 'all' AND met = edges THEN 'ready'
                   WHEN mode = 'any' AND met > 0 THEN 'ready'
                   WHEN mode = 'any' AND unmet = edges THEN 'skipped'
                   ELSE 'waiting' END;
        IF w.state = 'waiting' OR (a.cascade AND st = 'ready' AND w.state IN ('fired', 'skipped')) THEN
            IF st = 'skipped' AND w.state = 'waiting' THEN
                INSERT INTO ax.skipped_fire (job_id, reason, first_tick, last_tick, tick_count, detail)
                VALUES (a.downstream, 'upstream_failed', a.scheduled_for, a.scheduled_for, 1,
                        format('upstream %s run %s ended %s', a.upstream_name, a.id, a.state));
                w.skip_run := a.id;
            END IF;
            IF st = 'ready' THEN
                w.cascade_from := CASE WHEN a.cascade THEN a.id END;
                PERFORM pg_notify('ax_after_ready', a.downstream::text);
            END IF;
            IF st <> 'waiting' THEN
                w.state := st;
            END IF;
        END IF;
        UPDATE ax.after_wait SET arrived = w.arrived, state = w.state, skip_run = w.skip_run,
               cascade_from = w.cascade_from, updated_at = now()
        WHERE job_id = w.job_id AND logical_time = w.logical_time;
    END LOOP;
    RETURN NULL;
END $$;
-- +goose StatementEnd

CREATE TRIGGER after_upstream_ended AFTER INSERT ON ax.execution_history
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION ax.after_upstream_ended();

-- +goose Down

DROP TRIGGER after_upstream_ended ON ax.execution_history;
DROP FUNCTION ax.after_upstream_ended();
DROP INDEX ax.execution_tick_once_idx;
CREATE UNIQUE INDEX execution_tick_once_idx ON ax.execution (job_id, scheduled_for)
    WHERE cause IN ('schedule', 'catch_up', 'backfill');
ALTER TABLE ax.execution_rerun DROP COLUMN cascade;
DROP TABLE ax.after_wait;
DROP TABLE ax.after_edge;
DROP TABLE ax.after_trigger;
