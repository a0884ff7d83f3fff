--
-- PostgreSQL database dump
--

--
-- Name: ax; Type: SCHEMA; Schema: -; Owner: -
--

CREATE SCHEMA ax;

--
-- Name: agent_state; Type: TYPE; Schema: ax; Owner: -
--

CREATE TYPE ax.agent_state AS ENUM (
    'active',
    'draining',
    'offline',
    'quarantined'
);

--
-- Name: api_scope; Type: TYPE; Schema: ax; Owner: -
--

CREATE TYPE ax.api_scope AS ENUM (
    'admin',
    'submit',
    'read',
    'agent'
);

--
-- Name: breaker_state; Type: TYPE; Schema: ax; Owner: -
--

CREATE TYPE ax.breaker_state AS ENUM (
    'closed',
    'open',
    'half_open'
);

--
-- Name: callback_state; Type: TYPE; Schema: ax; Owner: -
--

CREATE TYPE ax.callback_state AS ENUM (
    'pending',
    'delivered',
    'callback_failed'
);

--
-- Name: concurrency_policy; Type: TYPE; Schema: ax; Owner: -
--

CREATE TYPE ax.concurrency_policy AS ENUM (
    'allow',
    'forbid',
    'replace',
    'queue'
);

--
-- Name: degrade_action; Type: TYPE; Schema: ax; Owner: -
--

CREATE TYPE ax.degrade_action AS ENUM (
    'wait',
    'skip'
);

--
-- Name: execution_cause; Type: TYPE; Schema: ax; Owner: -
--

CREATE TYPE ax.execution_cause AS ENUM (
    'schedule',
    'catch_up',
    'manual',
    'delayed',
    'rerun',
    'backfill',
    'after'
);

--
-- Name: execution_state; Type: TYPE; Schema: ax; Owner: -
--

CREATE TYPE ax.execution_state AS ENUM (
    'pending',
    'running',
    'succeeded',
    'failed',
    'timed_out',
    'cancelled'
);

--
-- Name: executor_kind; Type: TYPE; Schema: ax; Owner: -
--

CREATE TYPE ax.executor_kind AS ENUM (
    'shell',
    'http',
    'handler'
);

--
-- Name: misfire_policy; Type: TYPE; Schema: ax; Owner: -
--

CREATE TYPE ax.misfire_policy AS ENUM (
    'fire_once',
    'skip',
    'fire_all'
);

--
-- Name: notice_event; Type: TYPE; Schema: ax; Owner: -
--

CREATE TYPE ax.notice_event AS ENUM (
    'failed',
    'recovered',
    'set_aside',
    'callback_failed'
);

--
-- Name: notice_kind; Type: TYPE; Schema: ax; Owner: -
--

CREATE TYPE ax.notice_kind AS ENUM (
    'slack',
    'webhook'
);

--
-- Name: notice_state; Type: TYPE; Schema: ax; Owner: -
--

CREATE TYPE ax.notice_state AS ENUM (
    'pending',
    'delivered',
    'notice_failed',
    'rate_limited'
);

--
-- Name: river_job_state; Type: TYPE; Schema: ax; Owner: -
--

CREATE TYPE ax.river_job_state AS ENUM (
    'available',
    'cancelled',
    'completed',
    'discarded',
    'pending',
    'retryable',
    'running',
    'scheduled'
);

--
-- Name: route_strategy; Type: TYPE; Schema: ax; Owner: -
--

CREATE TYPE ax.route_strategy AS ENUM (
    'round_robin',
    'random',
    'weighted',
    'least_active',
    'consistent_hash',
    'load_aware',
    'broadcast',
    'failover'
);

--
-- Name: skip_reason; Type: TYPE; Schema: ax; Owner: -
--

CREATE TYPE ax.skip_reason AS ENUM (
    'misfire',
    'overlap',
    'paused',
    'dst_gap',
    'calendar',
    'overlap_queue_full',
    'upstream_failed',
    'cascade_bound'
);

--
-- Name: task_event_kind; Type: TYPE; Schema: ax; Owner: -
--

CREATE TYPE ax.task_event_kind AS ENUM (
    'state',
    'log'
);

--
-- Name: task_state; Type: TYPE; Schema: ax; Owner: -
--

CREATE TYPE ax.task_state AS ENUM (
    'pending',
    'leased',
    'running',
    'succeeded',
    'failed',
    'timed_out',
    'cancelled'
);

--
-- Name: timeout_mode; Type: TYPE; Schema: ax; Owner: -
--

CREATE TYPE ax.timeout_mode AS ENUM (
    'fixed',
    'adaptive'
);

--
-- Name: trigger_kind; Type: TYPE; Schema: ax; Owner: -
--

CREATE TYPE ax.trigger_kind AS ENUM (
    'cron',
    'interval',
    'delay',
    'manual',
    'after'
);

--
-- Name: after_upstream_ended(); Type: FUNCTION; Schema: ax; Owner: -
--

CREATE FUNCTION ax.after_upstream_ended() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
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

--
-- Name: agent_leases(uuid, timestamp with time zone, integer); Type: FUNCTION; Schema: ax; Owner: -
--

CREATE FUNCTION ax.agent_leases(p_agent uuid, p_since timestamp with time zone, p_limit integer) RETURNS TABLE(at timestamp with time zone, routed boolean)
    LANGUAGE plpgsql STABLE
    AS $$
BEGIN
    RETURN QUERY
    SELECT o.at, o.routed
    FROM ((SELECT e.at, e.message IN ('routed here', 'unassigned') AS routed
           FROM ax.task_event e
           WHERE e.agent_id = p_agent AND e.kind = 'state' AND e.state = 'leased' AND e.at > p_since
           ORDER BY e.at DESC
           LIMIT p_limit)
          UNION ALL
          (SELECT t.leased_at, t.preferred_agent_id IS NULL OR t.preferred_agent_id = t.agent_id
           FROM ax.task_history t
           WHERE t.agent_id = p_agent AND t.lease_event_id IS NOT NULL AND t.finished_at > p_since
             AND t.leased_at > p_since
           ORDER BY t.finished_at DESC
           LIMIT p_limit)
          UNION ALL
          (SELECT t.leased_at, t.preferred_agent_id IS NULL OR t.preferred_agent_id = t.agent_id
           FROM ax.task t
           WHERE t.agent_id = p_agent AND t.lease_event_id IS NOT NULL AND t.finished_at IS NOT NULL
             AND t.finished_at > p_since AND t.leased_at > p_since
           ORDER BY t.finished_at DESC
           LIMIT p_limit)
          UNION ALL
          (SELECT t.leased_at, t.preferred_agent_id IS NULL OR t.preferred_agent_id = t.agent_id
           FROM ax.task t
           WHERE t.agent_id = p_agent AND t.state IN ('leased', 'running') AND t.lease_event_id IS NOT NULL
             AND t.leased_at > p_since
           ORDER BY t.leased_at DESC
           LIMIT p_limit)) o
    ORDER BY o.at DESC
    LIMIT p_limit;
END $$;

--
-- Name: agent_offline_revokes_token(); Type: FUNCTION; Schema: ax; Owner: -
--

CREATE FUNCTION ax.agent_offline_revokes_token() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    UPDATE ax.api_key SET revoked_at = now()
    WHERE id = NEW.api_key_id AND minted_by IS NOT NULL AND revoked_at IS NULL;
    RETURN NULL;
END $$;

--
-- Name: agent_outcomes(uuid, timestamp with time zone, ax.task_state[], integer); Type: FUNCTION; Schema: ax; Owner: -
--

CREATE FUNCTION ax.agent_outcomes(p_agent uuid, p_since timestamp with time zone, p_states ax.task_state[], p_limit integer) RETURNS TABLE(at timestamp with time zone, state ax.task_state, error_code text, duration_ms bigint)
    LANGUAGE plpgsql STABLE
    AS $$
BEGIN
    RETURN QUERY
    SELECT o.at, o.state, o.error_code, o.duration_ms
    FROM ((SELECT e.at, e.state, e.error_code, e.duration_ms
           FROM ax.task_event e
           WHERE e.agent_id = p_agent AND e.kind = 'state' AND e.state = ANY(p_states) AND e.at > p_since
           ORDER BY e.at DESC
           LIMIT p_limit)
          UNION ALL
          (SELECT t.finished_at, 'succeeded'::ax.task_state, t.error_code,
                  (extract(epoch FROM t.finished_at - t.leased_at) * 1000)::bigint
           FROM ax.task_history t
           WHERE 'succeeded' = ANY(p_states) AND t.agent_id = p_agent AND t.lease_event_id IS NOT NULL
             AND t.end_event_id IS NOT NULL AND t.finished_at > p_since
           ORDER BY t.finished_at DESC
           LIMIT p_limit)
          UNION ALL
          (SELECT t.finished_at, 'succeeded'::ax.task_state, t.error_code,
                  (extract(epoch FROM t.finished_at - t.leased_at) * 1000)::bigint
           FROM ax.task t
           WHERE 'succeeded' = ANY(p_states) AND t.agent_id = p_agent AND t.lease_event_id IS NOT NULL
             AND t.finished_at IS NOT NULL AND t.end_event_id IS NOT NULL AND t.finished_at > p_since
           ORDER BY t.finished_at DESC
           LIMIT p_limit)) o
    ORDER BY o.at DESC
    LIMIT p_limit;
END $$;

--
-- Name: agent_task_result; Type: VIEW; Schema: ax; Owner: -
--

CREATE VIEW ax.agent_task_result AS
 SELECT NULL::uuid AS id,
    NULL::uuid AS token,
    NULL::text AS state,
    NULL::jsonb AS result,
    NULL::text AS error,
    NULL::text AS error_code,
    NULL::uuid AS agent_id
  WHERE false;

--
-- Name: agent_task_results(uuid[], uuid[], text[], jsonb[], text[], text[], uuid[]); Type: FUNCTION; Schema: ax; Owner: -
--

CREATE FUNCTION ax.agent_task_results(p_ids uuid[], p_tokens uuid[], p_states text[], p_results jsonb[], p_errors text[], p_codes text[], p_agents uuid[]) RETURNS SETOF ax.agent_task_result
    LANGUAGE plpgsql STABLE
    AS $$
BEGIN
    RETURN QUERY
    SELECT DISTINCT ON (x.id) x.id, x.token, x.state, x.result, x.error, x.error_code,
           nullif(x.agent_id, '00000000-0000-0000-0000-000000000000'::uuid)
    FROM unnest(p_ids, p_tokens, p_states, p_results, p_errors, p_codes, p_agents)
         WITH ORDINALITY AS x(id, token, state, result, error, error_code, agent_id, n)
    ORDER BY x.id, x.n;
END $$;

--
-- Name: api_key_revoked(); Type: FUNCTION; Schema: ax; Owner: -
--

CREATE FUNCTION ax.api_key_revoked() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    UPDATE ax.api_key SET revoked_at = NEW.revoked_at
    WHERE minted_by = NEW.id AND revoked_at IS NULL;
    UPDATE ax.agent SET state = 'offline'
    WHERE api_key_id = NEW.id AND state <> 'offline';
    RETURN NULL;
END $$;

--
-- Name: api_key_revoked_notify(); Type: FUNCTION; Schema: ax; Owner: -
--

CREATE FUNCTION ax.api_key_revoked_notify() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    PERFORM pg_notify('ax_api_key_revoked', '');
    RETURN NULL;
END $$;

--
-- Name: callback_sequence_drop(); Type: FUNCTION; Schema: ax; Owner: -
--

CREATE FUNCTION ax.callback_sequence_drop() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    DELETE FROM ax.callback_sequence WHERE job_id = OLD.id;
    RETURN OLD;
END $$;

--
-- Name: concurrency_key_freed(); Type: FUNCTION; Schema: ax; Owner: -
--

CREATE FUNCTION ax.concurrency_key_freed() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
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

--
-- Name: concurrency_park(); Type: FUNCTION; Schema: ax; Owner: -
--

CREATE FUNCTION ax.concurrency_park() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
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

--
-- Name: concurrency_places(text, text, integer); Type: FUNCTION; Schema: ax; Owner: -
--

CREATE FUNCTION ax.concurrency_places(scope text, key text, lim integer) RETURNS integer
    LANGUAGE sql STABLE
    AS $$
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

--
-- Name: concurrency_unpark(integer, integer, timestamp with time zone); Type: FUNCTION; Schema: ax; Owner: -
--

CREATE FUNCTION ax.concurrency_unpark(lock_class integer, max_keys integer, at timestamp with time zone) RETURNS integer
    LANGUAGE plpgsql
    AS $$
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

--
-- Name: console_session_key_revoked(); Type: FUNCTION; Schema: ax; Owner: -
--

CREATE FUNCTION ax.console_session_key_revoked() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    DELETE FROM ax.console_session WHERE key_id = NEW.id;
    RETURN NULL;
END $$;

--
-- Name: execution_ended(); Type: FUNCTION; Schema: ax; Owner: -
--

CREATE FUNCTION ax.execution_ended() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
DECLARE
    ended_ids uuid[];
BEGIN
    SELECT array_agg(n.id) INTO ended_ids
    FROM new_rows n JOIN old_rows o ON o.id = n.id
    WHERE o.state IN ('pending', 'running') AND n.state NOT IN ('pending', 'running');
    IF ended_ids IS NULL THEN
        RETURN NULL;
    END IF;
    INSERT INTO ax.callback (execution_id, job_id)
    SELECT e.id, e.job_id FROM new_rows e JOIN ax.job j ON j.id = e.job_id
    WHERE e.id = ANY(ended_ids) AND j.callback_url IS NOT NULL
    ON CONFLICT (execution_id) DO NOTHING;
    -- One NOTIFY per 200 ended executions (payload: their ids).
    PERFORM pg_notify('ax_execution_ended', string_agg(id::text, ','))
    FROM (SELECT id, (row_number() OVER () - 1) / 200 AS chunk FROM unnest(ended_ids) AS id) c
    GROUP BY chunk;
    PERFORM ax.history_move(ended_ids, now());
    RETURN NULL;
END $$;

--
-- Name: execution_job_deleted(); Type: FUNCTION; Schema: ax; Owner: -
--

CREATE FUNCTION ax.execution_job_deleted() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    DELETE FROM ax.execution e WHERE e.job_id IN (SELECT o.id FROM old_rows o);
    RETURN NULL;
END $$;

--
-- Name: execution_job_exists(); Type: FUNCTION; Schema: ax; Owner: -
--

CREATE FUNCTION ax.execution_job_exists() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
DECLARE
    jobs    uuid[];
    locked  integer;
    missing uuid;
BEGIN
    jobs := ARRAY(SELECT DISTINCT r.job_id FROM new_rows r ORDER BY r.job_id);
    -- By = ANY of an array: a probe of job_pkey per job, whatever the plan.
    PERFORM 1 FROM ax.job j WHERE j.id = ANY(jobs) ORDER BY j.id FOR KEY SHARE;
    GET DIAGNOSTICS locked = ROW_COUNT;
    IF locked < cardinality(jobs) THEN
        SELECT u.id INTO missing FROM unnest(jobs) AS u(id)
        WHERE NOT EXISTS (SELECT 1 FROM ax.job j WHERE j.id = u.id)
        LIMIT 1;
        RAISE EXCEPTION 'insert or update on table "execution" violates foreign key constraint "execution_job_id_fkey"'
            USING ERRCODE = 'foreign_key_violation', CONSTRAINT = 'execution_job_id_fkey', TABLE = 'execution',
                  SCHEMA = 'ax', DETAIL = format('Key (job_id)=(%s) is not present in table "job".', missing);
    END IF;
    RETURN NULL;
END $$;

--
-- Name: history_define_move(); Type: FUNCTION; Schema: ax; Owner: -
--

CREATE FUNCTION ax.history_define_move() RETURNS void
    LANGUAGE plpgsql
    AS $_$
DECLARE
    ecols text;
    tcols text;
    ecols_ended text;
    tcols_ended text;
    end_body    text;
BEGIN
    SELECT string_agg(quote_ident(attname), ', ' ORDER BY attnum) INTO ecols
    FROM pg_attribute WHERE attrelid = 'ax.execution'::regclass AND attnum > 0 AND NOT attisdropped;
    SELECT string_agg(quote_ident(attname), ', ' ORDER BY attnum) INTO tcols
    FROM pg_attribute WHERE attrelid = 'ax.task'::regclass AND attnum > 0 AND NOT attisdropped;
    -- The execution's columns as history_end writes them: the final state
    -- and the end time are set, the rest is copied.
    SELECT string_agg(CASE attname WHEN 'state' THEN 'k.final_state::ax.execution_state'
                                   WHEN 'finished_at' THEN 'now()'
                                   WHEN 'updated_at' THEN 'now()'
                                   ELSE 'k.' || quote_ident(attname) END, ', ' ORDER BY attnum) INTO ecols_ended
    FROM pg_attribute WHERE attrelid = 'ax.execution'::regclass AND attnum > 0 AND NOT attisdropped;
    -- A task whose outcome is passed (f: a result that ends its run, not
    -- recorded on the live row) gets it; the others are copied as they are.
    SELECT string_agg(CASE attname
                        WHEN 'state' THEN 'coalesce(f.state::ax.task_state, t.state)'
                        WHEN 'result' THEN 'CASE WHEN f.id IS NULL THEN t.result ELSE f.result END'
                        WHEN 'error' THEN 'CASE WHEN f.id IS NULL THEN t.error ELSE nullif(f.error, '''') END'
                        WHEN 'error_code' THEN 'CASE WHEN f.id IS NULL THEN t.error_code ELSE nullif(f.code, '''') END'
                        WHEN 'finished_at' THEN 'CASE WHEN f.id IS NULL THEN t.finished_at ELSE now() END'
                        WHEN 'updated_at' THEN 'CASE WHEN f.id IS NULL THEN t.updated_at ELSE now() END'
                        WHEN 'lease_token' THEN 'CASE WHEN f.id IS NULL THEN t.lease_token END'
                        WHEN 'lease_expires_at' THEN 'CASE WHEN f.id IS NULL THEN t.lease_expires_at END'
                        WHEN 'end_event_id' THEN 'CASE WHEN f.id IS NULL THEN t.end_event_id
                                                       WHEN f.state = ''succeeded'' THEN nextval(''ax.task_event_id_seq'') END'
                        ELSE 't.' || quote_ident(attname) END, ', ' ORDER BY attnum) INTO tcols_ended
    FROM pg_attribute WHERE attrelid = 'ax.task'::regclass AND attnum > 0 AND NOT attisdropped;

    EXECUTE format($def$
CREATE OR REPLACE FUNCTION ax.history_move(p_ids uuid[], p_not_before timestamptz) RETURNS integer
LANGUAGE plpgsql AS $fn$
DECLARE
    busy   uuid[];
    ids    uuid[];
    keep   timestamptz[];
BEGIN
    -- Every read is by key from a bound array (= ANY): index lookups
    -- whatever the statistics say (see TaskComplete).
    busy := ARRAY(SELECT DISTINCT t.execution_id FROM ax.task t
                  WHERE t.execution_id = ANY(p_ids) AND t.state IN ('pending', 'leased', 'running'));
    SELECT coalesce(array_agg(e.id), '{}'),
           coalesce(array_agg(least(greatest(
               e.finished_at + CASE WHEN e.state IN ('failed', 'timed_out')
                                    THEN coalesce(make_interval(secs => j.history_failed_retention_seconds), s.failed_retention)
                                    ELSE coalesce(make_interval(secs => j.history_retention_seconds), s.finished_retention) END,
               p_not_before), s.made_until - interval '1 microsecond')), '{}')
    INTO ids, keep
    FROM ax.execution e
    LEFT JOIN ax.job j ON j.id = e.job_id
    CROSS JOIN ax.history_setting s
    WHERE e.id = ANY(p_ids) AND e.finished_at IS NOT NULL AND NOT (e.id = ANY(busy));
    IF cardinality(ids) = 0 THEN
        RETURN 0;
    END IF;
    INSERT INTO ax.task_history (%1$s, retain_until)
    SELECT %2$s, k.until
    FROM ax.task t JOIN unnest(ids, keep) AS k(id, until) ON k.id = t.execution_id
    WHERE t.execution_id = ANY(ids);
    DELETE FROM ax.task t WHERE t.execution_id = ANY(ids);
    INSERT INTO ax.execution_history (%3$s, retain_until)
    SELECT %4$s, k.until
    FROM ax.execution e JOIN unnest(ids, keep) AS k(id, until) ON k.id = e.id
    WHERE e.id = ANY(ids);
    DELETE FROM ax.execution e WHERE e.id = ANY(ids);
    RETURN cardinality(ids);
END $fn$
$def$, tcols, (SELECT string_agg('t.' || c, ', ') FROM unnest(string_to_array(tcols, ', ')) c),
       ecols, (SELECT string_agg('e.' || c, ', ') FROM unnest(string_to_array(ecols, ', ')) c));

    -- history_end and history_end_single share their body (end_body):
    -- %5$s is the function's name, %6$s what it reads before ending the
    -- runs, %7$s which runs it may end.
    end_body := $def$
CREATE OR REPLACE FUNCTION ax.%5$s(p_ids uuid[], p_states text[], p_task_ids uuid[], p_task_states text[],
                                   p_task_results jsonb[], p_task_errors text[], p_task_codes text[])
RETURNS uuid[]
LANGUAGE plpgsql AS $fn$
DECLARE
    busy  uuid[];
    ended uuid[];
    keep  timestamptz[];
BEGIN
%6$s
    -- The runs are deleted from the live table and written to history
    -- with their final state, in one statement.
    WITH gone AS (
        DELETE FROM ax.execution e
        WHERE e.id = ANY(p_ids) AND e.state IN ('pending', 'running') AND %7$s
        RETURNING e.*
    ), k AS (
        SELECT g.*, f.state AS final_state, j.callback_url IS NOT NULL AS has_callback,
               least(now() + CASE WHEN f.state IN ('failed', 'timed_out')
                                  THEN coalesce(make_interval(secs => j.history_failed_retention_seconds), s.failed_retention)
                                  ELSE coalesce(make_interval(secs => j.history_retention_seconds), s.finished_retention) END,
                     s.made_until - interval '1 microsecond') AS until
        FROM gone g
        -- A run's final state by a join: array_position, per run, read
        -- p_ids from its start, quadratic in the batch (migration 00069).
        -- The first state given for a run is its state.
        JOIN (SELECT DISTINCT ON (x.id) x.id, x.state
              FROM unnest(p_ids, p_states) WITH ORDINALITY AS x(id, state, n)
              ORDER BY x.id, x.n) f ON f.id = g.id
        LEFT JOIN ax.job j ON j.id = g.job_id
        CROSS JOIN ax.history_setting s
    ), moved AS (
        INSERT INTO ax.execution_history (%1$s, retain_until)
        SELECT %2$s, k.until FROM k
        RETURNING id, retain_until
    ), outbox AS (
        INSERT INTO ax.callback (execution_id, job_id)
        SELECT k.id, k.job_id FROM k WHERE k.has_callback
        ON CONFLICT (execution_id) DO NOTHING
    )
    SELECT coalesce(array_agg(id), '{}'), coalesce(array_agg(retain_until), '{}') INTO ended, keep FROM moved;
    IF cardinality(ended) = 0 THEN
        RETURN ended;
    END IF;
    -- Their tasks follow (all ended, or ending with an outcome passed in).
    WITH tasks_gone AS (
        DELETE FROM ax.task t WHERE t.execution_id = ANY(ended)
        RETURNING t.*
    )
    INSERT INTO ax.task_history (%3$s, retain_until)
    SELECT %4$s, u.until
    FROM tasks_gone t
    JOIN unnest(ended, keep) AS u(id, until) ON u.id = t.execution_id
    LEFT JOIN unnest(p_task_ids, p_task_states, p_task_results, p_task_errors, p_task_codes)
              AS f(id, state, result, error, code) ON f.id = t.id;
    -- One NOTIFY per 200 ended executions (payload: their ids), as the
    -- execution_ended trigger sends for runs ended by an UPDATE.
    PERFORM pg_notify('ax_execution_ended', string_agg(id::text, ','))
    FROM (SELECT id, (row_number() OVER () - 1) / 200 AS chunk FROM unnest(ended) AS id) c
    GROUP BY chunk;
    RETURN ended;
END $fn$
$def$;
    EXECUTE format(end_body, ecols, ecols_ended, tcols, tcols_ended, 'history_end', $read$
    -- Every read is by key from a bound array (= ANY), never a join with
    -- the arrays or a subquery per row: with stale statistics either was
    -- planned as a scan of the table per row (see TaskComplete).
    busy := ARRAY(SELECT DISTINCT t.execution_id FROM ax.task t
                  WHERE t.execution_id = ANY(p_ids) AND t.state IN ('pending', 'leased', 'running')
                    AND NOT (t.id = ANY(p_task_ids)));$read$,
        'NOT (e.id = ANY(busy))');
    EXECUTE format(end_body, ecols, ecols_ended, tcols, tcols_ended, 'history_end_single', $read$
    -- No read of the runs' other tasks: a run of one shard has none (a
    -- run of several is left alone), and its task's outcome is passed in.$read$,
        'e.shard_count = 1');
END $_$;

--
-- Name: history_end(uuid[], text[], uuid[], text[], jsonb[], text[], text[]); Type: FUNCTION; Schema: ax; Owner: -
--

CREATE FUNCTION ax.history_end(p_ids uuid[], p_states text[], p_task_ids uuid[], p_task_states text[], p_task_results jsonb[], p_task_errors text[], p_task_codes text[]) RETURNS uuid[]
    LANGUAGE plpgsql
    AS $$
DECLARE
    busy  uuid[];
    ended uuid[];
    keep  timestamptz[];
BEGIN

    -- Every read is by key from a bound array (= ANY), never a join with
    -- the arrays or a subquery per row: with stale statistics either was
    -- planned as a scan of the table per row (see TaskComplete).
    busy := ARRAY(SELECT DISTINCT t.execution_id FROM ax.task t
                  WHERE t.execution_id = ANY(p_ids) AND t.state IN ('pending', 'leased', 'running')
                    AND NOT (t.id = ANY(p_task_ids)));
    -- The runs are deleted from the live table and written to history
    -- with their final state, in one statement.
    WITH gone AS (
        DELETE FROM ax.execution e
        WHERE e.id = ANY(p_ids) AND e.state IN ('pending', 'running') AND NOT (e.id = ANY(busy))
        RETURNING e.*
    ), k AS (
        SELECT g.*, f.state AS final_state, j.callback_url IS NOT NULL AS has_callback,
               least(now() + CASE WHEN f.state IN ('failed', 'timed_out')
                                  THEN coalesce(make_interval(secs => j.history_failed_retention_seconds), s.failed_retention)
                                  ELSE coalesce(make_interval(secs => j.history_retention_seconds), s.finished_retention) END,
                     s.made_until - interval '1 microsecond') AS until
        FROM gone g
        -- A run's final state by a join: array_position, per run, read
        -- p_ids from its start, quadratic in the batch (migration 00069).
        -- The first state given for a run is its state.
        JOIN (SELECT DISTINCT ON (x.id) x.id, x.state
              FROM unnest(p_ids, p_states) WITH ORDINALITY AS x(id, state, n)
              ORDER BY x.id, x.n) f ON f.id = g.id
        LEFT JOIN ax.job j ON j.id = g.job_id
        CROSS JOIN ax.history_setting s
    ), moved AS (
        INSERT INTO ax.execution_history (id, job_id, cause, scheduled_for, fired_at, misfired, state, params, shard_count, priority, started_at, finished_at, cancel_requested_at, cancel_reason, created_at, updated_at, error, traceparent, trigger_index, retain_until)
        SELECT k.id, k.job_id, k.cause, k.scheduled_for, k.fired_at, k.misfired, k.final_state::ax.execution_state, k.params, k.shard_count, k.priority, k.started_at, now(), k.cancel_requested_at, k.cancel_reason, k.created_at, now(), k.error, k.traceparent, k.trigger_index, k.until FROM k
        RETURNING id, retain_until
    ), outbox AS (
        INSERT INTO ax.callback (execution_id, job_id)
        SELECT k.id, k.job_id FROM k WHERE k.has_callback
        ON CONFLICT (execution_id) DO NOTHING
    )
    SELECT coalesce(array_agg(id), '{}'), coalesce(array_agg(retain_until), '{}') INTO ended, keep FROM moved;
    IF cardinality(ended) = 0 THEN
        RETURN ended;
    END IF;
    -- Their tasks follow (all ended, or ending with an outcome passed in).
    WITH tasks_gone AS (
        DELETE FROM ax.task t WHERE t.execution_id = ANY(ended)
        RETURNING t.*
    )
    INSERT INTO ax.task_history (id, execution_id, job_id, shard_index, shard_total, shard_param, state, priority, attempt, max_attempts, timeout_seconds, not_before, started_at, finished_at, cancel_requested_at, result, error, created_at, updated_at, agent_id, lease_token, lease_expires_at, leased_at, preferred_agent_id, fallback_agent_id, pinned, route_key, rate_class, agentless, log_bytes, lost_leases, error_code, concurrency_scope, concurrency_key, concurrency_limit, key_parked, worker_host, worker_ip, lease_event_id, end_event_id, params_bytes, no_agent, pool_id, floor_held, retain_until)
    SELECT t.id, t.execution_id, t.job_id, t.shard_index, t.shard_total, t.shard_param, coalesce(f.state::ax.task_state, t.state), t.priority, t.attempt, t.max_attempts, t.timeout_seconds, t.not_before, t.started_at, CASE WHEN f.id IS NULL THEN t.finished_at ELSE now() END, t.cancel_requested_at, CASE WHEN f.id IS NULL THEN t.result ELSE f.result END, CASE WHEN f.id IS NULL THEN t.error ELSE nullif(f.error, '') END, t.created_at, CASE WHEN f.id IS NULL THEN t.updated_at ELSE now() END, t.agent_id, CASE WHEN f.id IS NULL THEN t.lease_token END, CASE WHEN f.id IS NULL THEN t.lease_expires_at END, t.leased_at, t.preferred_agent_id, t.fallback_agent_id, t.pinned, t.route_key, t.rate_class, t.agentless, t.log_bytes, t.lost_leases, CASE WHEN f.id IS NULL THEN t.error_code ELSE nullif(f.code, '') END, t.concurrency_scope, t.concurrency_key, t.concurrency_limit, t.key_parked, t.worker_host, t.worker_ip, t.lease_event_id, CASE WHEN f.id IS NULL THEN t.end_event_id
                                                       WHEN f.state = 'succeeded' THEN nextval('ax.task_event_id_seq') END, t.params_bytes, t.no_agent, t.pool_id, t.floor_held, u.until
    FROM tasks_gone t
    JOIN unnest(ended, keep) AS u(id, until) ON u.id = t.execution_id
    LEFT JOIN unnest(p_task_ids, p_task_states, p_task_results, p_task_errors, p_task_codes)
              AS f(id, state, result, error, code) ON f.id = t.id;
    -- One NOTIFY per 200 ended executions (payload: their ids), as the
    -- execution_ended trigger sends for runs ended by an UPDATE.
    PERFORM pg_notify('ax_execution_ended', string_agg(id::text, ','))
    FROM (SELECT id, (row_number() OVER () - 1) / 200 AS chunk FROM unnest(ended) AS id) c
    GROUP BY chunk;
    RETURN ended;
END $$;

--
-- Name: history_end_single(uuid[], text[], uuid[], text[], jsonb[], text[], text[]); Type: FUNCTION; Schema: ax; Owner: -
--

CREATE FUNCTION ax.history_end_single(p_ids uuid[], p_states text[], p_task_ids uuid[], p_task_states text[], p_task_results jsonb[], p_task_errors text[], p_task_codes text[]) RETURNS uuid[]
    LANGUAGE plpgsql
    AS $$
DECLARE
    busy  uuid[];
    ended uuid[];
    keep  timestamptz[];
BEGIN

    -- No read of the runs' other tasks: a run of one shard has none (a
    -- run of several is left alone), and its task's outcome is passed in.
    -- The runs are deleted from the live table and written to history
    -- with their final state, in one statement.
    WITH gone AS (
        DELETE FROM ax.execution e
        WHERE e.id = ANY(p_ids) AND e.state IN ('pending', 'running') AND e.shard_count = 1
        RETURNING e.*
    ), k AS (
        SELECT g.*, f.state AS final_state, j.callback_url IS NOT NULL AS has_callback,
               least(now() + CASE WHEN f.state IN ('failed', 'timed_out')
                                  THEN coalesce(make_interval(secs => j.history_failed_retention_seconds), s.failed_retention)
                                  ELSE coalesce(make_interval(secs => j.history_retention_seconds), s.finished_retention) END,
                     s.made_until - interval '1 microsecond') AS until
        FROM gone g
        -- A run's final state by a join: array_position, per run, read
        -- p_ids from its start, quadratic in the batch (migration 00069).
        -- The first state given for a run is its state.
        JOIN (SELECT DISTINCT ON (x.id) x.id, x.state
              FROM unnest(p_ids, p_states) WITH ORDINALITY AS x(id, state, n)
              ORDER BY x.id, x.n) f ON f.id = g.id
        LEFT JOIN ax.job j ON j.id = g.job_id
        CROSS JOIN ax.history_setting s
    ), moved AS (
        INSERT INTO ax.execution_history (id, job_id, cause, scheduled_for, fired_at, misfired, state, params, shard_count, priority, started_at, finished_at, cancel_requested_at, cancel_reason, created_at, updated_at, error, traceparent, trigger_index, retain_until)
        SELECT k.id, k.job_id, k.cause, k.scheduled_for, k.fired_at, k.misfired, k.final_state::ax.execution_state, k.params, k.shard_count, k.priority, k.started_at, now(), k.cancel_requested_at, k.cancel_reason, k.created_at, now(), k.error, k.traceparent, k.trigger_index, k.until FROM k
        RETURNING id, retain_until
    ), outbox AS (
        INSERT INTO ax.callback (execution_id, job_id)
        SELECT k.id, k.job_id FROM k WHERE k.has_callback
        ON CONFLICT (execution_id) DO NOTHING
    )
    SELECT coalesce(array_agg(id), '{}'), coalesce(array_agg(retain_until), '{}') INTO ended, keep FROM moved;
    IF cardinality(ended) = 0 THEN
        RETURN ended;
    END IF;
    -- Their tasks follow (all ended, or ending with an outcome passed in).
    WITH tasks_gone AS (
        DELETE FROM ax.task t WHERE t.execution_id = ANY(ended)
        RETURNING t.*
    )
    INSERT INTO ax.task_history (id, execution_id, job_id, shard_index, shard_total, shard_param, state, priority, attempt, max_attempts, timeout_seconds, not_before, started_at, finished_at, cancel_requested_at, result, error, created_at, updated_at, agent_id, lease_token, lease_expires_at, leased_at, preferred_agent_id, fallback_agent_id, pinned, route_key, rate_class, agentless, log_bytes, lost_leases, error_code, concurrency_scope, concurrency_key, concurrency_limit, key_parked, worker_host, worker_ip, lease_event_id, end_event_id, params_bytes, no_agent, pool_id, floor_held, retain_until)
    SELECT t.id, t.execution_id, t.job_id, t.shard_index, t.shard_total, t.shard_param, coalesce(f.state::ax.task_state, t.state), t.priority, t.attempt, t.max_attempts, t.timeout_seconds, t.not_before, t.started_at, CASE WHEN f.id IS NULL THEN t.finished_at ELSE now() END, t.cancel_requested_at, CASE WHEN f.id IS NULL THEN t.result ELSE f.result END, CASE WHEN f.id IS NULL THEN t.error ELSE nullif(f.error, '') END, t.created_at, CASE WHEN f.id IS NULL THEN t.updated_at ELSE now() END, t.agent_id, CASE WHEN f.id IS NULL THEN t.lease_token END, CASE WHEN f.id IS NULL THEN t.lease_expires_at END, t.leased_at, t.preferred_agent_id, t.fallback_agent_id, t.pinned, t.route_key, t.rate_class, t.agentless, t.log_bytes, t.lost_leases, CASE WHEN f.id IS NULL THEN t.error_code ELSE nullif(f.code, '') END, t.concurrency_scope, t.concurrency_key, t.concurrency_limit, t.key_parked, t.worker_host, t.worker_ip, t.lease_event_id, CASE WHEN f.id IS NULL THEN t.end_event_id
                                                       WHEN f.state = 'succeeded' THEN nextval('ax.task_event_id_seq') END, t.params_bytes, t.no_agent, t.pool_id, t.floor_held, u.until
    FROM tasks_gone t
    JOIN unnest(ended, keep) AS u(id, until) ON u.id = t.execution_id
    LEFT JOIN unnest(p_task_ids, p_task_states, p_task_results, p_task_errors, p_task_codes)
              AS f(id, state, result, error, code) ON f.id = t.id;
    -- One NOTIFY per 200 ended executions (payload: their ids), as the
    -- execution_ended trigger sends for runs ended by an UPDATE.
    PERFORM pg_notify('ax_execution_ended', string_agg(id::text, ','))
    FROM (SELECT id, (row_number() OVER () - 1) / 200 AS chunk FROM unnest(ended) AS id) c
    GROUP BY chunk;
    RETURN ended;
END $$;

--
-- Name: history_horizon(timestamp with time zone); Type: FUNCTION; Schema: ax; Owner: -
--

CREATE FUNCTION ax.history_horizon(p_now timestamp with time zone) RETURNS timestamp with time zone
    LANGUAGE sql STABLE
    AS $$
    SELECT p_now - 2 * s.partition_width - ax.longest_retention()
    FROM ax.history_setting s
$$;

--
-- Name: history_make_partitions(timestamp with time zone); Type: FUNCTION; Schema: ax; Owner: -
--

CREATE FUNCTION ax.history_make_partitions(p_until timestamp with time zone) RETURNS integer
    LANGUAGE plpgsql
    AS $$
DECLARE
    s      ax.history_setting;
    lo     timestamptz;
    hi     timestamptz;
    suffix text;
    made   integer := 0;
BEGIN
    SELECT * INTO s FROM ax.history_setting FOR UPDATE;
    -- From the horizon, but never from the past: rows land at now + a
    -- retention or later, so a server that was down for days makes no
    -- partitions for them (and a first call starts at the current slot).
    lo := greatest(s.made_until, date_bin(s.partition_width, now(), timestamptz '2000-01-01 00:00:00+00'));
    WHILE lo < p_until LOOP
        hi := lo + s.partition_width;
        suffix := to_char(lo AT TIME ZONE 'UTC', 'YYYYMMDD"t"HH24MISS');
        -- Made apart and then attached: ATTACH PARTITION takes a SHARE
        -- UPDATE EXCLUSIVE lock on the history table, which the moves'
        -- inserts do not conflict with; CREATE TABLE ... PARTITION OF
        -- would take ACCESS EXCLUSIVE and queue every move behind it.
        EXECUTE format('CREATE TABLE ax.%I (LIKE ax.execution_history INCLUDING DEFAULTS INCLUDING CONSTRAINTS)',
                       'execution_h' || suffix);
        EXECUTE format('CREATE INDEX ON ax.%I (id)', 'execution_h' || suffix);
        EXECUTE format('CREATE INDEX ON ax.%I (job_id, finished_at DESC)', 'execution_h' || suffix);
        EXECUTE format('ALTER TABLE ax.execution_history ATTACH PARTITION ax.%I FOR VALUES FROM (%L) TO (%L)',
                       'execution_h' || suffix, lo, hi);
        EXECUTE format('CREATE TABLE ax.%I (LIKE ax.task_history INCLUDING DEFAULTS INCLUDING CONSTRAINTS)',
                       'task_h' || suffix);
        EXECUTE format('CREATE INDEX ON ax.%I (id)', 'task_h' || suffix);
        EXECUTE format('CREATE INDEX ON ax.%I (execution_id, shard_index)', 'task_h' || suffix);
        EXECUTE format('ALTER TABLE ax.task_history ATTACH PARTITION ax.%I FOR VALUES FROM (%L) TO (%L)',
                       'task_h' || suffix, lo, hi);
        lo := hi;
        made := made + 1;
    END LOOP;
    UPDATE ax.history_setting SET made_until = lo, updated_at = now();
    RETURN made;
END $$;

--
-- Name: history_move(uuid[], timestamp with time zone); Type: FUNCTION; Schema: ax; Owner: -
--

CREATE FUNCTION ax.history_move(p_ids uuid[], p_not_before timestamp with time zone) RETURNS integer
    LANGUAGE plpgsql
    AS $$
DECLARE
    busy   uuid[];
    ids    uuid[];
    keep   timestamptz[];
BEGIN
    -- Every read is by key from a bound array (= ANY): index lookups
    -- whatever the statistics say (see TaskComplete).
    busy := ARRAY(SELECT DISTINCT t.execution_id FROM ax.task t
                  WHERE t.execution_id = ANY(p_ids) AND t.state IN ('pending', 'leased', 'running'));
    SELECT coalesce(array_agg(e.id), '{}'),
           coalesce(array_agg(least(greatest(
               e.finished_at + CASE WHEN e.state IN ('failed', 'timed_out')
                                    THEN coalesce(make_interval(secs => j.history_failed_retention_seconds), s.failed_retention)
                                    ELSE coalesce(make_interval(secs => j.history_retention_seconds), s.finished_retention) END,
               p_not_before), s.made_until - interval '1 microsecond')), '{}')
    INTO ids, keep
    FROM ax.execution e
    LEFT JOIN ax.job j ON j.id = e.job_id
    CROSS JOIN ax.history_setting s
    WHERE e.id = ANY(p_ids) AND e.finished_at IS NOT NULL AND NOT (e.id = ANY(busy));
    IF cardinality(ids) = 0 THEN
        RETURN 0;
    END IF;
    INSERT INTO ax.task_history (id, execution_id, job_id, shard_index, shard_total, shard_param, state, priority, attempt, max_attempts, timeout_seconds, not_before, started_at, finished_at, cancel_requested_at, result, error, created_at, updated_at, agent_id, lease_token, lease_expires_at, leased_at, preferred_agent_id, fallback_agent_id, pinned, route_key, rate_class, agentless, log_bytes, lost_leases, error_code, concurrency_scope, concurrency_key, concurrency_limit, key_parked, worker_host, worker_ip, lease_event_id, end_event_id, params_bytes, no_agent, pool_id, floor_held, retain_until)
    SELECT t.id, t.execution_id, t.job_id, t.shard_index, t.shard_total, t.shard_param, t.state, t.priority, t.attempt, t.max_attempts, t.timeout_seconds, t.not_before, t.started_at, t.finished_at, t.cancel_requested_at, t.result, t.error, t.created_at, t.updated_at, t.agent_id, t.lease_token, t.lease_expires_at, t.leased_at, t.preferred_agent_id, t.fallback_agent_id, t.pinned, t.route_key, t.rate_class, t.agentless, t.log_bytes, t.lost_leases, t.error_code, t.concurrency_scope, t.concurrency_key, t.concurrency_limit, t.key_parked, t.worker_host, t.worker_ip, t.lease_event_id, t.end_event_id, t.params_bytes, t.no_agent, t.pool_id, t.floor_held, k.until
    FROM ax.task t JOIN unnest(ids, keep) AS k(id, until) ON k.id = t.execution_id
    WHERE t.execution_id = ANY(ids);
    DELETE FROM ax.task t WHERE t.execution_id = ANY(ids);
    INSERT INTO ax.execution_history (id, job_id, cause, scheduled_for, fired_at, misfired, state, params, shard_count, priority, started_at, finished_at, cancel_requested_at, cancel_reason, created_at, updated_at, error, traceparent, trigger_index, retain_until)
    SELECT e.id, e.job_id, e.cause, e.scheduled_for, e.fired_at, e.misfired, e.state, e.params, e.shard_count, e.priority, e.started_at, e.finished_at, e.cancel_requested_at, e.cancel_reason, e.created_at, e.updated_at, e.error, e.traceparent, e.trigger_index, k.until
    FROM ax.execution e JOIN unnest(ids, keep) AS k(id, until) ON k.id = e.id
    WHERE e.id = ANY(ids);
    DELETE FROM ax.execution e WHERE e.id = ANY(ids);
    RETURN cardinality(ids);
END $$;

--
-- Name: history_set_width(interval); Type: FUNCTION; Schema: ax; Owner: -
--

CREATE FUNCTION ax.history_set_width(p_width interval) RETURNS void
    LANGUAGE plpgsql
    AS $$
DECLARE
    p        record;
    kept_to  timestamptz := '-infinity';
    any_rows boolean;
BEGIN
    PERFORM 1 FROM ax.history_setting FOR UPDATE;
    IF (SELECT partition_width FROM ax.history_setting) = p_width THEN
        RETURN;
    END IF;
    FOR p IN
        SELECT c.relname, (m.b)[2]::timestamptz AS range_to
        FROM pg_inherits i
        JOIN pg_class c ON c.oid = i.inhrelid
        JOIN pg_class t ON t.oid = i.inhparent
        CROSS JOIN LATERAL (SELECT regexp_match(pg_get_expr(c.relpartbound, c.oid),
                                                'FROM \(''(\d{4}-\d\d-\d\d [^'']*)''\) TO \(''(\d{4}-\d\d-\d\d [^'']*)''\)') AS b) m
        WHERE t.oid IN ('ax.execution_history'::regclass, 'ax.task_history'::regclass)
        ORDER BY (m.b)[1]::timestamptz DESC
    LOOP
        EXECUTE format('SELECT EXISTS (SELECT 1 FROM ax.%I)', p.relname) INTO any_rows;
        IF any_rows THEN
            kept_to := greatest(kept_to, p.range_to);
        END IF;
    END LOOP;
    FOR p IN
        SELECT c.relname
        FROM pg_inherits i
        JOIN pg_class c ON c.oid = i.inhrelid
        CROSS JOIN LATERAL (SELECT regexp_match(pg_get_expr(c.relpartbound, c.oid),
                                                'FROM \(''(\d{4}-\d\d-\d\d [^'']*)''\) TO \(''(\d{4}-\d\d-\d\d [^'']*)''\)') AS b) m
        WHERE i.inhparent IN ('ax.execution_history'::regclass, 'ax.task_history'::regclass)
          AND (m.b)[1]::timestamptz >= kept_to
    LOOP
        EXECUTE format('DROP TABLE ax.%I', p.relname);
    END LOOP;
    -- Made from the end of the last partition that holds rows on
    -- (history_make_partitions starts at now when that is past).
    UPDATE ax.history_setting
    SET partition_width = p_width, made_until = kept_to, updated_at = now();
END $$;

--
-- Name: jitter_offset(uuid, timestamp with time zone, integer); Type: FUNCTION; Schema: ax; Owner: -
--

CREATE FUNCTION ax.jitter_offset(job_id uuid, tick timestamp with time zone, jitter_seconds integer) RETURNS interval
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    AS $$
    SELECT CASE WHEN jitter_seconds > 0 THEN
        make_interval(secs => (('x' || substr(md5(job_id::text || '/' || floor(extract(epoch FROM tick))::bigint::text), 1, 8))::bit(32)::bigint
                               % (jitter_seconds::bigint * 1000)) / 1000.0)
    ELSE interval '0' END
$$;

--
-- Name: job_calendar_sync(); Type: FUNCTION; Schema: ax; Owner: -
--

CREATE FUNCTION ax.job_calendar_sync() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    DELETE FROM ax.job_calendar WHERE job_id = NEW.id;
    INSERT INTO ax.job_calendar (job_id, calendar_name)
    SELECT DISTINCT NEW.id, n FROM unnest(NEW.exclude) AS n;
    RETURN NULL;
END
$$;

--
-- Name: job; Type: TABLE; Schema: ax; Owner: -
--

CREATE TABLE ax.job (
    id uuid DEFAULT gen_random_uuid() NOT NULL,
    name text NOT NULL,
    group_name text DEFAULT 'default'::text NOT NULL,
    owner text DEFAULT ''::text NOT NULL,
    description text DEFAULT ''::text NOT NULL,
    trigger_kind ax.trigger_kind NOT NULL,
    cron_expr text,
    timezone text DEFAULT 'UTC'::text NOT NULL,
    interval_seconds bigint,
    run_at timestamp with time zone,
    executor_kind ax.executor_kind NOT NULL,
    executor jsonb DEFAULT '{}'::jsonb NOT NULL,
    target_labels jsonb DEFAULT '{}'::jsonb NOT NULL,
    route_strategy ax.route_strategy DEFAULT 'round_robin'::ax.route_strategy NOT NULL,
    route_key text DEFAULT ''::text NOT NULL,
    shard_count integer DEFAULT 1 NOT NULL,
    shard_params jsonb DEFAULT '[]'::jsonb NOT NULL,
    priority integer DEFAULT 0 NOT NULL,
    timeout_seconds integer DEFAULT 3600 NOT NULL,
    retry_max_attempts integer DEFAULT 4 NOT NULL,
    retry_backoff_seconds integer DEFAULT 5 NOT NULL,
    retry_backoff_max_seconds integer DEFAULT 600 NOT NULL,
    concurrency_policy ax.concurrency_policy DEFAULT 'allow'::ax.concurrency_policy NOT NULL,
    misfire_policy ax.misfire_policy DEFAULT 'fire_once'::ax.misfire_policy NOT NULL,
    misfire_window_seconds integer DEFAULT 86400 NOT NULL,
    misfire_max_fires integer DEFAULT 100 NOT NULL,
    rate_limit_class text,
    callback_url text,
    params jsonb DEFAULT '{}'::jsonb NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    shard_range_from bigint DEFAULT 0 NOT NULL,
    shard_range_to bigint DEFAULT '4294967296'::bigint NOT NULL,
    degrade_action ax.degrade_action DEFAULT 'wait'::ax.degrade_action NOT NULL,
    agentless boolean NOT NULL,
    timeout_mode ax.timeout_mode DEFAULT 'fixed'::ax.timeout_mode NOT NULL,
    shard_generator text,
    shard_window_seconds integer,
    history_retention_seconds integer,
    history_failed_retention_seconds integer,
    managed_by text,
    declared_version text,
    declared_in text,
    callback_ordered boolean DEFAULT false NOT NULL,
    active_from timestamp with time zone,
    active_until timestamp with time zone,
    jitter_seconds integer DEFAULT 0 NOT NULL,
    triggers jsonb,
    exclude text[] DEFAULT '{}'::text[] NOT NULL,
    concurrency_key text DEFAULT ''::text NOT NULL,
    concurrency_limit integer,
    concurrency_group text DEFAULT ''::text NOT NULL,
    pool_id integer NOT NULL,
    CONSTRAINT job_active_window_order CHECK ((active_until > active_from)),
    CONSTRAINT job_adaptive_timeout_ceiling CHECK (((timeout_mode <> 'adaptive'::ax.timeout_mode) OR (timeout_seconds >= 5))),
    CONSTRAINT job_concurrency_limit_range CHECK (((concurrency_limit >= 1) AND (concurrency_limit <= 10000))),
    CONSTRAINT job_concurrency_set CHECK ((((concurrency_key = ''::text) = (concurrency_limit IS NULL)) AND ((concurrency_key <> ''::text) OR (concurrency_group = ''::text)))),
    CONSTRAINT job_cron_has_expr CHECK (((trigger_kind <> 'cron'::ax.trigger_kind) OR (cron_expr IS NOT NULL))),
    CONSTRAINT job_declared_has_manager CHECK (((managed_by IS NOT NULL) OR ((declared_version IS NULL) AND (declared_in IS NULL)))),
    CONSTRAINT job_delay_has_run_at CHECK (((trigger_kind <> 'delay'::ax.trigger_kind) OR (run_at IS NOT NULL))),
    CONSTRAINT job_exclude_bounds CHECK ((cardinality(exclude) <= 16)),
    CONSTRAINT job_executor_is_object CHECK ((jsonb_typeof(executor) = 'object'::text)),
    CONSTRAINT job_history_retention_range CHECK ((((history_retention_seconds IS NULL) OR ((history_retention_seconds >= 1) AND (history_retention_seconds <= (400 * 86400)))) AND ((history_failed_retention_seconds IS NULL) OR ((history_failed_retention_seconds >= 1) AND (history_failed_retention_seconds <= (400 * 86400)))))),
    CONSTRAINT job_interval_positive CHECK (((trigger_kind <> 'interval'::ax.trigger_kind) OR (interval_seconds >= 1))),
    CONSTRAINT job_jitter_bounds CHECK (((jitter_seconds >= 0) AND (jitter_seconds <= 86400))),
    CONSTRAINT job_misfire_bounds CHECK (((misfire_window_seconds >= 0) AND ((misfire_max_fires >= 1) AND (misfire_max_fires <= 10000)))),
    CONSTRAINT job_name_not_blank CHECK ((length(btrim(name)) > 0)),
    CONSTRAINT job_params_is_object CHECK ((jsonb_typeof(params) = 'object'::text)),
    CONSTRAINT job_retry_attempts_range CHECK (((retry_max_attempts >= 1) AND (retry_max_attempts <= 100))),
    CONSTRAINT job_retry_backoff_range CHECK (((retry_backoff_seconds >= 0) AND (retry_backoff_max_seconds >= retry_backoff_seconds))),
    CONSTRAINT job_shard_count_range CHECK (((shard_count >= 1) AND (shard_count <= 10000))),
    CONSTRAINT job_shard_generator_kind CHECK ((shard_generator = ANY (ARRAY['time_window'::text, 'mod'::text]))),
    CONSTRAINT job_shard_params_is_array CHECK ((jsonb_typeof(shard_params) = 'array'::text)),
    CONSTRAINT job_shard_range_order CHECK ((shard_range_from < shard_range_to)),
    CONSTRAINT job_shard_window_only_time_window CHECK (((NOT (shard_generator IS DISTINCT FROM 'time_window'::text)) = (shard_window_seconds IS NOT NULL))),
    CONSTRAINT job_shard_window_range CHECK (((shard_window_seconds >= 1) AND (shard_window_seconds <= 31622400))),
    CONSTRAINT job_shard_window_whole_seconds CHECK (((shard_window_seconds % shard_count) = 0)),
    CONSTRAINT job_target_labels_is_object CHECK ((jsonb_typeof(target_labels) = 'object'::text)),
    CONSTRAINT job_timeout_positive CHECK ((timeout_seconds > 0)),
    CONSTRAINT job_triggers_list CHECK (((triggers IS NULL) OR ((jsonb_typeof(triggers) = 'array'::text) AND ((jsonb_array_length(triggers) >= 2) AND (jsonb_array_length(triggers) <= 16)))))
);

--
-- Name: job_pool_follow(ax.job); Type: FUNCTION; Schema: ax; Owner: -
--

CREATE FUNCTION ax.job_pool_follow(j ax.job) RETURNS integer
    LANGUAGE sql
    AS $$
    WITH live AS MATERIALIZED (
        SELECT u.id, u.pool_id, u.rate_class
        FROM ax.task u
        WHERE u.execution_id IN (SELECT e.id FROM ax.execution e WHERE e.job_id = j.id AND e.finished_at IS NULL)
          AND u.state IN ('pending', 'leased', 'running') AND NOT u.agentless AND NOT u.pinned
    ), pools AS MATERIALIZED (
        SELECT c.rate_class,
               CASE WHEN c.rate_class IS NOT DISTINCT FROM j.rate_limit_class THEN j.pool_id
                    ELSE ax.task_pool_for(j.target_labels, j.executor_kind, c.rate_class) END AS pool_id
        FROM (SELECT DISTINCT l.rate_class FROM live l) c
    ), moved AS (
        UPDATE ax.task t SET pool_id = p.pool_id
        FROM live l
        JOIN pools p ON p.rate_class IS NOT DISTINCT FROM l.rate_class
        WHERE t.id = l.id AND l.pool_id <> p.pool_id
        RETURNING 1
    )
    SELECT count(*)::integer FROM moved
$$;

--
-- Name: job_pool_moved(); Type: FUNCTION; Schema: ax; Owner: -
--

CREATE FUNCTION ax.job_pool_moved() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    PERFORM ax.job_pool_follow(NEW);
    INSERT INTO ax.job_pool_change (job_id, changed_at, next_at) VALUES (NEW.id, now(), now())
    ON CONFLICT (job_id) DO UPDATE SET changed_at = excluded.changed_at, next_at = excluded.next_at;
    RETURN NULL;
END $$;

--
-- Name: job_pool_set(); Type: FUNCTION; Schema: ax; Owner: -
--

CREATE FUNCTION ax.job_pool_set() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    NEW.pool_id := ax.task_pool_for(NEW.target_labels, NEW.executor_kind, NEW.rate_limit_class);
    RETURN NEW;
END $$;

--
-- Name: job_rate_class_groups(); Type: FUNCTION; Schema: ax; Owner: -
--

CREATE FUNCTION ax.job_rate_class_groups() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
DECLARE
    allowed text[];
BEGIN
    SELECT c.groups INTO allowed FROM ax.rate_class c WHERE c.name = NEW.rate_limit_class FOR KEY SHARE;
    IF allowed IS NOT NULL AND NOT NEW.group_name = ANY(allowed) THEN
        RAISE EXCEPTION 'rate class % is kept to groups %', NEW.rate_limit_class, allowed
            USING ERRCODE = 'check_violation', CONSTRAINT = 'job_rate_class_groups',
                  DETAIL = format('job group %s is not one of them', NEW.group_name);
    END IF;
    RETURN NEW;
END $$;

--
-- Name: job_skips_below_floor(); Type: FUNCTION; Schema: ax; Owner: -
--

CREATE FUNCTION ax.job_skips_below_floor() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    UPDATE ax.task t SET floor_held = false
    WHERE t.execution_id IN (SELECT e.id FROM ax.execution e WHERE e.job_id = NEW.id AND e.finished_at IS NULL)
      AND t.floor_held AND t.state = 'pending';
    RETURN NULL;
END $$;

--
-- Name: job_success_p95(uuid); Type: FUNCTION; Schema: ax; Owner: -
--

CREATE FUNCTION ax.job_success_p95(p_job uuid) RETURNS TABLE(samples integer, p95_ms bigint)
    LANGUAGE plpgsql STABLE
    AS $$
BEGIN
    RETURN QUERY
    SELECT count(*)::integer, (percentile_disc(0.95) WITHIN GROUP (ORDER BY d.ms))::bigint
    FROM (
        SELECT s.ms
        FROM (SELECT e.id, e.retain_until
              FROM ax.execution_history e
              WHERE e.job_id = p_job AND e.state = 'succeeded' AND e.finished_at > now() - interval '24 hours'
              ORDER BY e.finished_at DESC
              LIMIT 100) r
        CROSS JOIN LATERAL (
            (SELECT (extract(epoch FROM t.finished_at - t.leased_at) * 1000)::bigint AS ms, t.finished_at AS at
             FROM ax.task_history t
             WHERE t.execution_id = r.id AND t.retain_until = r.retain_until AND t.end_event_id IS NOT NULL
             LIMIT 100)
            UNION ALL
            (SELECT ev.duration_ms, ev.at
             FROM ax.task_event ev
             WHERE ev.execution_id = r.id AND ev.kind = 'state' AND ev.state = 'succeeded'
               AND ev.duration_ms IS NOT NULL
             LIMIT 100)) s
        ORDER BY s.at DESC
        LIMIT 100
    ) d;
END $$;

--
-- Name: lease_message(uuid, uuid); Type: FUNCTION; Schema: ax; Owner: -
--

CREATE FUNCTION ax.lease_message(p_preferred uuid, p_agent uuid) RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$
    SELECT CASE WHEN p_preferred IS NULL THEN 'unassigned'
                WHEN p_preferred = p_agent THEN 'routed here'
                ELSE 'taken over from agent ' || p_preferred END
$$;

--
-- Name: lease_pool_shares(text, integer[], integer, jsonb, text[], boolean, text[], uuid[], uuid[], uuid[], timestamp with time zone, double precision, double precision, double precision); Type: FUNCTION; Schema: ax; Owner: -
--

CREATE FUNCTION ax.lease_pool_shares(p_group text, p_pools integer[], p_room integer, p_labels jsonb, p_executors text[], p_label_bound boolean, p_classes text[], p_agents uuid[], p_taken uuid[], p_own uuid[], p_now timestamp with time zone, p_starve_seconds double precision, p_steal_seconds double precision, p_steal_any_seconds double precision) RETURNS TABLE(share_pool integer, share integer)
    LANGUAGE plpgsql STABLE ROWS 4
    AS $$
DECLARE
    busy integer[];
BEGIN
    IF p_room <= 0 OR coalesce(cardinality(p_pools), 0) < 2 THEN
        RETURN;
    END IF;
    IF p_group = 'starved' THEN
        busy := ARRAY(SELECT p.id
                      FROM unnest(p_pools) AS p(id)
                      CROSS JOIN LATERAL (SELECT 1 FROM ax.task t
                                          WHERE t.pool_id = p.id AND t.state = 'pending' AND NOT t.no_agent AND NOT t.key_parked AND NOT t.floor_held AND NOT t.pinned
                                            AND t.not_before <= p_now - make_interval(secs => p_starve_seconds)
                                          ORDER BY t.not_before
                                          LIMIT 1) f);
        IF cardinality(busy) > 1 THEN
            RETURN QUERY
            SELECT x.pool_id, count(*)::integer
            FROM (SELECT u.pool_id
                  FROM unnest(busy) AS p(id)
                  CROSS JOIN LATERAL (
                      SELECT t.pool_id, t.not_before
                      FROM ax.task t
                      JOIN ax.job j ON j.id = t.job_id
                      WHERE t.pool_id = p.id AND t.state = 'pending' AND NOT t.agentless AND t.concurrency_key IS NULL AND NOT t.no_agent AND NOT t.key_parked AND NOT t.floor_held AND NOT t.pinned AND t.id <> ALL(p_taken)
                        AND t.not_before <= p_now - make_interval(secs => p_starve_seconds)
                        AND j.target_labels <@ p_labels
                        AND j.executor_kind::text = ANY(p_executors)
                        AND (NOT p_label_bound OR j.target_labels <> '{}'::jsonb)
                        AND (t.preferred_agent_id IS NULL OR t.preferred_agent_id = ANY(p_agents)
                             OR (NOT t.pinned
                                 AND t.not_before <= p_now - make_interval(secs => p_steal_seconds)
                                 AND (t.fallback_agent_id IS NULL OR t.fallback_agent_id = ANY(p_agents)
                                      OR t.not_before <= p_now - make_interval(secs => p_steal_any_seconds))))
                        AND (t.rate_class IS NULL OR (t.rate_class = ANY(p_classes) AND NOT EXISTS (
                            SELECT 1 FROM ax.rate_class c
                            WHERE c.name = t.rate_class
                              AND t.priority < coalesce(c.manual_min_priority,
                                                        CASE WHEN c.degraded_since IS NOT NULL THEN c.auto_min_priority END))))
                      ORDER BY t.not_before
                      LIMIT p_room) u
                  ORDER BY u.not_before
                  LIMIT p_room) x
            GROUP BY x.pool_id;
        END IF;
    ELSIF p_group = 'unassigned' THEN
        busy := ARRAY(SELECT p.id
                      FROM unnest(p_pools) AS p(id)
                      CROSS JOIN LATERAL (SELECT 1 FROM ax.task t
                                          WHERE t.pool_id = p.id AND t.state = 'pending' AND t.preferred_agent_id IS NULL AND NOT t.agentless
                                            AND t.concurrency_key IS NULL AND NOT t.no_agent AND NOT t.floor_held
                                          ORDER BY t.priority DESC, t.created_at
                                          LIMIT 1) f);
        IF cardinality(busy) > 1 THEN
            RETURN QUERY
            SELECT x.pool_id, count(*)::integer
            FROM (SELECT u.pool_id
                  FROM unnest(busy) AS p(id)
                  CROSS JOIN LATERAL (
                      SELECT t.pool_id, t.priority, t.created_at
                      FROM ax.task t
                      JOIN ax.job j ON j.id = t.job_id
                      WHERE t.pool_id = p.id AND t.state = 'pending' AND t.preferred_agent_id IS NULL AND NOT t.agentless AND t.concurrency_key IS NULL AND NOT t.no_agent AND NOT t.floor_held AND t.id <> ALL(p_taken) AND t.not_before <= p_now
                        AND j.target_labels <@ p_labels
                        AND j.executor_kind::text = ANY(p_executors)
                        AND (NOT p_label_bound OR j.target_labels <> '{}'::jsonb)
                        AND (t.rate_class IS NULL OR (t.rate_class = ANY(p_classes) AND NOT EXISTS (
                            SELECT 1 FROM ax.rate_class c
                            WHERE c.name = t.rate_class
                              AND t.priority < coalesce(c.manual_min_priority,
                                                        CASE WHEN c.degraded_since IS NOT NULL THEN c.auto_min_priority END))))
                      ORDER BY t.priority DESC, t.created_at
                      LIMIT p_room) u
                  ORDER BY u.priority DESC, u.created_at
                  LIMIT p_room) x
            GROUP BY x.pool_id;
        END IF;
    ELSIF p_group = 'stealable' THEN
        busy := ARRAY(SELECT p.id
                      FROM unnest(p_pools) AS p(id)
                      CROSS JOIN LATERAL (SELECT 1 FROM ax.task t
                                          WHERE t.pool_id = p.id AND t.state = 'pending' AND NOT t.no_agent AND NOT t.key_parked AND NOT t.floor_held AND NOT t.pinned
                                            AND t.preferred_agent_id IS NOT NULL AND t.concurrency_key IS NULL
                                            AND t.not_before <= p_now - make_interval(secs => p_steal_seconds)
                                          ORDER BY t.not_before
                                          LIMIT 1) f);
        IF cardinality(busy) > 1 THEN
            RETURN QUERY
            SELECT x.pool_id, count(*)::integer
            FROM (SELECT u.pool_id
                  FROM unnest(busy) AS p(id)
                  CROSS JOIN LATERAL (
                      SELECT t.pool_id, t.not_before
                      FROM ax.task t
                      JOIN ax.job j ON j.id = t.job_id
                      WHERE t.pool_id = p.id AND t.state = 'pending' AND NOT t.pinned AND t.preferred_agent_id IS NOT NULL AND t.concurrency_key IS NULL AND NOT t.no_agent AND NOT t.key_parked AND NOT t.floor_held AND t.id <> ALL(p_taken)
                        AND t.not_before <= p_now - make_interval(secs => p_steal_seconds)
                        AND t.id <> ALL(p_own)
                        AND (t.fallback_agent_id IS NULL OR t.fallback_agent_id = ANY(p_agents)
                             OR t.not_before <= p_now - make_interval(secs => p_steal_any_seconds))
                        AND j.target_labels <@ p_labels
                        AND j.executor_kind::text = ANY(p_executors)
                        AND (NOT p_label_bound OR j.target_labels <> '{}'::jsonb)
                        AND (t.rate_class IS NULL OR (t.rate_class = ANY(p_classes) AND NOT EXISTS (
                            SELECT 1 FROM ax.rate_class c
                            WHERE c.name = t.rate_class
                              AND t.priority < coalesce(c.manual_min_priority,
                                                        CASE WHEN c.degraded_since IS NOT NULL THEN c.auto_min_priority END))))
                      ORDER BY t.not_before
                      LIMIT p_room) u
                  ORDER BY u.not_before
                  LIMIT p_room) x
            GROUP BY x.pool_id;
        END IF;
    END IF;
END $$;

--
-- Name: lease_pools(jsonb, text[], boolean, text[]); Type: FUNCTION; Schema: ax; Owner: -
--

CREATE FUNCTION ax.lease_pools(labels jsonb, executors text[], label_bound boolean, classes text[]) RETURNS SETOF integer
    LANGUAGE plpgsql STABLE ROWS 4
    AS $$
BEGIN
    RETURN QUERY
    SELECT p.id FROM ax.task_pool p
    WHERE p.labels_digest = md5('{}')::uuid AND NOT label_bound
      AND p.executor_kind::text = ANY(executors)
      AND (p.rate_class IS NULL OR p.rate_class = ANY(classes))
    UNION
    SELECT m.id
    FROM jsonb_each(labels) l
    CROSS JOIN LATERAL (SELECT p.id FROM ax.task_pool p
                        WHERE p.target_labels @> jsonb_build_object(l.key, l.value)
                          AND p.target_labels <@ labels
                          AND p.executor_kind::text = ANY(executors)
                          AND (p.rate_class IS NULL OR p.rate_class = ANY(classes))
                        -- Not flattened: joined, the planner guessed one
                        -- pool for <@ and read them all.
                        OFFSET 0) m;
END $$;

--
-- Name: uuid_v7(); Type: FUNCTION; Schema: ax; Owner: -
--

CREATE FUNCTION ax.uuid_v7() RETURNS uuid
    LANGUAGE sql PARALLEL SAFE
    AS $$
    SELECT encode(set_bit(set_bit(overlay(uuid_send(gen_random_uuid())
               PLACING substring(int8send(floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint) FROM 3)
               FROM 1 FOR 6), 52, 1), 53, 1), 'hex')::uuid
$$;

--
-- Name: execution; Type: TABLE; Schema: ax; Owner: -
--

CREATE TABLE ax.execution (
    id uuid DEFAULT ax.uuid_v7() NOT NULL,
    job_id uuid NOT NULL,
    cause ax.execution_cause NOT NULL,
    scheduled_for timestamp with time zone NOT NULL,
    fired_at timestamp with time zone DEFAULT now() NOT NULL,
    misfired boolean DEFAULT false NOT NULL,
    state ax.execution_state DEFAULT 'pending'::ax.execution_state NOT NULL,
    params jsonb DEFAULT '{}'::jsonb NOT NULL,
    shard_count integer NOT NULL,
    priority integer NOT NULL,
    started_at timestamp with time zone,
    finished_at timestamp with time zone,
    cancel_requested_at timestamp with time zone,
    cancel_reason text,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    error text,
    traceparent text,
    trigger_index smallint,
    CONSTRAINT execution_finished_when_final CHECK (((state = ANY (ARRAY['pending'::ax.execution_state, 'running'::ax.execution_state])) = (finished_at IS NULL))),
    CONSTRAINT execution_params_is_object CHECK ((jsonb_typeof(params) = 'object'::text)),
    CONSTRAINT execution_shard_count_range CHECK (((shard_count >= 1) AND (shard_count <= 10000))),
    CONSTRAINT execution_traceparent_format CHECK (((length(traceparent) = 55) AND (traceparent ~ '^00-[0-9a-f]*-[0-9a-f]*-[0-9a-f]*$'::text) AND (substr(traceparent, 36, 1) = '-'::text) AND (substr(traceparent, 53, 1) = '-'::text)))
)
WITH (fillfactor='50');

--
-- Name: leased_runs(uuid[]); Type: FUNCTION; Schema: ax; Owner: -
--

CREATE FUNCTION ax.leased_runs(p_ids uuid[]) RETURNS SETOF ax.execution
    LANGUAGE plpgsql STABLE
    AS $$
BEGIN
    RETURN QUERY
    SELECT e.*
    FROM ax.execution e
    WHERE e.id = ANY(p_ids);
END $$;

--
-- Name: longest_retention(); Type: FUNCTION; Schema: ax; Owner: -
--

CREATE FUNCTION ax.longest_retention() RETURNS interval
    LANGUAGE sql STABLE
    AS $$
    SELECT greatest(s.finished_retention, s.failed_retention,
                    coalesce((SELECT make_interval(secs => max(greatest(coalesce(j.history_retention_seconds, 0),
                                                                   coalesce(j.history_failed_retention_seconds, 0))))
                              FROM ax.job j), interval '0'))
    FROM ax.history_setting s
$$;

--
-- Name: notice_target; Type: TABLE; Schema: ax; Owner: -
--

CREATE TABLE ax.notice_target (
    id bigint NOT NULL,
    job_id uuid NOT NULL,
    "position" integer NOT NULL,
    kind ax.notice_kind NOT NULL,
    url text NOT NULL,
    events ax.notice_event[] NOT NULL,
    incident_open boolean DEFAULT false NOT NULL,
    incident_since timestamp with time zone,
    failed_runs integer DEFAULT 0 NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT notice_target_incident CHECK ((incident_open = (incident_since IS NOT NULL))),
    CONSTRAINT notice_target_position CHECK ((("position" >= 0) AND ("position" <= 9))),
    CONSTRAINT notice_target_url_length CHECK (((length(url) >= 1) AND (length(url) <= 2048)))
);

--
-- Name: notice_add(ax.notice_target, ax.notice_event, uuid, text, integer); Type: FUNCTION; Schema: ax; Owner: -
--

CREATE FUNCTION ax.notice_add(p_target ax.notice_target, p_event ax.notice_event, p_execution uuid, p_detail text, p_failed_runs integer) RETURNS void
    LANGUAGE plpgsql
    AS $$
DECLARE
    per_minute integer;
    sent       integer;
    last_sent  bigint;
    newest     ax.notice;
    held       integer;
BEGIN
    IF NOT (p_event = ANY(p_target.events)) THEN
        RETURN;
    END IF;
    SELECT s.per_minute INTO per_minute FROM ax.notice_setting s;
    SELECT count(*) INTO sent
    FROM (SELECT n.created_at FROM ax.notice n
          WHERE n.url = p_target.url AND n.state <> 'rate_limited'
          ORDER BY n.id DESC LIMIT per_minute) r
    WHERE r.created_at > now() - interval '1 minute';
    SELECT max(n.id) INTO last_sent
    FROM ax.notice n WHERE n.url = p_target.url AND n.state <> 'rate_limited';
    SELECT * INTO newest
    FROM ax.notice n WHERE n.url = p_target.url AND n.state = 'rate_limited'
    ORDER BY n.id DESC LIMIT 1;
    held := CASE WHEN newest.id > coalesce(last_sent, 0) THEN newest.coalesced + 1 ELSE 0 END;
    IF sent >= per_minute THEN
        INSERT INTO ax.notice (job_id, target_id, url, event, execution_id, detail, failed_runs, coalesced, state)
        VALUES (p_target.job_id, p_target.id, p_target.url, p_event, p_execution, left(p_detail, 1000),
                p_failed_runs, held, 'rate_limited');
        RETURN;
    END IF;
    INSERT INTO ax.notice (job_id, target_id, url, event, execution_id, detail, failed_runs, coalesced)
    VALUES (p_target.job_id, p_target.id, p_target.url, p_event, p_execution, left(p_detail, 1000),
            p_failed_runs, held);
END $$;

--
-- Name: notice_callback_failed(); Type: FUNCTION; Schema: ax; Owner: -
--

CREATE FUNCTION ax.notice_callback_failed() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
DECLARE
    t ax.notice_target;
BEGIN
    FOR t IN SELECT * FROM ax.notice_target nt WHERE nt.job_id = NEW.job_id ORDER BY nt.id
    LOOP
        PERFORM ax.notice_add(t, 'callback_failed', NEW.execution_id, coalesce(NEW.last_error, ''), 0);
    END LOOP;
    RETURN NULL;
END $$;

--
-- Name: notice_execution_ended(); Type: FUNCTION; Schema: ax; Owner: -
--

CREATE FUNCTION ax.notice_execution_ended() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
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

--
-- Name: notice_history_inserted(); Type: FUNCTION; Schema: ax; Owner: -
--

CREATE FUNCTION ax.notice_history_inserted() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
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

--
-- Name: notice_runs_ended(uuid[], uuid[], text[], text[]); Type: FUNCTION; Schema: ax; Owner: -
--

CREATE FUNCTION ax.notice_runs_ended(p_ids uuid[], p_jobs uuid[], p_states text[], p_errors text[]) RETURNS void
    LANGUAGE plpgsql
    AS $$
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

--
-- Name: notice_trigger_set_aside(); Type: FUNCTION; Schema: ax; Owner: -
--

CREATE FUNCTION ax.notice_trigger_set_aside() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
DECLARE
    t ax.notice_target;
BEGIN
    FOR t IN SELECT * FROM ax.notice_target nt WHERE nt.job_id = NEW.job_id ORDER BY nt.id
    LOOP
        PERFORM ax.notice_add(t, 'set_aside', NULL, coalesce(NEW.set_aside_reason, ''), 0);
    END LOOP;
    RETURN NULL;
END $$;

--
-- Name: queued_run_after_end(); Type: FUNCTION; Schema: ax; Owner: -
--

CREATE FUNCTION ax.queued_run_after_end() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
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

--
-- Name: queued_run_release(uuid[]); Type: FUNCTION; Schema: ax; Owner: -
--

CREATE FUNCTION ax.queued_run_release(p_job_ids uuid[]) RETURNS integer
    LANGUAGE plpgsql
    AS $$
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

--
-- Name: rate_class_groups_in_use(); Type: FUNCTION; Schema: ax; Owner: -
--

CREATE FUNCTION ax.rate_class_groups_in_use() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
DECLARE
    outside text;
BEGIN
    PERFORM 1 FROM ax.rate_class c WHERE c.name = OLD.name FOR UPDATE NOWAIT;
    SELECT j.group_name INTO outside FROM ax.job j
    WHERE j.rate_limit_class = OLD.name AND NOT j.group_name = ANY(NEW.groups)
    LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'jobs of group % name rate class %', outside, OLD.name
            USING ERRCODE = 'check_violation', CONSTRAINT = 'rate_class_groups_in_use',
                  DETAIL = format('group %s', outside);
    END IF;
    RETURN NEW;
END $$;

--
-- Name: rate_class_loosened(); Type: FUNCTION; Schema: ax; Owner: -
--

CREATE FUNCTION ax.rate_class_loosened() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    PERFORM pg_notify('ax_task_ready', '');
    RETURN NULL;
END $$;

--
-- Name: retention_bound(text, timestamp with time zone); Type: FUNCTION; Schema: ax; Owner: -
--

CREATE FUNCTION ax.retention_bound(p_table text, p_at timestamp with time zone) RETURNS text
    LANGUAGE sql STABLE
    AS $$
    SELECT CASE WHEN p_table = 'skipped_fire' THEN quote_literal(p_at::text)
                ELSE quote_literal(ax.uuid_v7_floor(p_at)::text) END
$$;

--
-- Name: retention_extend(text, timestamp with time zone); Type: FUNCTION; Schema: ax; Owner: -
--

CREATE FUNCTION ax.retention_extend(p_table text, p_now timestamp with time zone) RETURNS integer
    LANGUAGE plpgsql
    AS $$
DECLARE
    width  interval;
    key    text := CASE WHEN p_table = 'skipped_fire' THEN 'recorded_at' ELSE 'execution_id' END;
    spill  text := p_table || '_p_spill';
    horizon timestamptz;
    cut    timestamptz;
    lo     timestamptz;
    hi     timestamptz;
    name   text;
    names  text[] := '{}';
    los    timestamptz[] := '{}';
    his    timestamptz[] := '{}';
    lagged boolean;
BEGIN
    -- One maker at a time (replicas starting together, maintenance): the
    -- second sees the horizon the first moved.
    SELECT partition_width INTO width FROM ax.history_setting FOR UPDATE;
    horizon := ax.retention_spill_from(p_table);
    cut := horizon;
    WHILE cut < p_now + 2 * width LOOP
        cut := cut + width;
    END LOOP;
    IF cut = horizon THEN
        RETURN 0;
    END IF;
    EXECUTE format('SELECT EXISTS (SELECT 1 FROM ax.%I WHERE %I < %s)', spill, key, ax.retention_bound(p_table, cut))
    INTO lagged;
    IF lagged THEN
        name := p_table || '_p' || to_char(horizon AT TIME ZONE 'UTC', 'YYYYMMDD"t"HH24MISS');
        EXECUTE format('CREATE TABLE ax.%I (LIKE ax.%I INCLUDING DEFAULTS INCLUDING CONSTRAINTS)', p_table || '_p_next', p_table);
        EXECUTE format('ALTER TABLE ax.%I DETACH PARTITION ax.%I', p_table, spill);
        EXECUTE format('INSERT INTO ax.%I SELECT * FROM ax.%I WHERE %I >= %s',
                       p_table || '_p_next', spill, key, ax.retention_bound(p_table, cut));
        EXECUTE format('DELETE FROM ax.%I WHERE %I >= %s', spill, key, ax.retention_bound(p_table, cut));
        EXECUTE format('ALTER TABLE ax.%I RENAME TO %I', spill, name);
        EXECUTE format('ALTER TABLE ax.%I ATTACH PARTITION ax.%I FOR VALUES FROM (%s) TO (%s)',
                       p_table, name, ax.retention_bound(p_table, horizon), ax.retention_bound(p_table, cut));
        EXECUTE format('ALTER TABLE ax.%I RENAME TO %I', p_table || '_p_next', spill);
        EXECUTE format('ALTER TABLE ax.%I ATTACH PARTITION ax.%I FOR VALUES FROM (%s) TO (MAXVALUE)',
                       p_table, spill, ax.retention_bound(p_table, cut));
        RETURN 1;
    END IF;
    lo := horizon;
    WHILE lo < cut LOOP
        hi := lo + width;
        -- A long passed stretch in one partition.
        IF lo = horizon AND cut - horizon > 100 * width THEN
            hi := cut - 3 * width;
        END IF;
        name := p_table || '_p' || to_char(lo AT TIME ZONE 'UTC', 'YYYYMMDD"t"HH24MISS');
        EXECUTE format('CREATE TABLE ax.%I (LIKE ax.%I INCLUDING DEFAULTS INCLUDING CONSTRAINTS)', name, p_table);
        names := names || name;
        los := los || lo;
        his := his || hi;
        lo := hi;
    END LOOP;
    EXECUTE format('ALTER TABLE ax.%I ADD CONSTRAINT %I CHECK (%I >= %s)',
                   spill, spill || '_from', key, ax.retention_bound(p_table, cut));
    EXECUTE format('ALTER TABLE ax.%I DETACH PARTITION ax.%I', p_table, spill);
    FOR i IN 1 .. cardinality(names) LOOP
        EXECUTE format('ALTER TABLE ax.%I ATTACH PARTITION ax.%I FOR VALUES FROM (%s) TO (%s)',
                       p_table, names[i], ax.retention_bound(p_table, los[i]), ax.retention_bound(p_table, his[i]));
    END LOOP;
    EXECUTE format('ALTER TABLE ax.%I ATTACH PARTITION ax.%I FOR VALUES FROM (%s) TO (MAXVALUE)',
                   p_table, spill, ax.retention_bound(p_table, cut));
    EXECUTE format('ALTER TABLE ax.%I DROP CONSTRAINT %I', spill, spill || '_from');
    RETURN cardinality(names);
END $$;

--
-- Name: retention_spill_from(text); Type: FUNCTION; Schema: ax; Owner: -
--

CREATE FUNCTION ax.retention_spill_from(p_table text) RETURNS timestamp with time zone
    LANGUAGE plpgsql STABLE
    AS $$
DECLARE
    b text;
BEGIN
    SELECT (regexp_match(pg_get_expr(c.relpartbound, c.oid), 'FROM \(''([^'']+)''\)'))[1] INTO b
    FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE n.nspname = 'ax' AND c.relname = p_table || '_p_spill' AND c.relispartition;
    IF b IS NULL THEN
        RAISE EXCEPTION 'ax.% has no spill partition', p_table;
    END IF;
    RETURN CASE WHEN p_table = 'skipped_fire' THEN b::timestamptz ELSE ax.uuid_v7_time(b::uuid) END;
END $$;

--
-- Name: river_job_state_in_bitmask(bit, ax.river_job_state); Type: FUNCTION; Schema: ax; Owner: -
--

CREATE FUNCTION ax.river_job_state_in_bitmask(bitmask bit, state ax.river_job_state) RETURNS boolean
    LANGUAGE sql IMMUTABLE
    AS $$
    SELECT CASE state
        WHEN 'available' THEN get_bit(bitmask, 7)
        WHEN 'cancelled' THEN get_bit(bitmask, 6)
        WHEN 'completed' THEN get_bit(bitmask, 5)
        WHEN 'discarded' THEN get_bit(bitmask, 4)
        WHEN 'pending'   THEN get_bit(bitmask, 3)
        WHEN 'retryable' THEN get_bit(bitmask, 2)
        WHEN 'running'   THEN get_bit(bitmask, 1)
        WHEN 'scheduled' THEN get_bit(bitmask, 0)
        ELSE 0
    END = 1;
$$;

--
-- Name: task_pool_default(); Type: FUNCTION; Schema: ax; Owner: -
--

CREATE FUNCTION ax.task_pool_default() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    SELECT CASE WHEN NEW.agentless THEN -1 ELSE ax.task_pool_for(j.target_labels, j.executor_kind, NEW.rate_class) END
    INTO NEW.pool_id
    FROM ax.job j WHERE j.id = NEW.job_id;
    NEW.pool_id := coalesce(NEW.pool_id, 0);
    RETURN NEW;
END $$;

--
-- Name: task_pool_for(jsonb, ax.executor_kind, text); Type: FUNCTION; Schema: ax; Owner: -
--

CREATE FUNCTION ax.task_pool_for(labels jsonb, kind ax.executor_kind, class text) RETURNS integer
    LANGUAGE plpgsql
    AS $$
DECLARE
    pid integer;
    digest uuid := md5(labels::text)::uuid;
BEGIN
    LOOP
        SELECT p.id INTO pid FROM ax.task_pool p
        WHERE p.labels_digest = digest AND p.executor_kind = kind AND coalesce(p.rate_class, '') = coalesce(class, '');
        IF FOUND THEN
            RETURN pid;
        END IF;
        INSERT INTO ax.task_pool (target_labels, executor_kind, labels_digest, rate_class)
        VALUES (labels, kind, digest, class)
        ON CONFLICT DO NOTHING
        RETURNING id INTO pid;
        IF pid IS NOT NULL THEN
            RETURN pid;
        END IF;
    END LOOP;
END $$;

--
-- Name: task_result; Type: VIEW; Schema: ax; Owner: -
--

CREATE VIEW ax.task_result AS
 SELECT NULL::uuid AS id,
    NULL::uuid AS token,
    NULL::text AS state,
    NULL::jsonb AS result,
    NULL::text AS error,
    NULL::text AS error_code
  WHERE false;

--
-- Name: task_results(uuid[], uuid[], text[], jsonb[], text[], text[]); Type: FUNCTION; Schema: ax; Owner: -
--

CREATE FUNCTION ax.task_results(p_ids uuid[], p_tokens uuid[], p_states text[], p_results jsonb[], p_errors text[], p_codes text[]) RETURNS SETOF ax.task_result
    LANGUAGE plpgsql STABLE
    AS $$
BEGIN
    RETURN QUERY
    SELECT DISTINCT ON (x.id) x.id, x.token, x.state, x.result, x.error, x.error_code
    FROM unnest(p_ids, p_tokens, p_states, p_results, p_errors, p_codes)
         WITH ORDINALITY AS x(id, token, state, result, error, error_code, n)
    ORDER BY x.id, x.n;
END $$;

--
-- Name: uuid_v7_floor(timestamp with time zone); Type: FUNCTION; Schema: ax; Owner: -
--

CREATE FUNCTION ax.uuid_v7_floor(p_at timestamp with time zone) RETURNS uuid
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$
    SELECT (lpad(to_hex(floor(extract(epoch FROM p_at) * 1000)::bigint), 12, '0') || '00000000000000000000')::uuid
$$;

--
-- Name: uuid_v7_time(uuid); Type: FUNCTION; Schema: ax; Owner: -
--

CREATE FUNCTION ax.uuid_v7_time(p_id uuid) RETURNS timestamp with time zone
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$
    SELECT timestamptz 'epoch'
           + ('x' || lpad(left(replace(p_id::text, '-', ''), 12), 16, '0'))::bit(64)::bigint * interval '1 millisecond'
$$;

--
-- Name: after_edge; Type: TABLE; Schema: ax; Owner: -
--

CREATE TABLE ax.after_edge (
    job_id uuid NOT NULL,
    upstream_job_id uuid NOT NULL,
    "position" integer NOT NULL,
    on_state text DEFAULT 'success'::text NOT NULL,
    CONSTRAINT after_edge_not_self CHECK ((job_id <> upstream_job_id)),
    CONSTRAINT after_edge_on_known CHECK ((on_state = ANY (ARRAY['success'::text, 'failure'::text, 'completion'::text])))
);

--
-- Name: after_trigger; Type: TABLE; Schema: ax; Owner: -
--

CREATE TABLE ax.after_trigger (
    job_id uuid NOT NULL,
    mode text DEFAULT 'all'::text NOT NULL,
    CONSTRAINT after_trigger_mode_known CHECK ((mode = ANY (ARRAY['all'::text, 'any'::text])))
);

--
-- Name: after_wait; Type: TABLE; Schema: ax; Owner: -
--

CREATE TABLE ax.after_wait (
    job_id uuid NOT NULL,
    logical_time timestamp with time zone NOT NULL,
    state text DEFAULT 'waiting'::text NOT NULL,
    arrived jsonb DEFAULT '{}'::jsonb NOT NULL,
    execution_id uuid,
    skip_run uuid,
    cascade_from uuid,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT after_wait_arrived_object CHECK ((jsonb_typeof(arrived) = 'object'::text)),
    CONSTRAINT after_wait_state_known CHECK ((state = ANY (ARRAY['waiting'::text, 'ready'::text, 'fired'::text, 'skipped'::text])))
);

--
-- Name: agent; Type: TABLE; Schema: ax; Owner: -
--

CREATE TABLE ax.agent (
    id uuid NOT NULL,
    name text NOT NULL,
    labels jsonb DEFAULT '{}'::jsonb NOT NULL,
    capacity integer NOT NULL,
    version text DEFAULT ''::text NOT NULL,
    state ax.agent_state DEFAULT 'active'::ax.agent_state NOT NULL,
    ready boolean DEFAULT true NOT NULL,
    api_key_id uuid NOT NULL,
    running integer DEFAULT 0 NOT NULL,
    cpu double precision DEFAULT 0 NOT NULL,
    load1 double precision DEFAULT 0 NOT NULL,
    memory double precision DEFAULT 0 NOT NULL,
    registered_at timestamp with time zone DEFAULT now() NOT NULL,
    last_heartbeat_at timestamp with time zone DEFAULT now() NOT NULL,
    weight integer DEFAULT 1 NOT NULL,
    health_since timestamp with time zone DEFAULT now() NOT NULL,
    quarantined_at timestamp with time zone,
    last_probe_at timestamp with time zone,
    executors text[] DEFAULT '{handler,http}'::text[] NOT NULL,
    registered_by uuid,
    drained_at timestamp with time zone,
    label_bound boolean DEFAULT false NOT NULL,
    load double precision DEFAULT 0 NOT NULL,
    load_at timestamp with time zone,
    disk_free_bytes bigint,
    host_name text DEFAULT ''::text NOT NULL,
    host_ip inet,
    CONSTRAINT agent_capacity_range CHECK (((capacity >= 1) AND (capacity <= 10000))),
    CONSTRAINT agent_disk_free_bytes_nonnegative CHECK ((disk_free_bytes >= 0)),
    CONSTRAINT agent_executors_known CHECK (((cardinality(executors) > 0) AND (executors <@ ARRAY['shell'::text, 'http'::text, 'handler'::text]))),
    CONSTRAINT agent_host_name_length CHECK ((length(host_name) <= 255)),
    CONSTRAINT agent_labels_is_object CHECK ((jsonb_typeof(labels) = 'object'::text)),
    CONSTRAINT agent_quarantined_at_set CHECK (((state <> 'quarantined'::ax.agent_state) OR (quarantined_at IS NOT NULL))),
    CONSTRAINT agent_weight_range CHECK (((weight >= 1) AND (weight <= 1000)))
);

--
-- Name: execution_history; Type: TABLE; Schema: ax; Owner: -
--

CREATE TABLE ax.execution_history (
    id uuid DEFAULT ax.uuid_v7() NOT NULL,
    job_id uuid NOT NULL,
    cause ax.execution_cause NOT NULL,
    scheduled_for timestamp with time zone NOT NULL,
    fired_at timestamp with time zone DEFAULT now() NOT NULL,
    misfired boolean DEFAULT false NOT NULL,
    state ax.execution_state DEFAULT 'pending'::ax.execution_state NOT NULL,
    params jsonb DEFAULT '{}'::jsonb NOT NULL,
    shard_count integer NOT NULL,
    priority integer NOT NULL,
    started_at timestamp with time zone,
    finished_at timestamp with time zone,
    cancel_requested_at timestamp with time zone,
    cancel_reason text,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    error text,
    traceparent text,
    retain_until timestamp with time zone NOT NULL,
    trigger_index smallint,
    CONSTRAINT execution_history_finished CHECK ((finished_at IS NOT NULL))
)
PARTITION BY RANGE (retain_until);

--
-- Name: all_executions; Type: VIEW; Schema: ax; Owner: -
--

CREATE VIEW ax.all_executions AS
 SELECT execution.id,
    execution.job_id,
    execution.cause,
    execution.scheduled_for,
    execution.fired_at,
    execution.misfired,
    execution.state,
    execution.params,
    execution.shard_count,
    execution.priority,
    execution.started_at,
    execution.finished_at,
    execution.cancel_requested_at,
    execution.cancel_reason,
    execution.created_at,
    execution.updated_at,
    execution.error,
    execution.traceparent,
    execution.trigger_index,
    NULL::timestamp with time zone AS retain_until
   FROM ax.execution
UNION ALL
 SELECT execution_history.id,
    execution_history.job_id,
    execution_history.cause,
    execution_history.scheduled_for,
    execution_history.fired_at,
    execution_history.misfired,
    execution_history.state,
    execution_history.params,
    execution_history.shard_count,
    execution_history.priority,
    execution_history.started_at,
    execution_history.finished_at,
    execution_history.cancel_requested_at,
    execution_history.cancel_reason,
    execution_history.created_at,
    execution_history.updated_at,
    execution_history.error,
    execution_history.traceparent,
    execution_history.trigger_index,
    execution_history.retain_until
   FROM ax.execution_history;

--
-- Name: task; Type: TABLE; Schema: ax; Owner: -
--

CREATE TABLE ax.task (
    id uuid DEFAULT ax.uuid_v7() NOT NULL,
    execution_id uuid NOT NULL,
    job_id uuid NOT NULL,
    shard_index integer NOT NULL,
    shard_total integer NOT NULL,
    shard_param text DEFAULT ''::text NOT NULL,
    state ax.task_state DEFAULT 'pending'::ax.task_state NOT NULL,
    priority integer NOT NULL,
    attempt integer DEFAULT 1 NOT NULL,
    max_attempts integer NOT NULL,
    timeout_seconds integer NOT NULL,
    not_before timestamp with time zone DEFAULT now() NOT NULL,
    started_at timestamp with time zone,
    finished_at timestamp with time zone,
    cancel_requested_at timestamp with time zone,
    result jsonb,
    error text,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    agent_id uuid,
    lease_token uuid,
    lease_expires_at timestamp with time zone,
    leased_at timestamp with time zone,
    preferred_agent_id uuid,
    fallback_agent_id uuid,
    pinned boolean DEFAULT false NOT NULL,
    route_key text DEFAULT ''::text NOT NULL,
    rate_class text,
    agentless boolean DEFAULT false NOT NULL,
    log_bytes bigint DEFAULT 0 NOT NULL,
    lost_leases integer DEFAULT 0 NOT NULL,
    error_code text,
    concurrency_scope text,
    concurrency_key text,
    concurrency_limit integer,
    key_parked boolean DEFAULT false NOT NULL,
    worker_host text,
    worker_ip inet,
    lease_event_id bigint,
    end_event_id bigint,
    params_bytes integer,
    no_agent boolean DEFAULT false NOT NULL,
    pool_id integer DEFAULT 0 NOT NULL,
    floor_held boolean DEFAULT false NOT NULL,
    CONSTRAINT task_attempt_range CHECK (((attempt >= 1) AND (attempt <= max_attempts))),
    CONSTRAINT task_concurrency_key_length CHECK ((octet_length(concurrency_key) <= 256)),
    CONSTRAINT task_concurrency_set CHECK ((((concurrency_key IS NULL) = (concurrency_limit IS NULL)) AND ((concurrency_key IS NULL) = (concurrency_scope IS NULL)))),
    CONSTRAINT task_error_code_format CHECK ((error_code ~ '^[a-z0-9_.-]{1,64}$'::text)),
    CONSTRAINT task_lease_consistent CHECK (((state = ANY (ARRAY['leased'::ax.task_state, 'running'::ax.task_state])) = ((lease_token IS NOT NULL) AND (lease_expires_at IS NOT NULL)))),
    CONSTRAINT task_pinned_has_agent CHECK (((NOT pinned) OR (preferred_agent_id IS NOT NULL))),
    CONSTRAINT task_shard_index_range CHECK (((shard_index >= 0) AND (shard_index < shard_total)))
)
WITH (fillfactor='80', autovacuum_vacuum_scale_factor='0.02', autovacuum_vacuum_threshold='1000');

--
-- Name: COLUMN task.no_agent; Type: COMMENT; Schema: ax; Owner: -
--

COMMENT ON COLUMN ax.task.no_agent IS 'parked: no live agent could take the task (labels, executor kind) when it was written; the reaper clears it once one can';

--
-- Name: COLUMN task.pool_id; Type: COMMENT; Schema: ax; Owner: -
--

COMMENT ON COLUMN ax.task.pool_id IS 'its job''s pool (ax.task_pool) when it was written: where a lease looks for it; 0: every lease looks (written by a build before pools), -1: none (agentless)';

--
-- Name: COLUMN task.floor_held; Type: COMMENT; Schema: ax; Owner: -
--

COMMENT ON COLUMN ax.task.floor_held IS 'held: below its rate class''s priority floor when the reaper last looked; out of every lease''s way until the floor lifts';

--
-- Name: task_history; Type: TABLE; Schema: ax; Owner: -
--

CREATE TABLE ax.task_history (
    id uuid DEFAULT ax.uuid_v7() NOT NULL,
    execution_id uuid NOT NULL,
    job_id uuid NOT NULL,
    shard_index integer NOT NULL,
    shard_total integer NOT NULL,
    shard_param text DEFAULT ''::text NOT NULL,
    state ax.task_state DEFAULT 'pending'::ax.task_state NOT NULL,
    priority integer NOT NULL,
    attempt integer DEFAULT 1 NOT NULL,
    max_attempts integer NOT NULL,
    timeout_seconds integer NOT NULL,
    not_before timestamp with time zone DEFAULT now() NOT NULL,
    started_at timestamp with time zone,
    finished_at timestamp with time zone,
    cancel_requested_at timestamp with time zone,
    result jsonb,
    error text,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    agent_id uuid,
    lease_token uuid,
    lease_expires_at timestamp with time zone,
    leased_at timestamp with time zone,
    preferred_agent_id uuid,
    fallback_agent_id uuid,
    pinned boolean DEFAULT false NOT NULL,
    route_key text DEFAULT ''::text NOT NULL,
    rate_class text,
    agentless boolean DEFAULT false NOT NULL,
    log_bytes bigint DEFAULT 0 NOT NULL,
    lost_leases integer DEFAULT 0 NOT NULL,
    error_code text,
    retain_until timestamp with time zone NOT NULL,
    concurrency_scope text,
    concurrency_key text,
    concurrency_limit integer,
    key_parked boolean DEFAULT false NOT NULL,
    worker_host text,
    worker_ip inet,
    lease_event_id bigint,
    end_event_id bigint,
    params_bytes integer,
    no_agent boolean DEFAULT false NOT NULL,
    pool_id integer DEFAULT 0 NOT NULL,
    floor_held boolean DEFAULT false NOT NULL,
    CONSTRAINT task_error_code_format CHECK ((error_code ~ '^[a-z0-9_.-]{1,64}$'::text)),
    CONSTRAINT task_history_finished CHECK ((state <> ALL (ARRAY['pending'::ax.task_state, 'leased'::ax.task_state, 'running'::ax.task_state])))
)
PARTITION BY RANGE (retain_until);

--
-- Name: all_tasks; Type: VIEW; Schema: ax; Owner: -
--

CREATE VIEW ax.all_tasks AS
 SELECT t.id,
    t.execution_id,
    t.job_id,
    t.shard_index,
    t.shard_total,
    t.shard_param,
    t.state,
    t.priority,
    t.attempt,
    t.max_attempts,
    t.timeout_seconds,
    t.not_before,
    t.started_at,
    t.finished_at,
    t.cancel_requested_at,
    t.result,
    t.error,
    t.created_at,
    t.updated_at,
    t.agent_id,
    t.lease_token,
    t.lease_expires_at,
    t.leased_at,
    t.preferred_agent_id,
    t.fallback_agent_id,
    t.pinned,
    t.route_key,
    t.rate_class,
    t.agentless,
    t.log_bytes,
    t.lost_leases,
    t.error_code,
    t.concurrency_scope,
    t.concurrency_key,
    t.concurrency_limit,
    t.key_parked,
    t.worker_host,
    t.worker_ip,
    t.lease_event_id,
    t.end_event_id,
    t.params_bytes,
    t.no_agent,
    t.pool_id,
    t.floor_held,
    NULL::timestamp with time zone AS retain_until
   FROM ax.task t
UNION ALL
 SELECT t.id,
    t.execution_id,
    t.job_id,
    t.shard_index,
    t.shard_total,
    t.shard_param,
    t.state,
    t.priority,
    t.attempt,
    t.max_attempts,
    t.timeout_seconds,
    t.not_before,
    t.started_at,
    t.finished_at,
    t.cancel_requested_at,
    t.result,
    t.error,
    t.created_at,
    t.updated_at,
    t.agent_id,
    t.lease_token,
    t.lease_expires_at,
    t.leased_at,
    t.preferred_agent_id,
    t.fallback_agent_id,
    t.pinned,
    t.route_key,
    t.rate_class,
    t.agentless,
    t.log_bytes,
    t.lost_leases,
    t.error_code,
    t.concurrency_scope,
    t.concurrency_key,
    t.concurrency_limit,
    t.key_parked,
    t.worker_host,
    t.worker_ip,
    t.lease_event_id,
    t.end_event_id,
    t.params_bytes,
    t.no_agent,
    t.pool_id,
    t.floor_held,
    t.retain_until
   FROM ax.task_history t;

--
-- Name: task_event; Type: TABLE; Schema: ax; Owner: -
--

CREATE TABLE ax.task_event (
    id bigint NOT NULL,
    task_id uuid NOT NULL,
    execution_id uuid NOT NULL,
    shard_index integer NOT NULL,
    attempt integer NOT NULL,
    kind ax.task_event_kind NOT NULL,
    state ax.task_state,
    agent_id uuid,
    stream text,
    message text DEFAULT ''::text NOT NULL,
    at timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
    worker_host text,
    worker_ip inet,
    error_code text,
    duration_ms bigint
)
PARTITION BY RANGE (execution_id);

--
-- Name: all_task_events; Type: VIEW; Schema: ax; Owner: -
--

CREATE VIEW ax.all_task_events AS
 SELECT e.id,
    e.task_id,
    e.execution_id,
    e.shard_index,
    e.attempt,
    e.kind,
    e.state,
    e.agent_id,
    e.stream,
    e.message,
    e.at,
    e.worker_host,
    e.worker_ip,
    e.error_code,
    e.duration_ms
   FROM ax.task_event e
UNION ALL
 SELECT t.lease_event_id AS id,
    t.id AS task_id,
    t.execution_id,
    t.shard_index,
    t.attempt,
    'state'::ax.task_event_kind AS kind,
    'leased'::ax.task_state AS state,
    t.agent_id,
    NULL::text AS stream,
    ax.lease_message(t.preferred_agent_id, t.agent_id) AS message,
    t.leased_at AS at,
    t.worker_host,
    t.worker_ip,
    NULL::text AS error_code,
    NULL::bigint AS duration_ms
   FROM ax.all_tasks t
  WHERE (t.lease_event_id IS NOT NULL)
UNION ALL
 SELECT t.end_event_id AS id,
    t.id AS task_id,
    t.execution_id,
    t.shard_index,
    t.attempt,
    'state'::ax.task_event_kind AS kind,
    'succeeded'::ax.task_state AS state,
    t.agent_id,
    NULL::text AS stream,
    COALESCE(t.error, ''::text) AS message,
    t.finished_at AS at,
    t.worker_host,
    t.worker_ip,
    t.error_code,
    ((EXTRACT(epoch FROM (t.finished_at - t.leased_at)) * (1000)::numeric))::bigint AS duration_ms
   FROM ax.all_tasks t
  WHERE (t.end_event_id IS NOT NULL);

--
-- Name: api_key; Type: TABLE; Schema: ax; Owner: -
--

CREATE TABLE ax.api_key (
    id uuid DEFAULT gen_random_uuid() NOT NULL,
    name text NOT NULL,
    key_hash bytea NOT NULL,
    key_prefix text NOT NULL,
    scopes ax.api_scope[] NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    last_used_at timestamp with time zone,
    revoked_at timestamp with time zone,
    labels jsonb,
    groups text[],
    minted_by uuid,
    CONSTRAINT api_key_groups_not_empty CHECK (((groups IS NULL) OR (cardinality(groups) > 0))),
    CONSTRAINT api_key_has_scope CHECK ((cardinality(scopes) > 0)),
    CONSTRAINT api_key_labels_is_object CHECK (((labels IS NULL) OR (jsonb_typeof(labels) = 'object'::text)))
);

--
-- Name: api_signing_key; Type: TABLE; Schema: ax; Owner: -
--

CREATE TABLE ax.api_signing_key (
    id uuid NOT NULL,
    api_key_id uuid NOT NULL,
    secret bytea NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    revoked_at timestamp with time zone,
    CONSTRAINT api_signing_key_secret_size CHECK ((length(secret) = 32))
);

--
-- Name: backfill; Type: TABLE; Schema: ax; Owner: -
--

CREATE TABLE ax.backfill (
    id uuid DEFAULT ax.uuid_v7() NOT NULL,
    job_id uuid NOT NULL,
    range_from timestamp with time zone NOT NULL,
    range_to timestamp with time zone NOT NULL,
    max_concurrent integer DEFAULT 1 NOT NULL,
    overlap text DEFAULT 'allow'::text NOT NULL,
    state text DEFAULT 'running'::text NOT NULL,
    next_tick timestamp with time zone NOT NULL,
    ticks_total integer NOT NULL,
    ticks_created integer DEFAULT 0 NOT NULL,
    ticks_existing integer DEFAULT 0 NOT NULL,
    request_key text,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    finished_at timestamp with time zone,
    CONSTRAINT backfill_counts CHECK (((ticks_total >= 0) AND (ticks_created >= 0) AND (ticks_existing >= 0))),
    CONSTRAINT backfill_finished_when_final CHECK (((state = 'running'::text) = (finished_at IS NULL))),
    CONSTRAINT backfill_max_concurrent_range CHECK (((max_concurrent >= 1) AND (max_concurrent <= 1000))),
    CONSTRAINT backfill_overlap_known CHECK ((overlap = ANY (ARRAY['allow'::text, 'forbid'::text]))),
    CONSTRAINT backfill_range_order CHECK ((range_from < range_to)),
    CONSTRAINT backfill_request_key_length CHECK (((length(request_key) >= 1) AND (length(request_key) <= 255))),
    CONSTRAINT backfill_state_known CHECK ((state = ANY (ARRAY['running'::text, 'finished'::text, 'cancelled'::text])))
);

--
-- Name: backfill_run; Type: TABLE; Schema: ax; Owner: -
--

CREATE TABLE ax.backfill_run (
    execution_id uuid NOT NULL,
    backfill_id uuid NOT NULL,
    tick timestamp with time zone NOT NULL
);

--
-- Name: calendar; Type: TABLE; Schema: ax; Owner: -
--

CREATE TABLE ax.calendar (
    name text NOT NULL,
    description text DEFAULT ''::text NOT NULL,
    timezone text NOT NULL,
    entries jsonb DEFAULT '[]'::jsonb NOT NULL,
    version bigint DEFAULT 1 NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT calendar_description_length CHECK ((length(description) <= 1000)),
    CONSTRAINT calendar_entries_bounds CHECK (((jsonb_typeof(entries) = 'array'::text) AND (jsonb_array_length(entries) <= 1000))),
    CONSTRAINT calendar_name_format CHECK ((name ~ '^[a-z0-9][a-z0-9._-]{0,62}$'::text))
);

--
-- Name: callback; Type: TABLE; Schema: ax; Owner: -
--

CREATE TABLE ax.callback (
    execution_id uuid NOT NULL,
    job_id uuid NOT NULL,
    state ax.callback_state DEFAULT 'pending'::ax.callback_state NOT NULL,
    delivery integer DEFAULT 1 NOT NULL,
    attempts integer DEFAULT 0 NOT NULL,
    last_status integer,
    last_error text,
    next_attempt_at timestamp with time zone,
    enqueued_at timestamp with time zone,
    delivered_at timestamp with time zone,
    failed_at timestamp with time zone,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    sequence bigint,
    CONSTRAINT callback_counts_positive CHECK (((delivery >= 1) AND (attempts >= 0))),
    CONSTRAINT callback_delivered_at_set CHECK (((state = 'delivered'::ax.callback_state) = (delivered_at IS NOT NULL))),
    CONSTRAINT callback_failed_at_set CHECK (((state = 'callback_failed'::ax.callback_state) = (failed_at IS NOT NULL)))
)
PARTITION BY RANGE (execution_id);

--
-- Name: callback_attempt; Type: TABLE; Schema: ax; Owner: -
--

CREATE TABLE ax.callback_attempt (
    id bigint NOT NULL,
    execution_id uuid NOT NULL,
    delivery integer NOT NULL,
    attempt integer NOT NULL,
    url text NOT NULL,
    at timestamp with time zone NOT NULL,
    status_code integer,
    latency_ms double precision NOT NULL,
    error text DEFAULT ''::text NOT NULL,
    CONSTRAINT callback_attempt_number_positive CHECK (((delivery >= 1) AND (attempt >= 1)))
)
PARTITION BY RANGE (execution_id);

--
-- Name: callback_attempt_id_seq; Type: SEQUENCE; Schema: ax; Owner: -
--

CREATE SEQUENCE ax.callback_attempt_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

--
-- Name: callback_attempt_id_seq; Type: SEQUENCE OWNED BY; Schema: ax; Owner: -
--

ALTER SEQUENCE ax.callback_attempt_id_seq OWNED BY ax.callback_attempt.id;

--
-- Name: callback_breaker; Type: TABLE; Schema: ax; Owner: -
--

CREATE TABLE ax.callback_breaker (
    host text NOT NULL,
    state ax.breaker_state DEFAULT 'closed'::ax.breaker_state NOT NULL,
    consecutive_failures integer DEFAULT 0 NOT NULL,
    opened_at timestamp with time zone,
    open_until timestamp with time zone,
    probe_started_at timestamp with time zone,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT callback_breaker_open_has_until CHECK (((state = 'closed'::ax.breaker_state) = (open_until IS NULL))),
    CONSTRAINT callback_breaker_probe_when_half_open CHECK (((state = 'half_open'::ax.breaker_state) = (probe_started_at IS NOT NULL)))
);

--
-- Name: callback_sequence; Type: TABLE; Schema: ax; Owner: -
--

CREATE TABLE ax.callback_sequence (
    job_id uuid NOT NULL,
    last_sequence bigint NOT NULL,
    CONSTRAINT callback_sequence_positive CHECK ((last_sequence >= 1))
);

--
-- Name: callbacks_failed; Type: VIEW; Schema: ax; Owner: -
--

CREATE VIEW ax.callbacks_failed AS
 SELECT j.group_name,
    j.name,
    c.execution_id,
    c.attempts,
    c.last_status,
    c.last_error,
    c.failed_at
   FROM (ax.callback c
     JOIN ax.job j ON ((j.id = c.job_id)))
  WHERE (c.state = 'callback_failed'::ax.callback_state)
  ORDER BY c.failed_at DESC;

--
-- Name: callbacks_failing; Type: VIEW; Schema: ax; Owner: -
--

CREATE VIEW ax.callbacks_failing AS
 SELECT j.group_name,
    j.name,
    c.execution_id,
    c.state,
    c.attempts,
    c.last_status,
    c.last_error,
    c.next_attempt_at,
    c.failed_at,
    c.updated_at
   FROM (ax.callback c
     JOIN ax.job j ON ((j.id = c.job_id)))
  WHERE ((c.state = 'callback_failed'::ax.callback_state) OR ((c.state = 'pending'::ax.callback_state) AND (c.attempts > 0)))
  ORDER BY c.updated_at DESC;

--
-- Name: concurrency_key_freed; Type: TABLE; Schema: ax; Owner: -
--

CREATE TABLE ax.concurrency_key_freed (
    id bigint NOT NULL,
    concurrency_scope text NOT NULL,
    concurrency_key text NOT NULL
);

--
-- Name: concurrency_key_freed_id_seq; Type: SEQUENCE; Schema: ax; Owner: -
--

ALTER TABLE ax.concurrency_key_freed ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME ax.concurrency_key_freed_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

--
-- Name: console_session; Type: TABLE; Schema: ax; Owner: -
--

CREATE TABLE ax.console_session (
    id_hash bytea NOT NULL,
    key_id uuid NOT NULL,
    csrf text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    last_seen_at timestamp with time zone DEFAULT now() NOT NULL,
    expires_at timestamp with time zone NOT NULL,
    ends_at timestamp with time zone NOT NULL,
    CONSTRAINT console_session_expires_within CHECK ((expires_at <= ends_at)),
    CONSTRAINT console_session_id_hash_len CHECK ((octet_length(id_hash) = 32))
);

--
-- Name: declaration_set; Type: TABLE; Schema: ax; Owner: -
--

CREATE TABLE ax.declaration_set (
    managed_by text NOT NULL,
    version text DEFAULT ''::text NOT NULL,
    source text DEFAULT ''::text NOT NULL,
    jobs integer DEFAULT 0 NOT NULL,
    applied_at timestamp with time zone DEFAULT now() NOT NULL,
    conflict_version text,
    conflict_source text,
    conflict_reason text,
    conflict_at timestamp with time zone,
    owned boolean DEFAULT false NOT NULL,
    owner_groups text[],
    CONSTRAINT declaration_set_conflict_complete CHECK (((conflict_at IS NULL) = (conflict_reason IS NULL))),
    CONSTRAINT declaration_set_owner_when_owned CHECK ((owned OR (owner_groups IS NULL)))
);

--
-- Name: trigger; Type: TABLE; Schema: ax; Owner: -
--

CREATE TABLE ax.trigger (
    job_id uuid NOT NULL,
    next_fire_at timestamp with time zone,
    paused boolean DEFAULT false NOT NULL,
    paused_at timestamp with time zone,
    last_fire_at timestamp with time zone,
    last_scheduled_for timestamp with time zone,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    last_execution_id uuid,
    set_aside_at timestamp with time zone,
    set_aside_reason text,
    paused_reason text,
    CONSTRAINT trigger_paused_at_set CHECK ((paused = (paused_at IS NOT NULL))),
    CONSTRAINT trigger_paused_reason_when_paused CHECK (((paused_reason IS NULL) OR paused)),
    CONSTRAINT trigger_set_aside_has_reason CHECK (((set_aside_at IS NULL) = (set_aside_reason IS NULL)))
)
WITH (fillfactor='70', autovacuum_vacuum_scale_factor='0.01', autovacuum_vacuum_threshold='1000');

--
-- Name: declared_jobs; Type: VIEW; Schema: ax; Owner: -
--

CREATE VIEW ax.declared_jobs AS
 SELECT j.managed_by,
    j.group_name,
    j.name,
    j.declared_version,
    s.version AS set_version,
    j.declared_in,
    t.paused,
    t.paused_reason,
    s.conflict_version,
    s.conflict_reason,
    s.conflict_at
   FROM ((ax.job j
     JOIN ax.trigger t ON ((t.job_id = j.id)))
     LEFT JOIN ax.declaration_set s ON ((s.managed_by = j.managed_by)))
  WHERE (j.managed_by IS NOT NULL)
  ORDER BY j.managed_by, j.group_name, j.name;

--
-- Name: delayed_run; Type: TABLE; Schema: ax; Owner: -
--

CREATE TABLE ax.delayed_run (
    id uuid NOT NULL,
    job_id uuid NOT NULL,
    run_at timestamp with time zone NOT NULL,
    params jsonb,
    priority integer,
    traceparent text DEFAULT ''::text NOT NULL,
    held boolean DEFAULT false NOT NULL,
    cancelled_at timestamp with time zone,
    cancel_reason text,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT delayed_run_cancel_has_reason CHECK (((cancelled_at IS NULL) = (cancel_reason IS NULL))),
    CONSTRAINT delayed_run_params_is_object CHECK (((params IS NULL) OR (jsonb_typeof(params) = 'object'::text)))
)
WITH (fillfactor='90');

--
-- Name: due_now; Type: VIEW; Schema: ax; Owner: -
--

CREATE VIEW ax.due_now AS
 SELECT j.id AS job_id,
    j.group_name,
    j.name,
    t.next_fire_at,
    (now() - t.next_fire_at) AS overdue_by
   FROM (ax.trigger t
     JOIN ax.job j ON ((j.id = t.job_id)))
  WHERE ((t.next_fire_at <= now()) AND (NOT t.paused) AND (t.set_aside_at IS NULL))
  ORDER BY t.next_fire_at;

--
-- Name: execution_rerun; Type: TABLE; Schema: ax; Owner: -
--

CREATE TABLE ax.execution_rerun (
    execution_id uuid NOT NULL,
    rerun_of uuid NOT NULL,
    request_key text NOT NULL,
    shards text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    cascade boolean DEFAULT false NOT NULL,
    cascade_root uuid,
    CONSTRAINT execution_rerun_request_key_length CHECK (((length(request_key) >= 1) AND (length(request_key) <= 255))),
    CONSTRAINT execution_rerun_shards_known CHECK ((shards = ANY (ARRAY['all'::text, 'failed'::text])))
);

--
-- Name: executions_by_state; Type: VIEW; Schema: ax; Owner: -
--

CREATE VIEW ax.executions_by_state AS
 SELECT all_executions.state,
    count(*) FILTER (WHERE (all_executions.fired_at >= (date_trunc('day'::text, (now() AT TIME ZONE 'UTC'::text)) AT TIME ZONE 'UTC'::text))) AS today,
    count(*) AS total
   FROM ax.all_executions
  GROUP BY all_executions.state
  ORDER BY all_executions.state;

--
-- Name: history_drop; Type: TABLE; Schema: ax; Owner: -
--

CREATE TABLE ax.history_drop (
    id bigint NOT NULL,
    table_name text NOT NULL,
    range_from timestamp with time zone NOT NULL,
    range_to timestamp with time zone NOT NULL,
    row_count bigint NOT NULL,
    min_id uuid,
    max_id uuid,
    dropped_at timestamp with time zone DEFAULT now() NOT NULL
);

--
-- Name: history_drop_id_seq; Type: SEQUENCE; Schema: ax; Owner: -
--

ALTER TABLE ax.history_drop ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME ax.history_drop_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

--
-- Name: history_setting; Type: TABLE; Schema: ax; Owner: -
--

CREATE TABLE ax.history_setting (
    singleton boolean DEFAULT true NOT NULL,
    finished_retention interval DEFAULT '7 days'::interval NOT NULL,
    failed_retention interval DEFAULT '30 days'::interval NOT NULL,
    partition_width interval DEFAULT '1 day'::interval NOT NULL,
    made_until timestamp with time zone DEFAULT '-infinity'::timestamp with time zone NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT history_setting_retention_positive CHECK (((finished_retention > '00:00:00'::interval) AND (failed_retention > '00:00:00'::interval))),
    CONSTRAINT history_setting_singleton CHECK (singleton),
    CONSTRAINT history_setting_width_range CHECK (((partition_width >= '00:00:01'::interval) AND (partition_width <= '7 days'::interval)))
);

--
-- Name: http_task_slot; Type: TABLE; Schema: ax; Owner: -
--

CREATE TABLE ax.http_task_slot (
    task_id uuid NOT NULL,
    job_id uuid NOT NULL,
    host text NOT NULL,
    held_until timestamp with time zone NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL
);

--
-- Name: http_task_slot_wait; Type: TABLE; Schema: ax; Owner: -
--

CREATE TABLE ax.http_task_slot_wait (
    river_job_id bigint NOT NULL,
    job_id uuid NOT NULL,
    host text NOT NULL,
    since timestamp with time zone DEFAULT now() NOT NULL,
    woken_at timestamp with time zone
);

--
-- Name: idempotency_key; Type: TABLE; Schema: ax; Owner: -
--

CREATE TABLE ax.idempotency_key (
    api_key_id uuid NOT NULL,
    key text NOT NULL,
    method text NOT NULL,
    path text NOT NULL,
    request_hash bytea NOT NULL,
    response_status integer,
    response_body bytea,
    locked_until timestamp with time zone,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    expires_at timestamp with time zone DEFAULT (now() + '24:00:00'::interval) NOT NULL,
    response_headers jsonb DEFAULT '{}'::jsonb NOT NULL,
    CONSTRAINT idempotency_key_length CHECK (((length(key) >= 1) AND (length(key) <= 255)))
);

--
-- Name: job_calendar; Type: TABLE; Schema: ax; Owner: -
--

CREATE TABLE ax.job_calendar (
    job_id uuid NOT NULL,
    calendar_name text NOT NULL
);

--
-- Name: job_pool_change; Type: TABLE; Schema: ax; Owner: -
--

CREATE TABLE ax.job_pool_change (
    job_id uuid NOT NULL,
    changed_at timestamp with time zone DEFAULT now() NOT NULL,
    next_at timestamp with time zone DEFAULT now() NOT NULL
);

--
-- Name: TABLE job_pool_change; Type: COMMENT; Schema: ax; Owner: -
--

COMMENT ON TABLE ax.job_pool_change IS 'jobs whose pool changed lately: the reaper moves their unfinished tasks at next_at, then at doubling intervals, until 30 s have passed (fires that raced the change)';

--
-- Name: job_secret; Type: TABLE; Schema: ax; Owner: -
--

CREATE TABLE ax.job_secret (
    job_id uuid NOT NULL,
    secret text NOT NULL,
    previous_secret text,
    previous_expires_at timestamp with time zone,
    rotated_at timestamp with time zone,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT job_secret_is_whsec CHECK ((secret ~~ 'whsec\_%'::text)),
    CONSTRAINT job_secret_previous_expires CHECK (((previous_secret IS NULL) = (previous_expires_at IS NULL)))
);

--
-- Name: job_timeout_measure; Type: TABLE; Schema: ax; Owner: -
--

CREATE TABLE ax.job_timeout_measure (
    job_id uuid NOT NULL,
    samples integer NOT NULL,
    p95_ms bigint,
    computed_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT job_timeout_measure_p95_with_samples CHECK ((((samples = 0) = (p95_ms IS NULL)) AND ((p95_ms IS NULL) OR (p95_ms >= 0)))),
    CONSTRAINT job_timeout_measure_samples_range CHECK (((samples >= 0) AND (samples <= 100)))
);

--
-- Name: nonce; Type: TABLE; Schema: ax; Owner: -
--

CREATE TABLE ax.nonce (
    key_id uuid NOT NULL,
    nonce text NOT NULL,
    expires_at timestamp with time zone NOT NULL,
    CONSTRAINT nonce_length CHECK (((length(nonce) >= 16) AND (length(nonce) <= 128)))
);

--
-- Name: notice; Type: TABLE; Schema: ax; Owner: -
--

CREATE TABLE ax.notice (
    id bigint NOT NULL,
    job_id uuid NOT NULL,
    target_id bigint NOT NULL,
    event ax.notice_event NOT NULL,
    execution_id uuid,
    detail text DEFAULT ''::text NOT NULL,
    failed_runs integer DEFAULT 0 NOT NULL,
    coalesced integer DEFAULT 0 NOT NULL,
    state ax.notice_state DEFAULT 'pending'::ax.notice_state NOT NULL,
    attempts integer DEFAULT 0 NOT NULL,
    last_status integer,
    last_error text,
    next_attempt_at timestamp with time zone,
    enqueued_at timestamp with time zone,
    delivered_at timestamp with time zone,
    failed_at timestamp with time zone,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    url text NOT NULL
);

--
-- Name: notice_id_seq; Type: SEQUENCE; Schema: ax; Owner: -
--

ALTER TABLE ax.notice ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME ax.notice_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

--
-- Name: notice_setting; Type: TABLE; Schema: ax; Owner: -
--

CREATE TABLE ax.notice_setting (
    only_row boolean DEFAULT true NOT NULL,
    per_minute integer DEFAULT 10 NOT NULL,
    CONSTRAINT notice_setting_only_row_check CHECK (only_row),
    CONSTRAINT notice_setting_per_minute_check CHECK (((per_minute >= 1) AND (per_minute <= 10000)))
);

--
-- Name: notice_target_id_seq; Type: SEQUENCE; Schema: ax; Owner: -
--

ALTER TABLE ax.notice_target ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME ax.notice_target_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

--
-- Name: queued_run; Type: TABLE; Schema: ax; Owner: -
--

CREATE TABLE ax.queued_run (
    execution_id uuid NOT NULL,
    job_id uuid NOT NULL,
    behind_id uuid,
    queued_at timestamp with time zone DEFAULT now() NOT NULL,
    released_at timestamp with time zone
);

--
-- Name: rate_class; Type: TABLE; Schema: ax; Owner: -
--

CREATE TABLE ax.rate_class (
    name text NOT NULL,
    description text DEFAULT ''::text NOT NULL,
    rate double precision NOT NULL,
    burst double precision NOT NULL,
    tokens double precision NOT NULL,
    refilled_at timestamp with time zone DEFAULT now() NOT NULL,
    manual_min_priority integer,
    auto_min_priority integer,
    auto_depth integer,
    auto_age_seconds integer,
    degraded_since timestamp with time zone,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    groups text[],
    CONSTRAINT rate_class_auto_complete CHECK (((auto_min_priority IS NULL) = ((auto_depth IS NULL) AND (auto_age_seconds IS NULL)))),
    CONSTRAINT rate_class_burst_range CHECK ((burst >= (1)::double precision)),
    CONSTRAINT rate_class_groups_size CHECK (((groups IS NULL) OR (((cardinality(groups) >= 1) AND (cardinality(groups) <= 100)) AND (array_position(groups, NULL::text) IS NULL)))),
    CONSTRAINT rate_class_name_format CHECK ((name ~ '^[A-Za-z0-9_.-]{1,100}$'::text)),
    CONSTRAINT rate_class_rate_positive CHECK ((rate > (0)::double precision)),
    CONSTRAINT rate_class_tokens_range CHECK (((tokens >= (0)::double precision) AND (tokens <= burst)))
);

--
-- Name: COLUMN rate_class.groups; Type: COMMENT; Schema: ax; Owner: -
--

COMMENT ON COLUMN ax.rate_class.groups IS 'the job groups whose jobs may name the class; NULL: any (but not through keys limited to groups)';

--
-- Name: rate_class_status; Type: VIEW; Schema: ax; Owner: -
--

CREATE VIEW ax.rate_class_status AS
 SELECT c.name,
    c.rate,
    c.burst,
    LEAST(c.burst, (c.tokens + (c.rate * (EXTRACT(epoch FROM (now() - c.refilled_at)))::double precision))) AS tokens_now,
    COALESCE(c.manual_min_priority,
        CASE
            WHEN (c.degraded_since IS NOT NULL) THEN c.auto_min_priority
            ELSE NULL::integer
        END) AS min_priority,
    ( SELECT count(*) AS count
           FROM ax.task t
          WHERE ((t.state = 'pending'::ax.task_state) AND (t.rate_class = c.name) AND (t.not_before <= now()))) AS waiting
   FROM ax.rate_class c
  ORDER BY c.name;

--
-- Name: river_job; Type: TABLE; Schema: ax; Owner: -
--

CREATE TABLE ax.river_job (
    id bigint NOT NULL,
    state ax.river_job_state DEFAULT 'available'::ax.river_job_state NOT NULL,
    attempt smallint DEFAULT 0 NOT NULL,
    max_attempts smallint DEFAULT 25 NOT NULL,
    attempted_at timestamp with time zone,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    finalized_at timestamp with time zone,
    scheduled_at timestamp with time zone DEFAULT now() NOT NULL,
    priority smallint DEFAULT 1 NOT NULL,
    args jsonb NOT NULL,
    attempted_by text[],
    errors jsonb[],
    kind text NOT NULL,
    metadata jsonb DEFAULT '{}'::jsonb NOT NULL,
    queue text DEFAULT 'default'::text NOT NULL,
    tags character varying(255)[] DEFAULT '{}'::character varying[] NOT NULL,
    unique_key bytea,
    unique_states bit(8),
    CONSTRAINT finalized_or_finalized_at_null CHECK ((((finalized_at IS NULL) AND (state <> ALL (ARRAY['cancelled'::ax.river_job_state, 'completed'::ax.river_job_state, 'discarded'::ax.river_job_state]))) OR ((finalized_at IS NOT NULL) AND (state = ANY (ARRAY['cancelled'::ax.river_job_state, 'completed'::ax.river_job_state, 'discarded'::ax.river_job_state]))))),
    CONSTRAINT kind_length CHECK (((char_length(kind) > 0) AND (char_length(kind) < 128))),
    CONSTRAINT max_attempts_is_positive CHECK ((max_attempts > 0)),
    CONSTRAINT priority_in_range CHECK (((priority >= 1) AND (priority <= 4))),
    CONSTRAINT queue_length CHECK (((char_length(queue) > 0) AND (char_length(queue) < 128)))
);

--
-- Name: river_job_id_seq; Type: SEQUENCE; Schema: ax; Owner: -
--

CREATE SEQUENCE ax.river_job_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

--
-- Name: river_job_id_seq; Type: SEQUENCE OWNED BY; Schema: ax; Owner: -
--

ALTER SEQUENCE ax.river_job_id_seq OWNED BY ax.river_job.id;

--
-- Name: river_leader; Type: TABLE; Schema: ax; Owner: -
--

CREATE UNLOGGED TABLE ax.river_leader (
    elected_at timestamp with time zone NOT NULL,
    expires_at timestamp with time zone NOT NULL,
    leader_id text NOT NULL,
    name text DEFAULT 'default'::text NOT NULL,
    CONSTRAINT leader_id_length CHECK (((char_length(leader_id) > 0) AND (char_length(leader_id) < 128))),
    CONSTRAINT name_length CHECK ((name = 'default'::text))
);

--
-- Name: river_migration; Type: TABLE; Schema: ax; Owner: -
--

CREATE TABLE ax.river_migration (
    line text NOT NULL,
    version bigint NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT line_length CHECK (((char_length(line) > 0) AND (char_length(line) < 128))),
    CONSTRAINT version_gte_1 CHECK ((version >= 1))
);

--
-- Name: river_notification; Type: TABLE; Schema: ax; Owner: -
--

CREATE TABLE ax.river_notification (
    id bigint NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    payload text NOT NULL,
    topic text NOT NULL,
    CONSTRAINT topic_length CHECK (((length(topic) > 0) AND (length(topic) < 128)))
);

--
-- Name: river_notification_id_seq; Type: SEQUENCE; Schema: ax; Owner: -
--

CREATE SEQUENCE ax.river_notification_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

--
-- Name: river_notification_id_seq; Type: SEQUENCE OWNED BY; Schema: ax; Owner: -
--

ALTER SEQUENCE ax.river_notification_id_seq OWNED BY ax.river_notification.id;

--
-- Name: river_queue; Type: TABLE; Schema: ax; Owner: -
--

CREATE TABLE ax.river_queue (
    name text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    metadata jsonb DEFAULT '{}'::jsonb NOT NULL,
    paused_at timestamp with time zone,
    updated_at timestamp with time zone DEFAULT CURRENT_TIMESTAMP NOT NULL
);

--
-- Name: running_tasks; Type: VIEW; Schema: ax; Owner: -
--

CREATE VIEW ax.running_tasks AS
 SELECT a.name AS agent,
    j.name AS job,
    t.execution_id,
    t.shard_index,
    t.state,
    t.attempt,
    t.leased_at,
    t.lease_expires_at
   FROM ((ax.task t
     JOIN ax.job j ON ((j.id = t.job_id)))
     LEFT JOIN ax.agent a ON ((a.id = t.agent_id)))
  WHERE (t.state = ANY (ARRAY['leased'::ax.task_state, 'running'::ax.task_state]))
  ORDER BY t.leased_at;

--
-- Name: schema_version; Type: TABLE; Schema: ax; Owner: -
--

CREATE TABLE ax.schema_version (
    id integer NOT NULL,
    version_id bigint NOT NULL,
    is_applied boolean NOT NULL,
    tstamp timestamp without time zone DEFAULT now() NOT NULL
);

--
-- Name: schema_version_id_seq; Type: SEQUENCE; Schema: ax; Owner: -
--

ALTER TABLE ax.schema_version ALTER COLUMN id ADD GENERATED BY DEFAULT AS IDENTITY (
    SEQUENCE NAME ax.schema_version_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

--
-- Name: set_aside_jobs; Type: VIEW; Schema: ax; Owner: -
--

CREATE VIEW ax.set_aside_jobs AS
 SELECT j.id AS job_id,
    j.group_name,
    j.name,
    t.set_aside_at,
    t.set_aside_reason,
    t.next_fire_at
   FROM (ax.trigger t
     JOIN ax.job j ON ((j.id = t.job_id)))
  WHERE (t.set_aside_at IS NOT NULL)
  ORDER BY t.set_aside_at DESC;

--
-- Name: skipped_fire; Type: TABLE; Schema: ax; Owner: -
--

CREATE TABLE ax.skipped_fire (
    id bigint NOT NULL,
    job_id uuid NOT NULL,
    reason ax.skip_reason NOT NULL,
    first_tick timestamp with time zone NOT NULL,
    last_tick timestamp with time zone NOT NULL,
    tick_count integer,
    detail text DEFAULT ''::text NOT NULL,
    recorded_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT skipped_fire_count CHECK (((tick_count IS NULL) OR (tick_count >= 1))),
    CONSTRAINT skipped_fire_range CHECK ((first_tick <= last_tick))
)
PARTITION BY RANGE (recorded_at);

--
-- Name: skipped_fire_id_seq; Type: SEQUENCE; Schema: ax; Owner: -
--

CREATE SEQUENCE ax.skipped_fire_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

--
-- Name: skipped_fire_id_seq; Type: SEQUENCE OWNED BY; Schema: ax; Owner: -
--

ALTER SEQUENCE ax.skipped_fire_id_seq OWNED BY ax.skipped_fire.id;

--
-- Name: skipped_today; Type: VIEW; Schema: ax; Owner: -
--

CREATE VIEW ax.skipped_today AS
 SELECT j.group_name,
    j.name,
    s.reason,
    s.first_tick,
    s.last_tick,
    s.tick_count,
    s.detail,
    s.recorded_at
   FROM (ax.skipped_fire s
     JOIN ax.job j ON ((j.id = s.job_id)))
  WHERE (s.recorded_at >= (date_trunc('day'::text, (now() AT TIME ZONE 'UTC'::text)) AT TIME ZONE 'UTC'::text))
  ORDER BY s.recorded_at DESC;

--
-- Name: task_event_id_seq; Type: SEQUENCE; Schema: ax; Owner: -
--

CREATE SEQUENCE ax.task_event_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

--
-- Name: task_event_id_seq; Type: SEQUENCE OWNED BY; Schema: ax; Owner: -
--

ALTER SEQUENCE ax.task_event_id_seq OWNED BY ax.task_event.id;

--
-- Name: task_pool; Type: TABLE; Schema: ax; Owner: -
--

CREATE TABLE ax.task_pool (
    id integer NOT NULL,
    target_labels jsonb NOT NULL,
    executor_kind ax.executor_kind NOT NULL,
    labels_digest uuid NOT NULL,
    rate_class text
);

--
-- Name: TABLE task_pool; Type: COMMENT; Schema: ax; Owner: -
--

COMMENT ON TABLE ax.task_pool IS 'a job target (labels and executor kind): tasks carry theirs (pool_id) so a lease reads only the pools its agents match';

--
-- Name: task_pool_id_seq; Type: SEQUENCE; Schema: ax; Owner: -
--

ALTER TABLE ax.task_pool ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME ax.task_pool_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

--
-- Name: tasks_without_agent; Type: VIEW; Schema: ax; Owner: -
--

CREATE VIEW ax.tasks_without_agent AS
 SELECT t.id AS task_id,
    t.execution_id,
    j.name AS job,
    j.group_name,
    j.executor_kind,
    j.target_labels,
    t.not_before,
        CASE
            WHEN (NOT (EXISTS ( SELECT 1
               FROM ax.agent a
              WHERE ((a.state = ANY (ARRAY['active'::ax.agent_state, 'quarantined'::ax.agent_state])) AND (j.target_labels <@ a.labels) AND ((NOT a.label_bound) OR (j.target_labels <> '{}'::jsonb)))))) THEN ('no live agent has the labels '::text || (j.target_labels)::text)
            ELSE (((('no live agent with the labels '::text || (j.target_labels)::text) || ' accepts executor '::text) || (j.executor_kind)::text) || ' (agents list theirs in AX_EXECUTORS)'::text)
        END AS reason
   FROM (ax.task t
     JOIN ax.job j ON ((j.id = t.job_id)))
  WHERE ((t.state = 'pending'::ax.task_state) AND (NOT t.agentless) AND (NOT (EXISTS ( SELECT 1
           FROM ax.agent a
          WHERE ((a.state = ANY (ARRAY['active'::ax.agent_state, 'quarantined'::ax.agent_state])) AND (j.target_labels <@ a.labels) AND ((NOT a.label_bound) OR (j.target_labels <> '{}'::jsonb)) AND ((j.executor_kind)::text = ANY (a.executors)))))))
UNION ALL
 SELECT t.id AS task_id,
    t.execution_id,
    j.name AS job,
    j.group_name,
    j.executor_kind,
    j.target_labels,
    t.not_before,
    (((('concurrency key '::text || t.concurrency_key) ||
        CASE
            WHEN (t.concurrency_scope ~~ 'group:%'::text) THEN (' of group '::text || substr(t.concurrency_scope, 7))
            ELSE ''::text
        END) || ' at limit '::text) || t.concurrency_limit) AS reason
   FROM (ax.task t
     JOIN ax.job j ON ((j.id = t.job_id)))
  WHERE ((t.concurrency_key IS NOT NULL) AND (t.state = 'pending'::ax.task_state) AND (NOT t.agentless) AND (t.key_parked OR (( SELECT count(*) AS count
           FROM ax.task r
          WHERE ((r.concurrency_scope = t.concurrency_scope) AND (r.concurrency_key = t.concurrency_key) AND (r.concurrency_key IS NOT NULL) AND (r.state = ANY (ARRAY['leased'::ax.task_state, 'running'::ax.task_state])))) >= t.concurrency_limit)) AND (EXISTS ( SELECT 1
           FROM ax.agent a
          WHERE ((a.state = ANY (ARRAY['active'::ax.agent_state, 'quarantined'::ax.agent_state])) AND (j.target_labels <@ a.labels) AND ((NOT a.label_bound) OR (j.target_labels <> '{}'::jsonb)) AND ((j.executor_kind)::text = ANY (a.executors))))));

--
-- Name: upcoming_fire; Type: TABLE; Schema: ax; Owner: -
--

CREATE TABLE ax.upcoming_fire (
    job_id uuid NOT NULL,
    fire_at timestamp with time zone NOT NULL
);

--
-- Name: upcoming_fire_pass; Type: TABLE; Schema: ax; Owner: -
--

CREATE TABLE ax.upcoming_fire_pass (
    singleton boolean DEFAULT true NOT NULL,
    computed_at timestamp with time zone NOT NULL,
    CONSTRAINT upcoming_fire_pass_singleton CHECK (singleton)
);

--
-- Name: upcoming_hour; Type: VIEW; Schema: ax; Owner: -
--

CREATE VIEW ax.upcoming_hour AS
 SELECT u.job_id,
    u.group_name,
    u.name,
    u.trigger_kind,
    u.cron_expr,
    u.timezone,
    u.next_fire_at,
    u.delayed_run_id
   FROM ( SELECT j.id AS job_id,
            j.group_name,
            j.name,
            j.trigger_kind,
            j.cron_expr,
            j.timezone,
            u_1.fire_at AS next_fire_at,
            NULL::uuid AS delayed_run_id
           FROM ((ax.upcoming_fire u_1
             JOIN ax.job j ON ((j.id = u_1.job_id)))
             JOIN ax.trigger t ON ((t.job_id = u_1.job_id)))
          WHERE ((u_1.fire_at > now()) AND (u_1.fire_at <= (now() + '01:00:00'::interval)) AND (NOT t.paused))
        UNION ALL
         SELECT j.id,
            j.group_name,
            j.name,
            j.trigger_kind,
            j.cron_expr,
            j.timezone,
            t.next_fire_at,
            NULL::uuid AS uuid
           FROM (ax.trigger t
             JOIN ax.job j ON ((j.id = t.job_id)))
          WHERE ((j.trigger_kind = 'delay'::ax.trigger_kind) AND (t.next_fire_at > now()) AND (t.next_fire_at <= (now() + '01:00:00'::interval)) AND (NOT t.paused))
        UNION ALL
         SELECT j.id,
            j.group_name,
            j.name,
            j.trigger_kind,
            j.cron_expr,
            j.timezone,
            d.run_at,
            d.id
           FROM ((ax.delayed_run d
             JOIN ax.job j ON ((j.id = d.job_id)))
             JOIN ax.trigger t ON ((t.job_id = d.job_id)))
          WHERE ((d.run_at > now()) AND (d.run_at <= (now() + '01:00:00'::interval)) AND (d.cancelled_at IS NULL) AND (NOT t.paused))) u
  ORDER BY u.next_fire_at;

--
-- Name: callback_attempt id; Type: DEFAULT; Schema: ax; Owner: -
--

ALTER TABLE ONLY ax.callback_attempt ALTER COLUMN id SET DEFAULT nextval('ax.callback_attempt_id_seq'::regclass);

--
-- Name: river_job id; Type: DEFAULT; Schema: ax; Owner: -
--

ALTER TABLE ONLY ax.river_job ALTER COLUMN id SET DEFAULT nextval('ax.river_job_id_seq'::regclass);

--
-- Name: river_notification id; Type: DEFAULT; Schema: ax; Owner: -
--

ALTER TABLE ONLY ax.river_notification ALTER COLUMN id SET DEFAULT nextval('ax.river_notification_id_seq'::regclass);

--
-- Name: skipped_fire id; Type: DEFAULT; Schema: ax; Owner: -
--

ALTER TABLE ONLY ax.skipped_fire ALTER COLUMN id SET DEFAULT nextval('ax.skipped_fire_id_seq'::regclass);

--
-- Name: task_event id; Type: DEFAULT; Schema: ax; Owner: -
--

ALTER TABLE ONLY ax.task_event ALTER COLUMN id SET DEFAULT nextval('ax.task_event_id_seq'::regclass);

--
-- Name: after_edge after_edge_pkey; Type: CONSTRAINT; Schema: ax; Owner: -
--

ALTER TABLE ONLY ax.after_edge
    ADD CONSTRAINT after_edge_pkey PRIMARY KEY (job_id, upstream_job_id);

--
-- Name: after_trigger after_trigger_pkey; Type: CONSTRAINT; Schema: ax; Owner: -
--

ALTER TABLE ONLY ax.after_trigger
    ADD CONSTRAINT after_trigger_pkey PRIMARY KEY (job_id);

--
-- Name: after_wait after_wait_pkey; Type: CONSTRAINT; Schema: ax; Owner: -
--

ALTER TABLE ONLY ax.after_wait
    ADD CONSTRAINT after_wait_pkey PRIMARY KEY (job_id, logical_time);

--
-- Name: agent agent_pkey; Type: CONSTRAINT; Schema: ax; Owner: -
--

ALTER TABLE ONLY ax.agent
    ADD CONSTRAINT agent_pkey PRIMARY KEY (id);

--
-- Name: api_key api_key_hash_unique; Type: CONSTRAINT; Schema: ax; Owner: -
--

ALTER TABLE ONLY ax.api_key
    ADD CONSTRAINT api_key_hash_unique UNIQUE (key_hash);

--
-- Name: api_key api_key_pkey; Type: CONSTRAINT; Schema: ax; Owner: -
--

ALTER TABLE ONLY ax.api_key
    ADD CONSTRAINT api_key_pkey PRIMARY KEY (id);

--
-- Name: api_signing_key api_signing_key_pkey; Type: CONSTRAINT; Schema: ax; Owner: -
--

ALTER TABLE ONLY ax.api_signing_key
    ADD CONSTRAINT api_signing_key_pkey PRIMARY KEY (id);

--
-- Name: backfill backfill_pkey; Type: CONSTRAINT; Schema: ax; Owner: -
--

ALTER TABLE ONLY ax.backfill
    ADD CONSTRAINT backfill_pkey PRIMARY KEY (id);

--
-- Name: backfill_run backfill_run_pkey; Type: CONSTRAINT; Schema: ax; Owner: -
--

ALTER TABLE ONLY ax.backfill_run
    ADD CONSTRAINT backfill_run_pkey PRIMARY KEY (execution_id);

--
-- Name: calendar calendar_pkey; Type: CONSTRAINT; Schema: ax; Owner: -
--

ALTER TABLE ONLY ax.calendar
    ADD CONSTRAINT calendar_pkey PRIMARY KEY (name);

--
-- Name: callback_attempt callback_attempt_pkey; Type: CONSTRAINT; Schema: ax; Owner: -
--

ALTER TABLE ONLY ax.callback_attempt
    ADD CONSTRAINT callback_attempt_pkey PRIMARY KEY (execution_id, id);

--
-- Name: callback_breaker callback_breaker_pkey; Type: CONSTRAINT; Schema: ax; Owner: -
--

ALTER TABLE ONLY ax.callback_breaker
    ADD CONSTRAINT callback_breaker_pkey PRIMARY KEY (host);

--
-- Name: callback callback_pkey; Type: CONSTRAINT; Schema: ax; Owner: -
--

ALTER TABLE ONLY ax.callback
    ADD CONSTRAINT callback_pkey PRIMARY KEY (execution_id);

--
-- Name: callback_sequence callback_sequence_pkey; Type: CONSTRAINT; Schema: ax; Owner: -
--

ALTER TABLE ONLY ax.callback_sequence
    ADD CONSTRAINT callback_sequence_pkey PRIMARY KEY (job_id);

--
-- Name: concurrency_key_freed concurrency_key_freed_pkey; Type: CONSTRAINT; Schema: ax; Owner: -
--

ALTER TABLE ONLY ax.concurrency_key_freed
    ADD CONSTRAINT concurrency_key_freed_pkey PRIMARY KEY (id);

--
-- Name: console_session console_session_pkey; Type: CONSTRAINT; Schema: ax; Owner: -
--

ALTER TABLE ONLY ax.console_session
    ADD CONSTRAINT console_session_pkey PRIMARY KEY (id_hash);

--
-- Name: declaration_set declaration_set_pkey; Type: CONSTRAINT; Schema: ax; Owner: -
--

ALTER TABLE ONLY ax.declaration_set
    ADD CONSTRAINT declaration_set_pkey PRIMARY KEY (managed_by);

--
-- Name: delayed_run delayed_run_pkey; Type: CONSTRAINT; Schema: ax; Owner: -
--

ALTER TABLE ONLY ax.delayed_run
    ADD CONSTRAINT delayed_run_pkey PRIMARY KEY (id);

--
-- Name: execution execution_pkey; Type: CONSTRAINT; Schema: ax; Owner: -
--

ALTER TABLE ONLY ax.execution
    ADD CONSTRAINT execution_pkey PRIMARY KEY (id);

--
-- Name: execution_rerun execution_rerun_once_per_request; Type: CONSTRAINT; Schema: ax; Owner: -
--

ALTER TABLE ONLY ax.execution_rerun
    ADD CONSTRAINT execution_rerun_once_per_request UNIQUE (rerun_of, request_key);

--
-- Name: execution_rerun execution_rerun_pkey; Type: CONSTRAINT; Schema: ax; Owner: -
--

ALTER TABLE ONLY ax.execution_rerun
    ADD CONSTRAINT execution_rerun_pkey PRIMARY KEY (execution_id);

--
-- Name: history_drop history_drop_pkey; Type: CONSTRAINT; Schema: ax; Owner: -
--

ALTER TABLE ONLY ax.history_drop
    ADD CONSTRAINT history_drop_pkey PRIMARY KEY (id);

--
-- Name: history_setting history_setting_pkey; Type: CONSTRAINT; Schema: ax; Owner: -
--

ALTER TABLE ONLY ax.history_setting
    ADD CONSTRAINT history_setting_pkey PRIMARY KEY (singleton);

--
-- Name: http_task_slot http_task_slot_pkey; Type: CONSTRAINT; Schema: ax; Owner: -
--

ALTER TABLE ONLY ax.http_task_slot
    ADD CONSTRAINT http_task_slot_pkey PRIMARY KEY (task_id);

--
-- Name: http_task_slot_wait http_task_slot_wait_pkey; Type: CONSTRAINT; Schema: ax; Owner: -
--

ALTER TABLE ONLY ax.http_task_slot_wait
    ADD CONSTRAINT http_task_slot_wait_pkey PRIMARY KEY (river_job_id);

--
-- Name: idempotency_key idempotency_key_pkey; Type: CONSTRAINT; Schema: ax; Owner: -
--

ALTER TABLE ONLY ax.idempotency_key
    ADD CONSTRAINT idempotency_key_pkey PRIMARY KEY (api_key_id, key);

--
-- Name: job_calendar job_calendar_pkey; Type: CONSTRAINT; Schema: ax; Owner: -
--

ALTER TABLE ONLY ax.job_calendar
    ADD CONSTRAINT job_calendar_pkey PRIMARY KEY (job_id, calendar_name);

--
-- Name: job job_name_unique; Type: CONSTRAINT; Schema: ax; Owner: -
--

ALTER TABLE ONLY ax.job
    ADD CONSTRAINT job_name_unique UNIQUE (group_name, name);

--
-- Name: job job_pkey; Type: CONSTRAINT; Schema: ax; Owner: -
--

ALTER TABLE ONLY ax.job
    ADD CONSTRAINT job_pkey PRIMARY KEY (id);

--
-- Name: job_pool_change job_pool_change_pkey; Type: CONSTRAINT; Schema: ax; Owner: -
--

ALTER TABLE ONLY ax.job_pool_change
    ADD CONSTRAINT job_pool_change_pkey PRIMARY KEY (job_id);

--
-- Name: job_secret job_secret_pkey; Type: CONSTRAINT; Schema: ax; Owner: -
--

ALTER TABLE ONLY ax.job_secret
    ADD CONSTRAINT job_secret_pkey PRIMARY KEY (job_id);

--
-- Name: job_timeout_measure job_timeout_measure_pkey; Type: CONSTRAINT; Schema: ax; Owner: -
--

ALTER TABLE ONLY ax.job_timeout_measure
    ADD CONSTRAINT job_timeout_measure_pkey PRIMARY KEY (job_id);

--
-- Name: nonce nonce_pkey; Type: CONSTRAINT; Schema: ax; Owner: -
--

ALTER TABLE ONLY ax.nonce
    ADD CONSTRAINT nonce_pkey PRIMARY KEY (key_id, nonce);

--
-- Name: notice notice_pkey; Type: CONSTRAINT; Schema: ax; Owner: -
--

ALTER TABLE ONLY ax.notice
    ADD CONSTRAINT notice_pkey PRIMARY KEY (id);

--
-- Name: notice_setting notice_setting_pkey; Type: CONSTRAINT; Schema: ax; Owner: -
--

ALTER TABLE ONLY ax.notice_setting
    ADD CONSTRAINT notice_setting_pkey PRIMARY KEY (only_row);

--
-- Name: notice_target notice_target_job_id_kind_url_key; Type: CONSTRAINT; Schema: ax; Owner: -
--

ALTER TABLE ONLY ax.notice_target
    ADD CONSTRAINT notice_target_job_id_kind_url_key UNIQUE (job_id, kind, url);

--
-- Name: notice_target notice_target_pkey; Type: CONSTRAINT; Schema: ax; Owner: -
--

ALTER TABLE ONLY ax.notice_target
    ADD CONSTRAINT notice_target_pkey PRIMARY KEY (id);

--
-- Name: queued_run queued_run_pkey; Type: CONSTRAINT; Schema: ax; Owner: -
--

ALTER TABLE ONLY ax.queued_run
    ADD CONSTRAINT queued_run_pkey PRIMARY KEY (execution_id);

--
-- Name: rate_class rate_class_pkey; Type: CONSTRAINT; Schema: ax; Owner: -
--

ALTER TABLE ONLY ax.rate_class
    ADD CONSTRAINT rate_class_pkey PRIMARY KEY (name);

--
-- Name: river_job river_job_pkey; Type: CONSTRAINT; Schema: ax; Owner: -
--

ALTER TABLE ONLY ax.river_job
    ADD CONSTRAINT river_job_pkey PRIMARY KEY (id);

--
-- Name: river_leader river_leader_pkey; Type: CONSTRAINT; Schema: ax; Owner: -
--

ALTER TABLE ONLY ax.river_leader
    ADD CONSTRAINT river_leader_pkey PRIMARY KEY (name);

--
-- Name: river_migration river_migration_pkey1; Type: CONSTRAINT; Schema: ax; Owner: -
--

ALTER TABLE ONLY ax.river_migration
    ADD CONSTRAINT river_migration_pkey1 PRIMARY KEY (line, version);

--
-- Name: river_notification river_notification_pkey; Type: CONSTRAINT; Schema: ax; Owner: -
--

ALTER TABLE ONLY ax.river_notification
    ADD CONSTRAINT river_notification_pkey PRIMARY KEY (id);

--
-- Name: river_queue river_queue_pkey; Type: CONSTRAINT; Schema: ax; Owner: -
--

ALTER TABLE ONLY ax.river_queue
    ADD CONSTRAINT river_queue_pkey PRIMARY KEY (name);

--
-- Name: schema_version schema_version_pkey; Type: CONSTRAINT; Schema: ax; Owner: -
--

ALTER TABLE ONLY ax.schema_version
    ADD CONSTRAINT schema_version_pkey PRIMARY KEY (id);

--
-- Name: skipped_fire skipped_fire_pkey; Type: CONSTRAINT; Schema: ax; Owner: -
--

ALTER TABLE ONLY ax.skipped_fire
    ADD CONSTRAINT skipped_fire_pkey PRIMARY KEY (recorded_at, id);

--
-- Name: task_event task_event_pkey; Type: CONSTRAINT; Schema: ax; Owner: -
--

ALTER TABLE ONLY ax.task_event
    ADD CONSTRAINT task_event_pkey PRIMARY KEY (execution_id, id);

--
-- Name: task task_lost_leases_nonnegative; Type: CHECK CONSTRAINT; Schema: ax; Owner: -
--

ALTER TABLE ax.task
    ADD CONSTRAINT task_lost_leases_nonnegative CHECK ((lost_leases >= 0)) NOT VALID;

--
-- Name: task task_pkey; Type: CONSTRAINT; Schema: ax; Owner: -
--

ALTER TABLE ONLY ax.task
    ADD CONSTRAINT task_pkey PRIMARY KEY (id);

--
-- Name: task_pool task_pool_pkey; Type: CONSTRAINT; Schema: ax; Owner: -
--

ALTER TABLE ONLY ax.task_pool
    ADD CONSTRAINT task_pool_pkey PRIMARY KEY (id);

--
-- Name: task task_shard_once; Type: CONSTRAINT; Schema: ax; Owner: -
--

ALTER TABLE ONLY ax.task
    ADD CONSTRAINT task_shard_once UNIQUE (execution_id, shard_index);

--
-- Name: trigger trigger_pkey; Type: CONSTRAINT; Schema: ax; Owner: -
--

ALTER TABLE ONLY ax.trigger
    ADD CONSTRAINT trigger_pkey PRIMARY KEY (job_id);

--
-- Name: upcoming_fire_pass upcoming_fire_pass_pkey; Type: CONSTRAINT; Schema: ax; Owner: -
--

ALTER TABLE ONLY ax.upcoming_fire_pass
    ADD CONSTRAINT upcoming_fire_pass_pkey PRIMARY KEY (singleton);

--
-- Name: upcoming_fire upcoming_fire_pkey; Type: CONSTRAINT; Schema: ax; Owner: -
--

ALTER TABLE ONLY ax.upcoming_fire
    ADD CONSTRAINT upcoming_fire_pkey PRIMARY KEY (job_id, fire_at);

--
-- Name: after_edge_upstream_idx; Type: INDEX; Schema: ax; Owner: -
--

CREATE INDEX after_edge_upstream_idx ON ax.after_edge USING btree (upstream_job_id);

--
-- Name: after_wait_ready_idx; Type: INDEX; Schema: ax; Owner: -
--

CREATE INDEX after_wait_ready_idx ON ax.after_wait USING btree (updated_at) WHERE (state = 'ready'::text);

--
-- Name: after_wait_settled_idx; Type: INDEX; Schema: ax; Owner: -
--

CREATE INDEX after_wait_settled_idx ON ax.after_wait USING btree (updated_at) WHERE (state <> 'ready'::text);

--
-- Name: agent_api_key_idx; Type: INDEX; Schema: ax; Owner: -
--

CREATE INDEX agent_api_key_idx ON ax.agent USING btree (api_key_id);

--
-- Name: agent_identity_idx; Type: INDEX; Schema: ax; Owner: -
--

CREATE INDEX agent_identity_idx ON ax.agent USING btree (registered_by, name, registered_at DESC);

--
-- Name: agent_offline_idx; Type: INDEX; Schema: ax; Owner: -
--

CREATE INDEX agent_offline_idx ON ax.agent USING btree (name, id) WHERE (state = 'offline'::ax.agent_state);

--
-- Name: agent_offline_recent_idx; Type: INDEX; Schema: ax; Owner: -
--

CREATE INDEX agent_offline_recent_idx ON ax.agent USING btree (last_heartbeat_at) WHERE (state = 'offline'::ax.agent_state);

--
-- Name: agent_present_idx; Type: INDEX; Schema: ax; Owner: -
--

CREATE INDEX agent_present_idx ON ax.agent USING btree (last_heartbeat_at) WHERE (state = ANY (ARRAY['active'::ax.agent_state, 'draining'::ax.agent_state, 'quarantined'::ax.agent_state]));

--
-- Name: api_key_created_idx; Type: INDEX; Schema: ax; Owner: -
--

CREATE INDEX api_key_created_idx ON ax.api_key USING btree (created_at, id);

--
-- Name: api_key_minted_by_idx; Type: INDEX; Schema: ax; Owner: -
--

CREATE INDEX api_key_minted_by_idx ON ax.api_key USING btree (minted_by) WHERE (minted_by IS NOT NULL);

--
-- Name: backfill_job_idx; Type: INDEX; Schema: ax; Owner: -
--

CREATE INDEX backfill_job_idx ON ax.backfill USING btree (job_id, id DESC);

--
-- Name: backfill_request_once_idx; Type: INDEX; Schema: ax; Owner: -
--

CREATE UNIQUE INDEX backfill_request_once_idx ON ax.backfill USING btree (job_id, request_key) WHERE (request_key IS NOT NULL);

--
-- Name: backfill_run_backfill_idx; Type: INDEX; Schema: ax; Owner: -
--

CREATE INDEX backfill_run_backfill_idx ON ax.backfill_run USING btree (backfill_id, tick);

--
-- Name: backfill_running_idx; Type: INDEX; Schema: ax; Owner: -
--

CREATE INDEX backfill_running_idx ON ax.backfill USING btree (id) WHERE (state = 'running'::text);

--
-- Name: callback_failed_idx; Type: INDEX; Schema: ax; Owner: -
--

CREATE INDEX callback_failed_idx ON ONLY ax.callback USING btree (failed_at) WHERE (state = 'callback_failed'::ax.callback_state);

--
-- Name: callback_job_pending_idx; Type: INDEX; Schema: ax; Owner: -
--

CREATE INDEX callback_job_pending_idx ON ONLY ax.callback USING btree (job_id, sequence) WHERE (state = 'pending'::ax.callback_state);

--
-- Name: callback_retrying_idx; Type: INDEX; Schema: ax; Owner: -
--

CREATE INDEX callback_retrying_idx ON ONLY ax.callback USING btree (updated_at) WHERE ((state = 'pending'::ax.callback_state) AND (attempts > 0));

--
-- Name: callback_unenqueued_idx; Type: INDEX; Schema: ax; Owner: -
--

CREATE INDEX callback_unenqueued_idx ON ONLY ax.callback USING btree (created_at) WHERE (enqueued_at IS NULL);

--
-- Name: console_session_expires_at; Type: INDEX; Schema: ax; Owner: -
--

CREATE INDEX console_session_expires_at ON ax.console_session USING btree (expires_at);

--
-- Name: console_session_key_id; Type: INDEX; Schema: ax; Owner: -
--

CREATE INDEX console_session_key_id ON ax.console_session USING btree (key_id);

--
-- Name: delayed_run_cancelled_idx; Type: INDEX; Schema: ax; Owner: -
--

CREATE INDEX delayed_run_cancelled_idx ON ax.delayed_run USING btree (cancelled_at) WHERE (cancelled_at IS NOT NULL);

--
-- Name: delayed_run_due_idx; Type: INDEX; Schema: ax; Owner: -
--

CREATE INDEX delayed_run_due_idx ON ax.delayed_run USING btree (run_at, id) WHERE ((cancelled_at IS NULL) AND (NOT held));

--
-- Name: delayed_run_job_idx; Type: INDEX; Schema: ax; Owner: -
--

CREATE INDEX delayed_run_job_idx ON ax.delayed_run USING btree (job_id, run_at);

--
-- Name: execution_job_idx; Type: INDEX; Schema: ax; Owner: -
--

CREATE INDEX execution_job_idx ON ax.execution USING btree (job_id, id DESC);

--
-- Name: execution_rerun_cascade_root_idx; Type: INDEX; Schema: ax; Owner: -
--

CREATE INDEX execution_rerun_cascade_root_idx ON ax.execution_rerun USING btree (cascade_root) WHERE (cascade_root IS NOT NULL);

--
-- Name: execution_scheduled_idx; Type: INDEX; Schema: ax; Owner: -
--

CREATE INDEX execution_scheduled_idx ON ax.execution USING btree (scheduled_for);

--
-- Name: execution_tick_once_idx; Type: INDEX; Schema: ax; Owner: -
--

CREATE UNIQUE INDEX execution_tick_once_idx ON ax.execution USING btree (job_id, scheduled_for) WHERE (cause = ANY (ARRAY['schedule'::ax.execution_cause, 'catch_up'::ax.execution_cause, 'backfill'::ax.execution_cause, 'after'::ax.execution_cause]));

--
-- Name: execution_unfinished_idx; Type: INDEX; Schema: ax; Owner: -
--

CREATE INDEX execution_unfinished_idx ON ax.execution USING btree (job_id) WHERE (finished_at IS NULL);

--
-- Name: history_drop_at_idx; Type: INDEX; Schema: ax; Owner: -
--

CREATE INDEX history_drop_at_idx ON ax.history_drop USING btree (dropped_at);

--
-- Name: http_task_slot_host_idx; Type: INDEX; Schema: ax; Owner: -
--

CREATE INDEX http_task_slot_host_idx ON ax.http_task_slot USING btree (host);

--
-- Name: http_task_slot_job_idx; Type: INDEX; Schema: ax; Owner: -
--

CREATE INDEX http_task_slot_job_idx ON ax.http_task_slot USING btree (job_id);

--
-- Name: http_task_slot_wait_host_idx; Type: INDEX; Schema: ax; Owner: -
--

CREATE INDEX http_task_slot_wait_host_idx ON ax.http_task_slot_wait USING btree (host, since);

--
-- Name: http_task_slot_wait_job_idx; Type: INDEX; Schema: ax; Owner: -
--

CREATE INDEX http_task_slot_wait_job_idx ON ax.http_task_slot_wait USING btree (job_id, since);

--
-- Name: idempotency_key_expires_idx; Type: INDEX; Schema: ax; Owner: -
--

CREATE INDEX idempotency_key_expires_idx ON ax.idempotency_key USING btree (expires_at);

--
-- Name: job_calendar_calendar_idx; Type: INDEX; Schema: ax; Owner: -
--

CREATE INDEX job_calendar_calendar_idx ON ax.job_calendar USING btree (calendar_name);

--
-- Name: job_managed_by_idx; Type: INDEX; Schema: ax; Owner: -
--

CREATE INDEX job_managed_by_idx ON ax.job USING btree (managed_by) WHERE (managed_by IS NOT NULL);

--
-- Name: job_owner_idx; Type: INDEX; Schema: ax; Owner: -
--

CREATE INDEX job_owner_idx ON ax.job USING btree (owner, id);

--
-- Name: job_rate_limit_class_idx; Type: INDEX; Schema: ax; Owner: -
--

CREATE INDEX job_rate_limit_class_idx ON ax.job USING btree (rate_limit_class) WHERE (rate_limit_class IS NOT NULL);

--
-- Name: nonce_expires_idx; Type: INDEX; Schema: ax; Owner: -
--

CREATE INDEX nonce_expires_idx ON ax.nonce USING btree (expires_at);

--
-- Name: notice_by_target_idx; Type: INDEX; Schema: ax; Owner: -
--

CREATE INDEX notice_by_target_idx ON ax.notice USING btree (target_id, created_at);

--
-- Name: notice_job_idx; Type: INDEX; Schema: ax; Owner: -
--

CREATE INDEX notice_job_idx ON ax.notice USING btree (job_id, id DESC);

--
-- Name: notice_target_url_idx; Type: INDEX; Schema: ax; Owner: -
--

CREATE INDEX notice_target_url_idx ON ax.notice_target USING btree (url);

--
-- Name: notice_unenqueued_idx; Type: INDEX; Schema: ax; Owner: -
--

CREATE INDEX notice_unenqueued_idx ON ax.notice USING btree (id) WHERE ((enqueued_at IS NULL) AND (state = 'pending'::ax.notice_state));

--
-- Name: notice_url_held_idx; Type: INDEX; Schema: ax; Owner: -
--

CREATE INDEX notice_url_held_idx ON ax.notice USING btree (url, id) WHERE (state = 'rate_limited'::ax.notice_state);

--
-- Name: notice_url_sent_idx; Type: INDEX; Schema: ax; Owner: -
--

CREATE INDEX notice_url_sent_idx ON ax.notice USING btree (url, id) WHERE (state <> 'rate_limited'::ax.notice_state);

--
-- Name: queued_run_one_waiting; Type: INDEX; Schema: ax; Owner: -
--

CREATE UNIQUE INDEX queued_run_one_waiting ON ax.queued_run USING btree (job_id) WHERE (released_at IS NULL);

--
-- Name: queued_run_released; Type: INDEX; Schema: ax; Owner: -
--

CREATE INDEX queued_run_released ON ax.queued_run USING btree (released_at) WHERE (released_at IS NOT NULL);

--
-- Name: river_job_args_index; Type: INDEX; Schema: ax; Owner: -
--

CREATE INDEX river_job_args_index ON ax.river_job USING gin (args);

--
-- Name: river_job_kind; Type: INDEX; Schema: ax; Owner: -
--

CREATE INDEX river_job_kind ON ax.river_job USING btree (kind);

--
-- Name: river_job_metadata_index; Type: INDEX; Schema: ax; Owner: -
--

CREATE INDEX river_job_metadata_index ON ax.river_job USING gin (metadata);

--
-- Name: river_job_prioritized_fetching_index; Type: INDEX; Schema: ax; Owner: -
--

CREATE INDEX river_job_prioritized_fetching_index ON ax.river_job USING btree (state, queue, priority, scheduled_at, id);

--
-- Name: river_job_state_and_finalized_at_index; Type: INDEX; Schema: ax; Owner: -
--

CREATE INDEX river_job_state_and_finalized_at_index ON ax.river_job USING btree (state, finalized_at) WHERE (finalized_at IS NOT NULL);

--
-- Name: river_job_unique_idx; Type: INDEX; Schema: ax; Owner: -
--

CREATE UNIQUE INDEX river_job_unique_idx ON ax.river_job USING btree (unique_key) WHERE ((unique_key IS NOT NULL) AND (unique_states IS NOT NULL) AND ax.river_job_state_in_bitmask(unique_states, state));

--
-- Name: river_notification_created_at_idx; Type: INDEX; Schema: ax; Owner: -
--

CREATE INDEX river_notification_created_at_idx ON ax.river_notification USING btree (created_at);

--
-- Name: river_notification_topic_id_idx; Type: INDEX; Schema: ax; Owner: -
--

CREATE INDEX river_notification_topic_id_idx ON ax.river_notification USING btree (topic, id);

--
-- Name: skipped_fire_job_idx; Type: INDEX; Schema: ax; Owner: -
--

CREATE INDEX skipped_fire_job_idx ON ONLY ax.skipped_fire USING btree (job_id, first_tick);

--
-- Name: task_agent_ended_idx; Type: INDEX; Schema: ax; Owner: -
--

CREATE INDEX task_agent_ended_idx ON ax.task USING btree (agent_id, finished_at) WHERE ((lease_event_id IS NOT NULL) AND (finished_at IS NOT NULL));

--
-- Name: task_agent_idx; Type: INDEX; Schema: ax; Owner: -
--

CREATE INDEX task_agent_idx ON ax.task USING btree (agent_id) WHERE (state = ANY (ARRAY['leased'::ax.task_state, 'running'::ax.task_state]));

--
-- Name: task_agentless_cancel_idx; Type: INDEX; Schema: ax; Owner: -
--

CREATE INDEX task_agentless_cancel_idx ON ax.task USING btree (execution_id) WHERE (agentless AND (state = ANY (ARRAY['leased'::ax.task_state, 'running'::ax.task_state])) AND (cancel_requested_at IS NOT NULL));

--
-- Name: task_class_pending_idx; Type: INDEX; Schema: ax; Owner: -
--

CREATE INDEX task_class_pending_idx ON ax.task USING btree (rate_class, not_before) WHERE ((state = 'pending'::ax.task_state) AND (rate_class IS NOT NULL));

--
-- Name: task_concurrency_parked_idx; Type: INDEX; Schema: ax; Owner: -
--

CREATE INDEX task_concurrency_parked_idx ON ax.task USING btree (concurrency_scope, concurrency_key, priority DESC, created_at) WHERE (key_parked AND (state = 'pending'::ax.task_state));

--
-- Name: task_concurrency_pending_idx; Type: INDEX; Schema: ax; Owner: -
--

CREATE INDEX task_concurrency_pending_idx ON ax.task USING btree (pool_id, priority DESC, not_before) WHERE ((concurrency_key IS NOT NULL) AND (state = 'pending'::ax.task_state) AND (NOT agentless) AND (NOT key_parked) AND (NOT no_agent) AND (NOT floor_held));

--
-- Name: task_concurrency_ready_idx; Type: INDEX; Schema: ax; Owner: -
--

CREATE INDEX task_concurrency_ready_idx ON ax.task USING btree (concurrency_scope, concurrency_key) WHERE ((concurrency_key IS NOT NULL) AND (state = 'pending'::ax.task_state) AND (NOT agentless) AND (NOT key_parked));

--
-- Name: task_concurrency_running_idx; Type: INDEX; Schema: ax; Owner: -
--

CREATE INDEX task_concurrency_running_idx ON ax.task USING btree (concurrency_scope, concurrency_key) WHERE ((concurrency_key IS NOT NULL) AND (state = ANY (ARRAY['leased'::ax.task_state, 'running'::ax.task_state])));

--
-- Name: task_event_agent_idx; Type: INDEX; Schema: ax; Owner: -
--

CREATE INDEX task_event_agent_idx ON ONLY ax.task_event USING btree (agent_id, at) WHERE ((kind = 'state'::ax.task_event_kind) AND (agent_id IS NOT NULL));

--
-- Name: task_floor_held_idx; Type: INDEX; Schema: ax; Owner: -
--

CREATE INDEX task_floor_held_idx ON ax.task USING btree (rate_class, priority) WHERE ((state = 'pending'::ax.task_state) AND floor_held);

--
-- Name: task_floor_unheld_idx; Type: INDEX; Schema: ax; Owner: -
--

CREATE INDEX task_floor_unheld_idx ON ax.task USING btree (rate_class, priority) WHERE ((state = 'pending'::ax.task_state) AND (rate_class IS NOT NULL) AND (NOT floor_held));

--
-- Name: task_history_agent_idx; Type: INDEX; Schema: ax; Owner: -
--

CREATE INDEX task_history_agent_idx ON ONLY ax.task_history USING btree (agent_id, finished_at) WHERE (lease_event_id IS NOT NULL);

--
-- Name: task_leased_idx; Type: INDEX; Schema: ax; Owner: -
--

CREATE INDEX task_leased_idx ON ax.task USING btree (lease_expires_at) WHERE (state = ANY (ARRAY['leased'::ax.task_state, 'running'::ax.task_state]));

--
-- Name: task_no_agent_idx; Type: INDEX; Schema: ax; Owner: -
--

CREATE INDEX task_no_agent_idx ON ax.task USING btree (job_id) WHERE (no_agent AND (state = 'pending'::ax.task_state));

--
-- Name: task_pending_age_idx; Type: INDEX; Schema: ax; Owner: -
--

CREATE INDEX task_pending_age_idx ON ax.task USING btree (pool_id, not_before) WHERE ((state = 'pending'::ax.task_state) AND (NOT no_agent) AND (NOT key_parked) AND (NOT floor_held) AND (NOT pinned));

--
-- Name: task_pinned_pending_idx; Type: INDEX; Schema: ax; Owner: -
--

CREATE INDEX task_pinned_pending_idx ON ax.task USING btree (preferred_agent_id, not_before) WHERE (pinned AND (state = 'pending'::ax.task_state));

--
-- Name: task_pool_key; Type: INDEX; Schema: ax; Owner: -
--

CREATE UNIQUE INDEX task_pool_key ON ax.task_pool USING btree (labels_digest, executor_kind, COALESCE(rate_class, ''::text));

--
-- Name: task_pool_labels_idx; Type: INDEX; Schema: ax; Owner: -
--

CREATE INDEX task_pool_labels_idx ON ax.task_pool USING gin (target_labels jsonb_path_ops);

--
-- Name: task_preferred_idx; Type: INDEX; Schema: ax; Owner: -
--

CREATE INDEX task_preferred_idx ON ax.task USING btree (preferred_agent_id, priority DESC, created_at) WHERE ((state = 'pending'::ax.task_state) AND (preferred_agent_id IS NOT NULL) AND (concurrency_key IS NULL) AND (NOT no_agent) AND (NOT floor_held));

--
-- Name: task_unassigned_idx; Type: INDEX; Schema: ax; Owner: -
--

CREATE INDEX task_unassigned_idx ON ax.task USING btree (pool_id, priority DESC, created_at) WHERE ((state = 'pending'::ax.task_state) AND (preferred_agent_id IS NULL) AND (NOT agentless) AND (concurrency_key IS NULL) AND (NOT no_agent) AND (NOT floor_held));

--
-- Name: trigger_due_idx; Type: INDEX; Schema: ax; Owner: -
--

CREATE INDEX trigger_due_idx ON ax.trigger USING btree (next_fire_at) WHERE ((next_fire_at IS NOT NULL) AND (set_aside_at IS NULL));

--
-- Name: trigger_set_aside_idx; Type: INDEX; Schema: ax; Owner: -
--

CREATE INDEX trigger_set_aside_idx ON ax.trigger USING btree (set_aside_at) WHERE (set_aside_at IS NOT NULL);

--
-- Name: upcoming_fire_at_idx; Type: INDEX; Schema: ax; Owner: -
--

CREATE INDEX upcoming_fire_at_idx ON ax.upcoming_fire USING btree (fire_at);

--
-- Name: execution_history after_upstream_ended; Type: TRIGGER; Schema: ax; Owner: -
--

CREATE TRIGGER after_upstream_ended AFTER INSERT ON ax.execution_history REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION ax.after_upstream_ended();

--
-- Name: agent agent_offline_revokes_token; Type: TRIGGER; Schema: ax; Owner: -
--

CREATE TRIGGER agent_offline_revokes_token AFTER UPDATE OF state ON ax.agent FOR EACH ROW WHEN (((new.state = 'offline'::ax.agent_state) AND (old.state <> 'offline'::ax.agent_state))) EXECUTE FUNCTION ax.agent_offline_revokes_token();

--
-- Name: api_key api_key_revoked; Type: TRIGGER; Schema: ax; Owner: -
--

CREATE TRIGGER api_key_revoked AFTER UPDATE OF revoked_at ON ax.api_key FOR EACH ROW WHEN (((old.revoked_at IS NULL) AND (new.revoked_at IS NOT NULL))) EXECUTE FUNCTION ax.api_key_revoked();

--
-- Name: api_key api_key_revoked_notify; Type: TRIGGER; Schema: ax; Owner: -
--

CREATE TRIGGER api_key_revoked_notify AFTER UPDATE OF revoked_at ON ax.api_key FOR EACH STATEMENT EXECUTE FUNCTION ax.api_key_revoked_notify();

--
-- Name: api_key console_session_key_revoked; Type: TRIGGER; Schema: ax; Owner: -
--

CREATE TRIGGER console_session_key_revoked AFTER UPDATE OF revoked_at ON ax.api_key FOR EACH ROW WHEN (((old.revoked_at IS NULL) AND (new.revoked_at IS NOT NULL))) EXECUTE FUNCTION ax.console_session_key_revoked();

--
-- Name: execution execution_ended; Type: TRIGGER; Schema: ax; Owner: -
--

CREATE TRIGGER execution_ended AFTER UPDATE ON ax.execution REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION ax.execution_ended();

--
-- Name: job execution_job_deleted; Type: TRIGGER; Schema: ax; Owner: -
--

CREATE TRIGGER execution_job_deleted AFTER DELETE ON ax.job REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION ax.execution_job_deleted();

--
-- Name: execution execution_job_exists; Type: TRIGGER; Schema: ax; Owner: -
--

CREATE TRIGGER execution_job_exists AFTER INSERT ON ax.execution REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION ax.execution_job_exists();

--
-- Name: job job_calendar_sync_insert; Type: TRIGGER; Schema: ax; Owner: -
--

CREATE TRIGGER job_calendar_sync_insert AFTER INSERT ON ax.job FOR EACH ROW WHEN ((cardinality(new.exclude) > 0)) EXECUTE FUNCTION ax.job_calendar_sync();

--
-- Name: job job_calendar_sync_update; Type: TRIGGER; Schema: ax; Owner: -
--

CREATE TRIGGER job_calendar_sync_update AFTER UPDATE OF exclude ON ax.job FOR EACH ROW WHEN ((old.exclude IS DISTINCT FROM new.exclude)) EXECUTE FUNCTION ax.job_calendar_sync();

--
-- Name: job job_callback_sequence_drop; Type: TRIGGER; Schema: ax; Owner: -
--

CREATE TRIGGER job_callback_sequence_drop AFTER DELETE ON ax.job FOR EACH ROW EXECUTE FUNCTION ax.callback_sequence_drop();

--
-- Name: job job_pool_moved; Type: TRIGGER; Schema: ax; Owner: -
--

CREATE TRIGGER job_pool_moved AFTER UPDATE OF target_labels, executor_kind, rate_limit_class ON ax.job FOR EACH ROW WHEN ((old.pool_id IS DISTINCT FROM new.pool_id)) EXECUTE FUNCTION ax.job_pool_moved();

--
-- Name: job job_pool_set; Type: TRIGGER; Schema: ax; Owner: -
--

CREATE TRIGGER job_pool_set BEFORE INSERT OR UPDATE OF target_labels, executor_kind, rate_limit_class ON ax.job FOR EACH ROW EXECUTE FUNCTION ax.job_pool_set();

--
-- Name: job job_rate_class_groups; Type: TRIGGER; Schema: ax; Owner: -
--

CREATE TRIGGER job_rate_class_groups BEFORE INSERT OR UPDATE OF rate_limit_class, group_name ON ax.job FOR EACH ROW WHEN ((new.rate_limit_class IS NOT NULL)) EXECUTE FUNCTION ax.job_rate_class_groups();

--
-- Name: job job_skips_below_floor; Type: TRIGGER; Schema: ax; Owner: -
--

CREATE TRIGGER job_skips_below_floor AFTER UPDATE OF degrade_action ON ax.job FOR EACH ROW WHEN (((new.degrade_action = 'skip'::ax.degrade_action) AND (old.degrade_action IS DISTINCT FROM new.degrade_action))) EXECUTE FUNCTION ax.job_skips_below_floor();

--
-- Name: callback notice_callback_failed; Type: TRIGGER; Schema: ax; Owner: -
--

CREATE TRIGGER notice_callback_failed AFTER UPDATE OF state ON ax.callback FOR EACH ROW WHEN (((old.state <> 'callback_failed'::ax.callback_state) AND (new.state = 'callback_failed'::ax.callback_state))) EXECUTE FUNCTION ax.notice_callback_failed();

--
-- Name: execution notice_execution_ended; Type: TRIGGER; Schema: ax; Owner: -
--

CREATE TRIGGER notice_execution_ended AFTER UPDATE ON ax.execution REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION ax.notice_execution_ended();

--
-- Name: execution_history notice_history_inserted; Type: TRIGGER; Schema: ax; Owner: -
--

CREATE TRIGGER notice_history_inserted AFTER INSERT ON ax.execution_history REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION ax.notice_history_inserted();

--
-- Name: trigger notice_trigger_set_aside; Type: TRIGGER; Schema: ax; Owner: -
--

CREATE TRIGGER notice_trigger_set_aside AFTER UPDATE OF set_aside_at ON ax.trigger FOR EACH ROW WHEN (((old.set_aside_at IS NULL) AND (new.set_aside_at IS NOT NULL))) EXECUTE FUNCTION ax.notice_trigger_set_aside();

--
-- Name: execution queued_run_after_delete; Type: TRIGGER; Schema: ax; Owner: -
--

CREATE TRIGGER queued_run_after_delete AFTER DELETE ON ax.execution REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION ax.queued_run_after_end();

--
-- Name: execution queued_run_after_update; Type: TRIGGER; Schema: ax; Owner: -
--

CREATE TRIGGER queued_run_after_update AFTER UPDATE ON ax.execution REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION ax.queued_run_after_end();

--
-- Name: rate_class rate_class_groups_in_use; Type: TRIGGER; Schema: ax; Owner: -
--

CREATE TRIGGER rate_class_groups_in_use BEFORE UPDATE OF groups ON ax.rate_class FOR EACH ROW WHEN (((new.groups IS NOT NULL) AND (old.groups IS DISTINCT FROM new.groups))) EXECUTE FUNCTION ax.rate_class_groups_in_use();

--
-- Name: rate_class rate_class_loosened; Type: TRIGGER; Schema: ax; Owner: -
--

CREATE TRIGGER rate_class_loosened AFTER UPDATE ON ax.rate_class FOR EACH ROW WHEN (((old.manual_min_priority IS DISTINCT FROM new.manual_min_priority) OR (old.auto_min_priority IS DISTINCT FROM new.auto_min_priority) OR (old.degraded_since IS DISTINCT FROM new.degraded_since) OR (old.rate < new.rate) OR (old.burst < new.burst))) EXECUTE FUNCTION ax.rate_class_loosened();

--
-- Name: task task_concurrency_key_freed; Type: TRIGGER; Schema: ax; Owner: -
--

CREATE TRIGGER task_concurrency_key_freed AFTER UPDATE OF state ON ax.task FOR EACH ROW WHEN (((old.concurrency_key IS NOT NULL) AND (((old.state = ANY (ARRAY['leased'::ax.task_state, 'running'::ax.task_state])) AND (new.state <> ALL (ARRAY['leased'::ax.task_state, 'running'::ax.task_state]))) OR ((old.state = 'pending'::ax.task_state) AND (NOT old.key_parked) AND (NOT old.agentless) AND (new.state <> ALL (ARRAY['pending'::ax.task_state, 'leased'::ax.task_state, 'running'::ax.task_state])))))) EXECUTE FUNCTION ax.concurrency_key_freed();

--
-- Name: task task_concurrency_key_moved; Type: TRIGGER; Schema: ax; Owner: -
--

CREATE TRIGGER task_concurrency_key_moved AFTER DELETE ON ax.task FOR EACH ROW WHEN (((old.concurrency_key IS NOT NULL) AND ((old.state = ANY (ARRAY['leased'::ax.task_state, 'running'::ax.task_state])) OR ((old.state = 'pending'::ax.task_state) AND (NOT old.key_parked) AND (NOT old.agentless))))) EXECUTE FUNCTION ax.concurrency_key_freed();

--
-- Name: task task_concurrency_park; Type: TRIGGER; Schema: ax; Owner: -
--

CREATE TRIGGER task_concurrency_park BEFORE INSERT ON ax.task FOR EACH ROW WHEN (((new.concurrency_key IS NOT NULL) AND (new.state = 'pending'::ax.task_state) AND (NOT new.agentless))) EXECUTE FUNCTION ax.concurrency_park();

--
-- Name: task task_pool_default; Type: TRIGGER; Schema: ax; Owner: -
--

CREATE TRIGGER task_pool_default BEFORE INSERT ON ax.task FOR EACH ROW WHEN ((new.pool_id = 0)) EXECUTE FUNCTION ax.task_pool_default();

--
-- Name: after_edge after_edge_job_id_fkey; Type: FK CONSTRAINT; Schema: ax; Owner: -
--

ALTER TABLE ONLY ax.after_edge
    ADD CONSTRAINT after_edge_job_id_fkey FOREIGN KEY (job_id) REFERENCES ax.after_trigger(job_id) ON DELETE CASCADE;

--
-- Name: after_edge after_edge_upstream_job_id_fkey; Type: FK CONSTRAINT; Schema: ax; Owner: -
--

ALTER TABLE ONLY ax.after_edge
    ADD CONSTRAINT after_edge_upstream_job_id_fkey FOREIGN KEY (upstream_job_id) REFERENCES ax.job(id) ON DELETE CASCADE;

--
-- Name: after_trigger after_trigger_job_id_fkey; Type: FK CONSTRAINT; Schema: ax; Owner: -
--

ALTER TABLE ONLY ax.after_trigger
    ADD CONSTRAINT after_trigger_job_id_fkey FOREIGN KEY (job_id) REFERENCES ax.job(id) ON DELETE CASCADE;

--
-- Name: after_wait after_wait_job_id_fkey; Type: FK CONSTRAINT; Schema: ax; Owner: -
--

ALTER TABLE ONLY ax.after_wait
    ADD CONSTRAINT after_wait_job_id_fkey FOREIGN KEY (job_id) REFERENCES ax.job(id) ON DELETE CASCADE;

--
-- Name: agent agent_api_key_id_fkey; Type: FK CONSTRAINT; Schema: ax; Owner: -
--

ALTER TABLE ONLY ax.agent
    ADD CONSTRAINT agent_api_key_id_fkey FOREIGN KEY (api_key_id) REFERENCES ax.api_key(id) ON DELETE CASCADE;

--
-- Name: api_key api_key_minted_by_fkey; Type: FK CONSTRAINT; Schema: ax; Owner: -
--

ALTER TABLE ONLY ax.api_key
    ADD CONSTRAINT api_key_minted_by_fkey FOREIGN KEY (minted_by) REFERENCES ax.api_key(id) ON DELETE CASCADE;

--
-- Name: api_signing_key api_signing_key_api_key_id_fkey; Type: FK CONSTRAINT; Schema: ax; Owner: -
--

ALTER TABLE ONLY ax.api_signing_key
    ADD CONSTRAINT api_signing_key_api_key_id_fkey FOREIGN KEY (api_key_id) REFERENCES ax.api_key(id) ON DELETE CASCADE;

--
-- Name: backfill backfill_job_id_fkey; Type: FK CONSTRAINT; Schema: ax; Owner: -
--

ALTER TABLE ONLY ax.backfill
    ADD CONSTRAINT backfill_job_id_fkey FOREIGN KEY (job_id) REFERENCES ax.job(id) ON DELETE CASCADE;

--
-- Name: backfill_run backfill_run_backfill_id_fkey; Type: FK CONSTRAINT; Schema: ax; Owner: -
--

ALTER TABLE ONLY ax.backfill_run
    ADD CONSTRAINT backfill_run_backfill_id_fkey FOREIGN KEY (backfill_id) REFERENCES ax.backfill(id) ON DELETE CASCADE;

--
-- Name: console_session console_session_key_id_fkey; Type: FK CONSTRAINT; Schema: ax; Owner: -
--

ALTER TABLE ONLY ax.console_session
    ADD CONSTRAINT console_session_key_id_fkey FOREIGN KEY (key_id) REFERENCES ax.api_key(id) ON DELETE CASCADE;

--
-- Name: delayed_run delayed_run_job_id_fkey; Type: FK CONSTRAINT; Schema: ax; Owner: -
--

ALTER TABLE ONLY ax.delayed_run
    ADD CONSTRAINT delayed_run_job_id_fkey FOREIGN KEY (job_id) REFERENCES ax.job(id) ON DELETE CASCADE;

--
-- Name: http_task_slot_wait http_task_slot_wait_job_id_fkey; Type: FK CONSTRAINT; Schema: ax; Owner: -
--

ALTER TABLE ONLY ax.http_task_slot_wait
    ADD CONSTRAINT http_task_slot_wait_job_id_fkey FOREIGN KEY (job_id) REFERENCES ax.job(id) ON DELETE CASCADE;

--
-- Name: idempotency_key idempotency_key_api_key_id_fkey; Type: FK CONSTRAINT; Schema: ax; Owner: -
--

ALTER TABLE ONLY ax.idempotency_key
    ADD CONSTRAINT idempotency_key_api_key_id_fkey FOREIGN KEY (api_key_id) REFERENCES ax.api_key(id) ON DELETE CASCADE;

--
-- Name: job_calendar job_calendar_calendar_fk; Type: FK CONSTRAINT; Schema: ax; Owner: -
--

ALTER TABLE ONLY ax.job_calendar
    ADD CONSTRAINT job_calendar_calendar_fk FOREIGN KEY (calendar_name) REFERENCES ax.calendar(name);

--
-- Name: job_calendar job_calendar_job_id_fkey; Type: FK CONSTRAINT; Schema: ax; Owner: -
--

ALTER TABLE ONLY ax.job_calendar
    ADD CONSTRAINT job_calendar_job_id_fkey FOREIGN KEY (job_id) REFERENCES ax.job(id) ON DELETE CASCADE;

--
-- Name: job job_rate_limit_class_fk; Type: FK CONSTRAINT; Schema: ax; Owner: -
--

ALTER TABLE ONLY ax.job
    ADD CONSTRAINT job_rate_limit_class_fk FOREIGN KEY (rate_limit_class) REFERENCES ax.rate_class(name) ON UPDATE CASCADE;

--
-- Name: job_secret job_secret_job_id_fkey; Type: FK CONSTRAINT; Schema: ax; Owner: -
--

ALTER TABLE ONLY ax.job_secret
    ADD CONSTRAINT job_secret_job_id_fkey FOREIGN KEY (job_id) REFERENCES ax.job(id) ON DELETE CASCADE;

--
-- Name: job_timeout_measure job_timeout_measure_job_id_fkey; Type: FK CONSTRAINT; Schema: ax; Owner: -
--

ALTER TABLE ONLY ax.job_timeout_measure
    ADD CONSTRAINT job_timeout_measure_job_id_fkey FOREIGN KEY (job_id) REFERENCES ax.job(id) ON DELETE CASCADE;

--
-- Name: notice notice_job_id_fkey; Type: FK CONSTRAINT; Schema: ax; Owner: -
--

ALTER TABLE ONLY ax.notice
    ADD CONSTRAINT notice_job_id_fkey FOREIGN KEY (job_id) REFERENCES ax.job(id) ON DELETE CASCADE;

--
-- Name: notice notice_target_id_fkey; Type: FK CONSTRAINT; Schema: ax; Owner: -
--

ALTER TABLE ONLY ax.notice
    ADD CONSTRAINT notice_target_id_fkey FOREIGN KEY (target_id) REFERENCES ax.notice_target(id) ON DELETE CASCADE;

--
-- Name: notice_target notice_target_job_id_fkey; Type: FK CONSTRAINT; Schema: ax; Owner: -
--

ALTER TABLE ONLY ax.notice_target
    ADD CONSTRAINT notice_target_job_id_fkey FOREIGN KEY (job_id) REFERENCES ax.job(id) ON DELETE CASCADE;

--
-- Name: queued_run queued_run_job_id_fkey; Type: FK CONSTRAINT; Schema: ax; Owner: -
--

ALTER TABLE ONLY ax.queued_run
    ADD CONSTRAINT queued_run_job_id_fkey FOREIGN KEY (job_id) REFERENCES ax.job(id) ON DELETE CASCADE;

--
-- Name: trigger trigger_job_id_fkey; Type: FK CONSTRAINT; Schema: ax; Owner: -
--

ALTER TABLE ONLY ax.trigger
    ADD CONSTRAINT trigger_job_id_fkey FOREIGN KEY (job_id) REFERENCES ax.job(id) ON DELETE CASCADE;

--
-- Name: upcoming_fire upcoming_fire_job_id_fkey; Type: FK CONSTRAINT; Schema: ax; Owner: -
--

ALTER TABLE ONLY ax.upcoming_fire
    ADD CONSTRAINT upcoming_fire_job_id_fkey FOREIGN KEY (job_id) REFERENCES ax.job(id) ON DELETE CASCADE;

--
-- PostgreSQL database dump complete
--

