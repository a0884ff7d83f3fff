-- +goose Up

-- Concurrency per key (issue #41): a job may say that at most
-- concurrency_limit of its tasks with the same rendered key run (are
-- leased) at once, across all agents and replicas. The key is a job
-- template (concurrency_key, e.g. "customer={{.params.customer}}")
-- rendered once when the run's tasks are made and stored on each task,
-- with its scope: the job's concurrency_group when set (jobs of the same
-- group share their keys' limits), else the job itself ('job:<id>').
ALTER TABLE ax.job
    ADD COLUMN concurrency_key text NOT NULL DEFAULT '',
    ADD COLUMN concurrency_limit integer,
    ADD COLUMN concurrency_group text NOT NULL DEFAULT '',
    ADD CONSTRAINT job_concurrency_set CHECK ((concurrency_key = '') = (concurrency_limit IS NULL)
                                             AND (concurrency_key <> '' OR concurrency_group = '')),
    ADD CONSTRAINT job_concurrency_limit_range CHECK (concurrency_limit BETWEEN 1 AND 10000);

ALTER TABLE ax.task
    ADD COLUMN concurrency_scope text,
    ADD COLUMN concurrency_key text,
    ADD COLUMN concurrency_limit integer,
    ADD CONSTRAINT task_concurrency_set CHECK ((concurrency_key IS NULL) = (concurrency_limit IS NULL)
                                              AND (concurrency_key IS NULL) = (concurrency_scope IS NULL)),
    ADD CONSTRAINT task_concurrency_key_length CHECK (octet_length(concurrency_key) <= 256);
ALTER TABLE ax.task_history
    ADD COLUMN concurrency_scope text,
    ADD COLUMN concurrency_key text,
    ADD COLUMN concurrency_limit integer;
-- The move to history copies every column of ax.task (migration 00040).
SELECT ax.history_define_move();

-- What runs per key: read by every lease of a keyed task. Only keyed
-- rows are indexed, so jobs without keys pay nothing for it (state is
-- already in other indexes' predicates: leases stay HOT as before).
CREATE INDEX task_concurrency_running_idx ON ax.task (concurrency_scope, concurrency_key)
    WHERE concurrency_key IS NOT NULL AND state IN ('leased', 'running');
-- The keyed tasks waiting, in lease order: TaskLeasePick reads them apart
-- from the others, so a key at its limit never fills a pick.
CREATE INDEX task_concurrency_pending_idx ON ax.task (priority DESC, created_at)
    WHERE concurrency_key IS NOT NULL AND state = 'pending' AND NOT agentless;

-- The unassigned and routed scans of TaskLeasePick no longer see keyed
-- tasks: without this, a backlog of keys at their limit was walked (and
-- filtered out) by every lease of unkeyed work, and the reverse.
DROP INDEX ax.task_unassigned_idx;
CREATE INDEX task_unassigned_idx ON ax.task (priority DESC, created_at)
    WHERE state = 'pending' AND preferred_agent_id IS NULL AND NOT agentless AND concurrency_key IS NULL;
DROP INDEX ax.task_preferred_idx;
CREATE INDEX task_preferred_idx ON ax.task (preferred_agent_id, priority DESC, created_at)
    WHERE state = 'pending' AND preferred_agent_id IS NOT NULL AND concurrency_key IS NULL;

-- A keyed task that stops running frees a place under its key: waiting
-- long polls (ax_task_ready) look again, as they would not on their own
-- (TaskNextLeasable leaves out tasks whose key is at its limit). Only
-- keyed rows fire it (the WHEN clause, checked without a call).
-- +goose StatementBegin
CREATE FUNCTION ax.concurrency_key_freed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('ax_task_ready', '');
    RETURN NULL;
END;
$$;
-- +goose StatementEnd
CREATE TRIGGER task_concurrency_key_freed AFTER UPDATE OF state ON ax.task
    FOR EACH ROW
    WHEN (OLD.concurrency_key IS NOT NULL AND OLD.state IN ('leased', 'running')
          AND NEW.state NOT IN ('leased', 'running'))
    EXECUTE FUNCTION ax.concurrency_key_freed();
CREATE TRIGGER task_concurrency_key_moved AFTER DELETE ON ax.task
    FOR EACH ROW
    WHEN (OLD.concurrency_key IS NOT NULL AND OLD.state IN ('leased', 'running'))
    EXECUTE FUNCTION ax.concurrency_key_freed();

-- ax.tasks_without_agent also names the tasks that wait for their key:
-- an agent could take them, but the key is at its limit.
CREATE OR REPLACE VIEW ax.tasks_without_agent AS
SELECT t.id AS task_id, t.execution_id, j.name AS job, j.group_name, j.executor_kind, j.target_labels,
       t.not_before,
       CASE WHEN NOT EXISTS (SELECT 1 FROM ax.agent a
                             WHERE a.state IN ('active', 'quarantined') AND j.target_labels <@ a.labels
                               AND (NOT a.label_bound OR j.target_labels <> '{}'))
            THEN 'no live agent has the labels ' || j.target_labels::text
            ELSE 'no live agent with the labels ' || j.target_labels::text || ' accepts executor '
                 || j.executor_kind::text || ' (agents list theirs in AX_EXECUTORS)'
       END AS reason
FROM ax.task t
JOIN ax.job j ON j.id = t.job_id
WHERE t.state = 'pending' AND NOT t.agentless
  AND NOT EXISTS (SELECT 1 FROM ax.agent a
                  WHERE a.state IN ('active', 'quarantined') AND j.target_labels <@ a.labels
                    AND (NOT a.label_bound OR j.target_labels <> '{}')
                    AND j.executor_kind::text = ANY (a.executors))
UNION ALL
SELECT t.id, t.execution_id, j.name, j.group_name, j.executor_kind, j.target_labels, t.not_before,
       'concurrency key ' || t.concurrency_key
       || CASE WHEN t.concurrency_scope LIKE 'group:%' THEN ' of group ' || substr(t.concurrency_scope, 7) ELSE '' END
       || ' at limit ' || t.concurrency_limit
FROM ax.task t
JOIN ax.job j ON j.id = t.job_id
WHERE t.concurrency_key IS NOT NULL AND t.state = 'pending' AND NOT t.agentless
  AND (SELECT count(*) FROM ax.task r
       WHERE r.concurrency_scope = t.concurrency_scope AND r.concurrency_key = t.concurrency_key
         AND r.concurrency_key IS NOT NULL AND r.state IN ('leased', 'running')) >= t.concurrency_limit
  AND EXISTS (SELECT 1 FROM ax.agent a
              WHERE a.state IN ('active', 'quarantined') AND j.target_labels <@ a.labels
                AND (NOT a.label_bound OR j.target_labels <> '{}')
                AND j.executor_kind::text = ANY (a.executors));

-- +goose Down
CREATE OR REPLACE VIEW ax.tasks_without_agent AS
SELECT t.id AS task_id, t.execution_id, j.name AS job, j.group_name, j.executor_kind, j.target_labels,
       t.not_before,
       CASE WHEN NOT EXISTS (SELECT 1 FROM ax.agent a
                             WHERE a.state IN ('active', 'quarantined') AND j.target_labels <@ a.labels
                               AND (NOT a.label_bound OR j.target_labels <> '{}'))
            THEN 'no live agent has the labels ' || j.target_labels::text
            ELSE 'no live agent with the labels ' || j.target_labels::text || ' accepts executor '
                 || j.executor_kind::text || ' (agents list theirs in AX_EXECUTORS)'
       END AS reason
FROM ax.task t
JOIN ax.job j ON j.id = t.job_id
WHERE t.state = 'pending' AND NOT t.agentless
  AND NOT EXISTS (SELECT 1 FROM ax.agent a
                  WHERE a.state IN ('active', 'quarantined') AND j.target_labels <@ a.labels
                    AND (NOT a.label_bound OR j.target_labels <> '{}')
                    AND j.executor_kind::text = ANY (a.executors));
DROP TRIGGER task_concurrency_key_moved ON ax.task;
DROP TRIGGER task_concurrency_key_freed ON ax.task;
DROP FUNCTION ax.concurrency_key_freed();
DROP INDEX ax.task_preferred_idx;
CREATE INDEX task_preferred_idx ON ax.task (preferred_agent_id, priority DESC, created_at)
    WHERE state = 'pending' AND preferred_agent_id IS NOT NULL;
DROP INDEX ax.task_unassigned_idx;
CREATE INDEX task_unassigned_idx ON ax.task (priority DESC, created_at)
    WHERE state = 'pending' AND preferred_agent_id IS NULL AND NOT agentless;
DROP INDEX ax.task_concurrency_pending_idx;
DROP INDEX ax.task_concurrency_running_idx;
ALTER TABLE ax.task_history
    DROP COLUMN concurrency_limit,
    DROP COLUMN concurrency_key,
    DROP COLUMN concurrency_scope;
ALTER TABLE ax.task
    DROP COLUMN concurrency_limit,
    DROP COLUMN concurrency_key,
    DROP COLUMN concurrency_scope;
SELECT ax.history_define_move();
ALTER TABLE ax.job
    DROP CONSTRAINT job_concurrency_limit_range,
    DROP CONSTRAINT job_concurrency_set,
    DROP COLUMN concurrency_group,
    DROP COLUMN concurrency_key,
    DROP COLUMN concurrency_limit;
