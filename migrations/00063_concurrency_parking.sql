-- +goose Up

-- Tasks waiting behind their key's limit are parked (issue #41): out of
-- the index the lease reads, so a lease no longer walks past them. A
-- lease of 1,000 keys of limit 1 with 9,000 tasks behind their limits
-- read every one of those 9,000 at the end of a drain (a probe of the
-- key's running tasks each: 38 ms a pick), 2.4x an unkeyed lease.
--
-- The rule: a key's unparked pending tasks ("ready") and its leased and
-- running ones together are at most its limit. A keyed task is parked as
-- it is written when that would be exceeded (ax.concurrency_park); a
-- place that frees (a leased or running task ends, a ready one is
-- cancelled) writes the key to ax.concurrency_key_freed, and the next
-- lease unparks the key's first waiting tasks under the key's lock
-- (ax.concurrency_unpark). Leasing, retrying and handing back a task
-- change nothing: it keeps its place. A task waiting to retry keeps its
-- key's place, so the key's next run starts after it, not around it.
ALTER TABLE ax.task ADD COLUMN key_parked boolean NOT NULL DEFAULT false;
ALTER TABLE ax.task_history ADD COLUMN key_parked boolean NOT NULL DEFAULT false;
SELECT ax.history_define_move();
-- ax.all_tasks lists both tables' columns by name (migration 00062).
DROP VIEW ax.all_tasks;
CREATE VIEW ax.all_tasks AS
    SELECT id, execution_id, job_id, shard_index, shard_total, shard_param, state, priority, attempt,
           max_attempts, timeout_seconds, not_before, started_at, finished_at, cancel_requested_at,
           result, error, created_at, updated_at, agent_id, lease_token, lease_expires_at,
           leased_at, preferred_agent_id, fallback_agent_id, pinned, route_key, rate_class,
           agentless, log_bytes, lost_leases, error_code, concurrency_scope, concurrency_key,
           concurrency_limit, key_parked, NULL::timestamptz AS retain_until
    FROM ax.task
    UNION ALL
    SELECT id, execution_id, job_id, shard_index, shard_total, shard_param, state, priority, attempt,
           max_attempts, timeout_seconds, not_before, started_at, finished_at, cancel_requested_at,
           result, error, created_at, updated_at, agent_id, lease_token, lease_expires_at,
           leased_at, preferred_agent_id, fallback_agent_id, pinned, route_key, rate_class,
           agentless, log_bytes, lost_leases, error_code, concurrency_scope, concurrency_key,
           concurrency_limit, key_parked, retain_until
    FROM ax.task_history;

DROP INDEX ax.task_concurrency_pending_idx;
CREATE INDEX task_concurrency_pending_idx ON ax.task (priority DESC, created_at)
    WHERE concurrency_key IS NOT NULL AND state = 'pending' AND NOT agentless AND NOT key_parked;
-- A key's parked tasks in the order they are unparked.
CREATE INDEX task_concurrency_parked_idx ON ax.task (concurrency_scope, concurrency_key, priority DESC, created_at)
    WHERE key_parked AND state = 'pending';
-- A key's ready tasks (its leased and running ones have their index).
CREATE INDEX task_concurrency_ready_idx ON ax.task (concurrency_scope, concurrency_key)
    WHERE concurrency_key IS NOT NULL AND state = 'pending' AND NOT agentless AND NOT key_parked;

-- Keys that may have room for a parked task; consumed (deleted) by the
-- lease that unparks. Rows, not only a NOTIFY (ax_key_freed tells the
-- replicas that there are some): nothing committed is lost.
CREATE TABLE ax.concurrency_key_freed (
    id                bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    concurrency_scope text NOT NULL,
    concurrency_key   text NOT NULL
);

-- ax.concurrency_places counts what holds the places of a key, up to
-- lim: its leased and running tasks and its ready ones.
-- +goose StatementBegin
CREATE FUNCTION ax.concurrency_places(scope text, key text, lim integer) RETURNS integer
LANGUAGE sql STABLE AS $$
    SELECT (SELECT count(*) FROM (SELECT 1 FROM ax.task k
                                  WHERE k.concurrency_scope = scope AND k.concurrency_key = key
                                    AND k.concurrency_key IS NOT NULL AND k.state IN ('leased', 'running')
                                  LIMIT lim) r)::integer
         + (SELECT count(*) FROM (SELECT 1 FROM ax.task k
                                  WHERE k.concurrency_scope = scope AND k.concurrency_key = key
                                    AND k.concurrency_key IS NOT NULL AND k.state = 'pending'
                                    AND NOT k.agentless AND NOT k.key_parked
                                  LIMIT lim) p)::integer;
$$;
-- +goose StatementEnd

-- ax.concurrency_unpark unparks the first waiting tasks of the keys freed
-- (up to max_keys of the oldest records), as many as each key has places
-- free, wakes waiting long polls when it unparked any, and returns how
-- many records it consumed (max_keys: there may be more). The keys are
-- looked at under their advisory locks (lock_class, as the lease's),
-- taken in hash order in one pass: two calls for one key do not both
-- count its free place, and a lease never waits on it crosswise. Run in
-- a transaction of its own (the lease's locks come in a second pass, and
-- two passes in one transaction could wait on another's crosswise).
-- Set-based: a statement a step, whatever the number of keys (a loop
-- over 1,000 keys cost 3 ms a lease).
-- +goose StatementBegin
CREATE FUNCTION ax.concurrency_unpark(lock_class integer, max_keys integer) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    scopes   text[];
    keys     text[];
    consumed integer;
    n        integer;
BEGIN
    WITH taken AS (
        DELETE FROM ax.concurrency_key_freed
        WHERE id IN (SELECT f.id FROM ax.concurrency_key_freed f ORDER BY f.id LIMIT max_keys FOR UPDATE SKIP LOCKED)
        RETURNING concurrency_scope, concurrency_key
    )
    SELECT array_agg(k.concurrency_scope), sum(k.n), array_agg(k.concurrency_key) INTO scopes, consumed, keys
    FROM (SELECT concurrency_scope, concurrency_key, count(*) AS n FROM taken
          GROUP BY concurrency_scope, concurrency_key) k;
    IF scopes IS NULL THEN
        RETURN 0;
    END IF;
    PERFORM count(pg_advisory_xact_lock(lock_class, x.h))
    FROM (SELECT DISTINCT hashtext(u.scope || chr(31) || u.key) AS h
          FROM unnest(scopes, keys) u(scope, key) ORDER BY h) x;
    -- After the locks, so from a snapshot that has every lease and park
    -- of these keys that committed before: each key's room counted once.
    -- The head's limit is what the key's waiting tasks wait on (jobs of
    -- one group may differ).
    UPDATE ax.task t SET key_parked = false
    FROM (SELECT p.id
          FROM unnest(scopes, keys) u(scope, key)
          CROSS JOIN LATERAL (
              SELECT h.concurrency_limit AS lim FROM ax.task h
              WHERE h.concurrency_scope = u.scope AND h.concurrency_key = u.key AND h.key_parked AND h.state = 'pending'
              ORDER BY h.priority DESC, h.created_at
              LIMIT 1) head
          CROSS JOIN LATERAL (
              SELECT p.id FROM ax.task p
              WHERE p.concurrency_scope = u.scope AND p.concurrency_key = u.key AND p.key_parked AND p.state = 'pending'
              ORDER BY p.priority DESC, p.created_at
              LIMIT greatest(0, head.lim - ax.concurrency_places(u.scope, u.key, head.lim))
              FOR UPDATE SKIP LOCKED) p) x
    WHERE t.id = x.id;
    GET DIAGNOSTICS n = ROW_COUNT;
    IF n > 0 THEN
        PERFORM pg_notify('ax_task_ready', '');
    END IF;
    RETURN consumed;
END;
$$;
-- +goose StatementEnd

-- A keyed task written pending is parked when its key's places are
-- taken (rows written before it by the same statement count: a row
-- trigger sees them). The key is then also recorded as freed when a
-- place is held by another transaction's task: that task may end while
-- this transaction runs, and its record be consumed without seeing this
-- task (a freed place records its key whatever it sees parked, see
-- ax.concurrency_key_freed), so the key is looked at again once this
-- commits. Places held only by this transaction's own tasks (created_at
-- is the transaction's start) cannot free meanwhile, and a key recorded
-- for an earlier task of this transaction is not recorded again: a fire
-- of fresh keys records nothing.
-- +goose StatementBegin
CREATE FUNCTION ax.concurrency_park() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF ax.concurrency_places(NEW.concurrency_scope, NEW.concurrency_key, NEW.concurrency_limit)
       >= NEW.concurrency_limit THEN
        IF NOT EXISTS (SELECT 1 FROM ax.task k
                       WHERE k.concurrency_scope = NEW.concurrency_scope AND k.concurrency_key = NEW.concurrency_key
                         AND k.key_parked AND k.state = 'pending' AND k.created_at = now())
           AND (EXISTS (SELECT 1 FROM ax.task k
                        WHERE k.concurrency_scope = NEW.concurrency_scope AND k.concurrency_key = NEW.concurrency_key
                          AND k.concurrency_key IS NOT NULL AND k.state IN ('leased', 'running'))
                OR EXISTS (SELECT 1 FROM ax.task k
                           WHERE k.concurrency_scope = NEW.concurrency_scope AND k.concurrency_key = NEW.concurrency_key
                             AND k.concurrency_key IS NOT NULL AND k.state = 'pending' AND NOT k.agentless
                             AND NOT k.key_parked AND k.created_at <> now())) THEN
            INSERT INTO ax.concurrency_key_freed (concurrency_scope, concurrency_key)
            VALUES (NEW.concurrency_scope, NEW.concurrency_key);
            PERFORM pg_notify('ax_key_freed', '');
        END IF;
        NEW.key_parked := true;
    END IF;
    RETURN NEW;
END;
$$;
-- +goose StatementEnd
CREATE TRIGGER task_concurrency_park BEFORE INSERT ON ax.task
    FOR EACH ROW
    WHEN (NEW.concurrency_key IS NOT NULL AND NEW.state = 'pending' AND NOT NEW.agentless)
    EXECUTE FUNCTION ax.concurrency_park();

-- A place that frees: waiting long polls look again (as before), and the
-- key is recorded for the next lease to unpark its waiting tasks.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION ax.concurrency_key_freed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- A retry or a hand-back keeps its place: nothing freed. Recorded
    -- whether or not the key has tasks parked: one parked by a
    -- transaction still running is not seen here, and would wait until
    -- another of the key's places freed.
    -- ax_key_freed before ax_task_ready: a replica learns that a lease
    -- must unpark before its waiting polls wake to lease.
    IF TG_OP = 'DELETE' OR NEW.state <> 'pending' THEN
        INSERT INTO ax.concurrency_key_freed (concurrency_scope, concurrency_key)
        VALUES (OLD.concurrency_scope, OLD.concurrency_key);
        PERFORM pg_notify('ax_key_freed', '');
    END IF;
    PERFORM pg_notify('ax_task_ready', '');
    RETURN NULL;
END;
$$;
-- +goose StatementEnd
DROP TRIGGER task_concurrency_key_freed ON ax.task;
CREATE TRIGGER task_concurrency_key_freed AFTER UPDATE OF state ON ax.task
    FOR EACH ROW
    WHEN (OLD.concurrency_key IS NOT NULL
          AND ((OLD.state IN ('leased', 'running') AND NEW.state NOT IN ('leased', 'running'))
               OR (OLD.state = 'pending' AND NOT OLD.key_parked AND NOT OLD.agentless
                   AND NEW.state NOT IN ('pending', 'leased', 'running'))))
    EXECUTE FUNCTION ax.concurrency_key_freed();
DROP TRIGGER task_concurrency_key_moved ON ax.task;
CREATE TRIGGER task_concurrency_key_moved AFTER DELETE ON ax.task
    FOR EACH ROW
    WHEN (OLD.concurrency_key IS NOT NULL
          AND (OLD.state IN ('leased', 'running') OR (OLD.state = 'pending' AND NOT OLD.key_parked AND NOT OLD.agentless)))
    EXECUTE FUNCTION ax.concurrency_key_freed();

-- Keyed tasks written before this migration: those over their key's
-- places are parked, in lease order, and every key is looked at once.
UPDATE ax.task t SET key_parked = true
FROM (SELECT p.id,
             row_number() OVER (PARTITION BY p.concurrency_scope, p.concurrency_key ORDER BY p.priority DESC, p.created_at)
             + (SELECT count(*) FROM ax.task r
                WHERE r.concurrency_scope = p.concurrency_scope AND r.concurrency_key = p.concurrency_key
                  AND r.concurrency_key IS NOT NULL AND r.state IN ('leased', 'running')) AS place,
             p.concurrency_limit
      FROM ax.task p
      WHERE p.concurrency_key IS NOT NULL AND p.state = 'pending' AND NOT p.agentless) x
WHERE t.id = x.id AND x.place > x.concurrency_limit;
INSERT INTO ax.concurrency_key_freed (concurrency_scope, concurrency_key)
SELECT DISTINCT concurrency_scope, concurrency_key FROM ax.task WHERE key_parked;

-- ax.tasks_without_agent names parked tasks as waiting for their key.
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
  AND (t.key_parked
       OR (SELECT count(*) FROM ax.task r
           WHERE r.concurrency_scope = t.concurrency_scope AND r.concurrency_key = t.concurrency_key
             AND r.concurrency_key IS NOT NULL AND r.state IN ('leased', 'running')) >= t.concurrency_limit)
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
DROP TRIGGER task_concurrency_key_moved ON ax.task;
CREATE TRIGGER task_concurrency_key_moved AFTER DELETE ON ax.task
    FOR EACH ROW
    WHEN (OLD.concurrency_key IS NOT NULL AND OLD.state IN ('leased', 'running'))
    EXECUTE FUNCTION ax.concurrency_key_freed();
DROP TRIGGER task_concurrency_key_freed ON ax.task;
CREATE TRIGGER task_concurrency_key_freed AFTER UPDATE OF state ON ax.task
    FOR EACH ROW
    WHEN (OLD.concurrency_key IS NOT NULL AND OLD.state IN ('leased', 'running')
          AND NEW.state NOT IN ('leased', 'running'))
    EXECUTE FUNCTION ax.concurrency_key_freed();
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION ax.concurrency_key_freed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('ax_task_ready', '');
    RETURN NULL;
END;
$$;
-- +goose StatementEnd
DROP TRIGGER task_concurrency_park ON ax.task;
DROP FUNCTION ax.concurrency_park();
DROP FUNCTION ax.concurrency_unpark(integer, integer);
DROP FUNCTION ax.concurrency_places(text, text, integer);
DROP TABLE ax.concurrency_key_freed;
DROP INDEX ax.task_concurrency_ready_idx;
DROP INDEX ax.task_concurrency_parked_idx;
DROP INDEX ax.task_concurrency_pending_idx;
CREATE INDEX task_concurrency_pending_idx ON ax.task (priority DESC, created_at)
    WHERE concurrency_key IS NOT NULL AND state = 'pending' AND NOT agentless;
DROP VIEW ax.all_tasks;
CREATE VIEW ax.all_tasks AS
    SELECT id, execution_id, job_id, shard_index, shard_total, shard_param, state, priority, attempt,
           max_attempts, timeout_seconds, not_before, started_at, finished_at, cancel_requested_at,
           result, error, created_at, updated_at, agent_id, lease_token, lease_expires_at,
           leased_at, preferred_agent_id, fallback_agent_id, pinned, route_key, rate_class,
           agentless, log_bytes, lost_leases, error_code, concurrency_scope, concurrency_key,
           concurrency_limit, NULL::timestamptz AS retain_until
    FROM ax.task
    UNION ALL
    SELECT id, execution_id, job_id, shard_index, shard_total, shard_param, state, priority, attempt,
           max_attempts, timeout_seconds, not_before, started_at, finished_at, cancel_requested_at,
           result, error, created_at, updated_at, agent_id, lease_token, lease_expires_at,
           leased_at, preferred_agent_id, fallback_agent_id, pinned, route_key, rate_class,
           agentless, log_bytes, lost_leases, error_code, concurrency_scope, concurrency_key,
           concurrency_limit, retain_until
    FROM ax.task_history;
ALTER TABLE ax.task_history DROP COLUMN key_parked;
ALTER TABLE ax.task DROP COLUMN key_parked;
SELECT ax.history_define_move();
