-- +goose Up

-- Failure notices without Prometheus (issue #41 item 8): a job names up to
-- a few targets (a Slack-compatible incoming webhook, or a generic webhook
-- signed per Standard Webhooks with the job's signing secret) and gets one
-- notice per incident: `failed` when a run fails for good after a success
-- (or first), `recovered` at the first success after failures, `set_aside`
-- when its trigger is quarantined, `callback_failed` when a callback is
-- given up. The incident state lives on the target row, so it survives
-- restarts and any number of replicas; the notice rows are the outbox the
-- server turns into River jobs (like ax.callback).
CREATE TYPE ax.notice_event AS ENUM ('failed', 'recovered', 'set_aside', 'callback_failed');
CREATE TYPE ax.notice_kind AS ENUM ('slack', 'webhook');
-- pending: to deliver (or retrying); delivered; notice_failed: retries
-- spent; rate_limited: over its target's rate, counted into the next
-- notice that goes to the same URL instead of being sent.
CREATE TYPE ax.notice_state AS ENUM ('pending', 'delivered', 'notice_failed', 'rate_limited');

CREATE TABLE ax.notice_target (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job_id uuid NOT NULL REFERENCES ax.job (id) ON DELETE CASCADE,
    position integer NOT NULL,
    kind ax.notice_kind NOT NULL,
    url text NOT NULL,
    events ax.notice_event[] NOT NULL,
    -- The incident: open from the first run that failed for good until
    -- the next success; failed_runs counts its failed runs.
    incident_open boolean NOT NULL DEFAULT false,
    incident_since timestamptz,
    failed_runs integer NOT NULL DEFAULT 0,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT notice_target_url_length CHECK (length(url) BETWEEN 1 AND 2048),
    CONSTRAINT notice_target_position CHECK (position BETWEEN 0 AND 9),
    CONSTRAINT notice_target_incident CHECK (incident_open = (incident_since IS NOT NULL)),
    UNIQUE (job_id, kind, url)
);

CREATE TABLE ax.notice (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job_id uuid NOT NULL REFERENCES ax.job (id) ON DELETE CASCADE,
    target_id bigint NOT NULL REFERENCES ax.notice_target (id) ON DELETE CASCADE,
    event ax.notice_event NOT NULL,
    execution_id uuid,
    detail text NOT NULL DEFAULT '',
    failed_runs integer NOT NULL DEFAULT 0,
    -- How many notices to the same URL the rate limit held back since the
    -- last one that went (told in this one's text).
    coalesced integer NOT NULL DEFAULT 0,
    state ax.notice_state NOT NULL DEFAULT 'pending',
    attempts integer NOT NULL DEFAULT 0,
    last_status integer,
    last_error text,
    next_attempt_at timestamptz,
    enqueued_at timestamptz,
    delivered_at timestamptz,
    failed_at timestamptz,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX notice_job_idx ON ax.notice (job_id, id DESC);
CREATE INDEX notice_unenqueued_idx ON ax.notice (id) WHERE enqueued_at IS NULL AND state = 'pending';

CREATE INDEX notice_by_target_idx ON ax.notice (target_id, created_at);
CREATE INDEX notice_target_url_idx ON ax.notice_target (url);

-- The rate limit per target URL (whatever the job): at most per_minute
-- notices sent in the last minute (sliding). The excess is recorded as
-- rate_limited, not sent, and the next notice that goes counts those held
-- back since the previous one (coalesced). Counted, not locked: a lock
-- per URL taken by the transactions that end runs could deadlock them,
-- so concurrent transactions may each let one more through.
CREATE TABLE ax.notice_setting (
    only_row boolean PRIMARY KEY DEFAULT true CHECK (only_row),
    per_minute integer NOT NULL DEFAULT 10 CHECK (per_minute BETWEEN 1 AND 10000)
);
INSERT INTO ax.notice_setting DEFAULT VALUES;

-- ax.notice_add writes one notice to a target, within its URL's rate.
-- +goose StatementBegin
CREATE FUNCTION ax.notice_add(p_target ax.notice_target, p_event ax.notice_event, p_execution uuid,
                              p_detail text, p_failed_runs integer) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    sent integer;
    last_sent bigint;
    held integer;
BEGIN
    IF NOT (p_event = ANY(p_target.events)) THEN
        RETURN;
    END IF;
    SELECT count(*) INTO sent
    FROM ax.notice_target t JOIN ax.notice n ON n.target_id = t.id
    WHERE t.url = p_target.url AND n.state <> 'rate_limited'
      AND n.created_at > now() - interval '1 minute';
    IF sent >= (SELECT per_minute FROM ax.notice_setting) THEN
        INSERT INTO ax.notice (job_id, target_id, event, execution_id, detail, failed_runs, state)
        VALUES (p_target.job_id, p_target.id, p_event, p_execution, left(p_detail, 1000), p_failed_runs, 'rate_limited');
        RETURN;
    END IF;
    SELECT max(n.id) INTO last_sent
    FROM ax.notice_target t JOIN ax.notice n ON n.target_id = t.id
    WHERE t.url = p_target.url AND n.state <> 'rate_limited';
    SELECT count(*) INTO held
    FROM ax.notice_target t JOIN ax.notice n ON n.target_id = t.id
    WHERE t.url = p_target.url AND n.state = 'rate_limited' AND n.id > coalesce(last_sent, 0);
    INSERT INTO ax.notice (job_id, target_id, event, execution_id, detail, failed_runs, coalesced)
    VALUES (p_target.job_id, p_target.id, p_event, p_execution, left(p_detail, 1000), p_failed_runs, held);
END $$;
-- +goose StatementEnd

-- ax.notice_runs_ended moves the incident of every target of the jobs of
-- runs that just ended: a run failed for good (failed, timed_out) opens an
-- incident (one `failed` notice) or counts in the open one; a success
-- closes an open one (one `recovered` notice). Other ends (cancelled)
-- change nothing. Runs are taken in the order they finished.
-- +goose StatementBegin
CREATE FUNCTION ax.notice_runs_ended(p_ids uuid[], p_jobs uuid[], p_states text[], p_errors text[]) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    run record;
    t ax.notice_target;
BEGIN
    -- Every target of these jobs is locked first, in one order (job, id),
    -- whatever the order the runs ended in: two transactions ending runs
    -- of the same jobs wait for each other instead of deadlocking.
    PERFORM 1 FROM ax.notice_target nt WHERE nt.job_id = ANY(p_jobs) ORDER BY nt.job_id, nt.id FOR UPDATE;
    FOR run IN SELECT u.id, u.job_id, u.state, u.error FROM unnest(p_ids, p_jobs, p_states, p_errors) AS u(id, job_id, state, error)
               WHERE u.state IN ('succeeded', 'failed', 'timed_out')
               ORDER BY u.job_id, u.id
    LOOP
        FOR t IN SELECT * FROM ax.notice_target nt WHERE nt.job_id = run.job_id ORDER BY nt.id
        LOOP
            IF run.state = 'succeeded' THEN
                CONTINUE WHEN NOT t.incident_open;
                UPDATE ax.notice_target SET incident_open = false, incident_since = NULL, updated_at = now() WHERE id = t.id;
                PERFORM ax.notice_add(t, 'recovered', run.id, '', t.failed_runs);
            ELSIF t.incident_open THEN
                UPDATE ax.notice_target SET failed_runs = failed_runs + 1, updated_at = now() WHERE id = t.id;
            ELSE
                UPDATE ax.notice_target SET incident_open = true, incident_since = now(), failed_runs = 1, updated_at = now()
                WHERE id = t.id;
                PERFORM ax.notice_add(t, 'failed', run.id, coalesce(run.error, ''), 1);
            END IF;
        END LOOP;
    END LOOP;
END $$;
-- +goose StatementEnd

-- Runs end two ways: moved to history in the statement that ends them
-- (history_end, and history_move from the execution_ended trigger), or
-- ended in place by an UPDATE and moved later (while a task of theirs is
-- still busy). The first is seen on execution_history; the second by a
-- trigger that runs after execution_ended (names sort) and takes only the
-- runs still in ax.execution.
-- +goose StatementBegin
CREATE FUNCTION ax.notice_history_inserted() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    ids uuid[]; jobs uuid[]; states text[]; errors text[];
BEGIN
    -- The common case, no job with targets, costs one index probe.
    IF NOT EXISTS (SELECT 1 FROM ax.notice_target) THEN
        RETURN NULL;
    END IF;
    SELECT array_agg(n.id), array_agg(n.job_id), array_agg(n.state::text), array_agg(n.error)
    INTO ids, jobs, states, errors
    FROM new_rows n WHERE n.state IN ('succeeded', 'failed', 'timed_out')
      AND EXISTS (SELECT 1 FROM ax.notice_target nt WHERE nt.job_id = n.job_id);
    IF ids IS NOT NULL THEN
        PERFORM ax.notice_runs_ended(ids, jobs, states, errors);
    END IF;
    RETURN NULL;
END $$;
-- +goose StatementEnd
CREATE TRIGGER notice_history_inserted AFTER INSERT ON ax.execution_history
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION ax.notice_history_inserted();

-- +goose StatementBegin
CREATE FUNCTION ax.notice_execution_ended() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    ids uuid[]; jobs uuid[]; states text[]; errors text[];
BEGIN
    -- The common case, no job with targets, costs one index probe.
    IF NOT EXISTS (SELECT 1 FROM ax.notice_target) THEN
        RETURN NULL;
    END IF;
    SELECT array_agg(n.id), array_agg(n.job_id), array_agg(n.state::text), array_agg(n.error)
    INTO ids, jobs, states, errors
    FROM new_rows n JOIN old_rows o ON o.id = n.id
    WHERE o.state IN ('pending', 'running') AND n.state IN ('succeeded', 'failed', 'timed_out')
      AND EXISTS (SELECT 1 FROM ax.notice_target nt WHERE nt.job_id = n.job_id)
      AND EXISTS (SELECT 1 FROM ax.execution e WHERE e.id = n.id);
    IF ids IS NOT NULL THEN
        PERFORM ax.notice_runs_ended(ids, jobs, states, errors);
    END IF;
    RETURN NULL;
END $$;
-- +goose StatementEnd
CREATE TRIGGER notice_execution_ended AFTER UPDATE ON ax.execution
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION ax.notice_execution_ended();

-- A trigger set aside (quarantined) is an incident of its own: one notice
-- when it is set aside; clearing it is the operator's act and sends none.
-- +goose StatementBegin
CREATE FUNCTION ax.notice_trigger_set_aside() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    t ax.notice_target;
BEGIN
    FOR t IN SELECT * FROM ax.notice_target nt WHERE nt.job_id = NEW.job_id ORDER BY nt.id
    LOOP
        PERFORM ax.notice_add(t, 'set_aside', NULL, coalesce(NEW.set_aside_reason, ''), 0);
    END LOOP;
    RETURN NULL;
END $$;
-- +goose StatementEnd
CREATE TRIGGER notice_trigger_set_aside AFTER UPDATE OF set_aside_at ON ax.trigger
    FOR EACH ROW WHEN (OLD.set_aside_at IS NULL AND NEW.set_aside_at IS NOT NULL)
    EXECUTE FUNCTION ax.notice_trigger_set_aside();

-- A callback given up: one notice per callback (its own incident).
-- +goose StatementBegin
CREATE FUNCTION ax.notice_callback_failed() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    t ax.notice_target;
BEGIN
    FOR t IN SELECT * FROM ax.notice_target nt WHERE nt.job_id = NEW.job_id ORDER BY nt.id
    LOOP
        PERFORM ax.notice_add(t, 'callback_failed', NEW.execution_id, coalesce(NEW.last_error, ''), 0);
    END LOOP;
    RETURN NULL;
END $$;
-- +goose StatementEnd
CREATE TRIGGER notice_callback_failed AFTER UPDATE OF state ON ax.callback
    FOR EACH ROW WHEN (OLD.state <> 'callback_failed' AND NEW.state = 'callback_failed')
    EXECUTE FUNCTION ax.notice_callback_failed();

-- +goose Down
DROP TRIGGER notice_callback_failed ON ax.callback;
DROP FUNCTION ax.notice_callback_failed();
DROP TRIGGER notice_trigger_set_aside ON ax.trigger;
DROP FUNCTION ax.notice_trigger_set_aside();
DROP TRIGGER notice_execution_ended ON ax.execution;
DROP FUNCTION ax.notice_execution_ended();
DROP TRIGGER notice_history_inserted ON ax.execution_history;
DROP FUNCTION ax.notice_history_inserted();
DROP FUNCTION ax.notice_runs_ended(uuid[], uuid[], text[], text[]);
DROP FUNCTION ax.notice_add(ax.notice_target, ax.notice_event, uuid, text, integer);
DROP TABLE ax.notice_setting;
DROP TABLE ax.notice;
DROP TABLE ax.notice_target;
DROP TYPE ax.notice_state;
DROP TYPE ax.notice_kind;
DROP TYPE ax.notice_event;
