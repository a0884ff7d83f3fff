-- +goose Up

-- Concurrency policy queue (issue #41 item 5): a fire that comes while the
-- job's previous run is unfinished waits and starts when that run ends; at
-- most one waits, later fires are skipped as overlap_queue_full. The new
-- enum values are only named inside function bodies here (checked when
-- they run), never used by this transaction, which Postgres forbids.
ALTER TYPE ax.concurrency_policy ADD VALUE IF NOT EXISTS 'queue';
ALTER TYPE ax.skip_reason ADD VALUE IF NOT EXISTS 'overlap_queue_full';

-- A waiting run is an execution made at fire time (its tick's
-- UNIQUE (job_id, scheduled_for) holds) whose tasks are held: not_before
-- is the hold instant below. This row says it waits and behind which run;
-- it stays after the release (released_at) so "why late?" can answer.
CREATE TABLE ax.queued_run (
    execution_id uuid PRIMARY KEY,
    job_id       uuid NOT NULL REFERENCES ax.job (id) ON DELETE CASCADE,
    behind_id    uuid,
    queued_at    timestamptz NOT NULL DEFAULT now(),
    released_at  timestamptz
);

-- At most one run of a job waits, whatever replicas race.
CREATE UNIQUE INDEX queued_run_one_waiting ON ax.queued_run (job_id) WHERE released_at IS NULL;
CREATE INDEX queued_run_released ON ax.queued_run (released_at) WHERE released_at IS NOT NULL;

-- queued_run_release releases the waiting runs of p_job_ids whose job has
-- no other unfinished run: their held tasks become leasable now (or at
-- their tick, when the run they waited behind ended before it). A waiting
-- run that ended itself (cancelled while waiting) frees its place too.
-- It returns how many it released.
-- +goose StatementBegin
CREATE FUNCTION ax.queued_run_release(p_job_ids uuid[]) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    n integer;
BEGIN
    WITH r AS (
        UPDATE ax.queued_run q SET released_at = now()
        WHERE q.job_id = ANY(p_job_ids) AND q.released_at IS NULL
          AND (NOT EXISTS (SELECT 1 FROM ax.execution e
                           WHERE e.job_id = q.job_id AND e.id <> q.execution_id AND e.finished_at IS NULL)
               OR NOT EXISTS (SELECT 1 FROM ax.execution e
                              WHERE e.id = q.execution_id AND e.finished_at IS NULL))
        RETURNING q.execution_id
    ), t AS (
        UPDATE ax.task t SET not_before = greatest(now(), e.scheduled_for), updated_at = now()
        FROM r JOIN ax.execution e ON e.id = r.execution_id
        WHERE t.execution_id = r.execution_id AND t.state = 'pending'
        RETURNING t.id
    )
    SELECT count(*) INTO n FROM t;
    IF n > 0 THEN
        PERFORM pg_notify('ax_task_ready', '');
    END IF;
    RETURN n;
END $$;
-- +goose StatementEnd

-- The release happens in the transaction that ends the run waited behind,
-- whatever code path ends it (an UPDATE of its state, or its move to
-- history, a DELETE). It costs one probe of a tiny partial index while
-- no run waits anywhere.
-- +goose StatementBegin
CREATE FUNCTION ax.queued_run_after_end() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    jobs uuid[];
BEGIN
    IF NOT EXISTS (SELECT 1 FROM ax.queued_run WHERE released_at IS NULL) THEN
        RETURN NULL;
    END IF;
    IF TG_OP = 'DELETE' THEN
        jobs := ARRAY(SELECT DISTINCT o.job_id FROM old_rows o);
    ELSE
        jobs := ARRAY(SELECT DISTINCT n.job_id FROM new_rows n WHERE n.finished_at IS NOT NULL);
    END IF;
    IF cardinality(jobs) > 0 THEN
        PERFORM ax.queued_run_release(jobs);
    END IF;
    RETURN NULL;
END $$;
-- +goose StatementEnd

CREATE TRIGGER queued_run_after_update AFTER UPDATE ON ax.execution
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION ax.queued_run_after_end();
CREATE TRIGGER queued_run_after_delete AFTER DELETE ON ax.execution
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION ax.queued_run_after_end();

-- +goose Down

DROP TRIGGER queued_run_after_delete ON ax.execution;
DROP TRIGGER queued_run_after_update ON ax.execution;
DROP FUNCTION ax.queued_run_after_end();
DROP FUNCTION ax.queued_run_release(uuid[]);
DROP TABLE ax.queued_run;
-- An enum value cannot be dropped: jobs set to queue and skips recorded
-- as overlap_queue_full stay readable.
