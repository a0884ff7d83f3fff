-- +goose Up

-- Keys take turns (issue #41: "fair between keys, no key starves
-- another"). Ready keyed tasks were leased oldest first, so a task that
-- waited parked behind its key's limit kept its age: once unparked, the
-- next of a key made before every other key's tasks went first again,
-- and a key with a long backlog held its places until the backlog ran
-- out (TestConcurrencyKeyLimitAndTurns: acme's 10 runs all finished
-- before carol's first). Now a task is ready from the moment its key has
-- room for it: unparking sets not_before (the time a task may be leased
-- from, which pickup latency counts from) to then, and ready
-- keyed tasks are leased in not_before order. A key whose place frees
-- goes behind the keys already waiting, as in a round robin.
--
-- at: the caller's clock (a test's settable one), as the lease's now.
DROP INDEX ax.task_concurrency_pending_idx;
CREATE INDEX task_concurrency_pending_idx ON ax.task (priority DESC, not_before)
    WHERE concurrency_key IS NOT NULL AND state = 'pending' AND NOT agentless AND NOT key_parked;

DROP FUNCTION ax.concurrency_unpark(integer, integer);
-- +goose StatementBegin
CREATE FUNCTION ax.concurrency_unpark(lock_class integer, max_keys integer, at timestamptz) RETURNS integer
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
    UPDATE ax.task t SET key_parked = false, not_before = greatest(t.not_before, coalesce(at, now()))
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

-- +goose Down
DROP FUNCTION ax.concurrency_unpark(integer, integer, timestamptz);
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
DROP INDEX ax.task_concurrency_pending_idx;
CREATE INDEX task_concurrency_pending_idx ON ax.task (priority DESC, created_at)
    WHERE concurrency_key IS NOT NULL AND state = 'pending' AND NOT agentless AND NOT key_parked;
