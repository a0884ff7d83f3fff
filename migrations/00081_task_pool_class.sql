-- +goose Up

-- A pool (00079) is also its jobs' rate class. A class out of tokens, or
-- slow (1 task a second against 20,000 waiting), left its tasks among
-- everyone's in the pool of their labels: every lease of that pool read
-- them and dropped them one by one, as the class had granted it nothing
-- (the unassigned and starved groups walk oldest and highest first).
-- Now a class's tasks are in pools of their own, and a lease reads only
-- the pools of no class and of the classes it was granted tokens of.
ALTER TABLE ax.task_pool ADD COLUMN rate_class text;
ALTER TABLE ax.task_pool DROP CONSTRAINT task_pool_labels_digest_executor_kind_key;
CREATE UNIQUE INDEX task_pool_key ON ax.task_pool (labels_digest, executor_kind, coalesce(rate_class, ''));

DROP TRIGGER job_pool_moved ON ax.job;
DROP TRIGGER job_pool_set ON ax.job;
DROP FUNCTION ax.job_pool_moved();
DROP FUNCTION ax.job_pool_set();
DROP FUNCTION ax.task_pool_for(jsonb, ax.executor_kind);

-- +goose StatementBegin
CREATE FUNCTION ax.task_pool_for(labels jsonb, kind ax.executor_kind, class text) RETURNS integer
LANGUAGE plpgsql AS $$
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
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION ax.job_pool_set() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.pool_id := ax.task_pool_for(NEW.target_labels, NEW.executor_kind, NEW.rate_limit_class);
    RETURN NEW;
END $$;
-- +goose StatementEnd
CREATE TRIGGER job_pool_set BEFORE INSERT OR UPDATE OF target_labels, executor_kind, rate_limit_class ON ax.job
    FOR EACH ROW EXECUTE FUNCTION ax.job_pool_set();

-- A pending task keeps the class it was written with (its rate_class):
-- its pool is its job's labels and kind with that class.
-- +goose StatementBegin
CREATE FUNCTION ax.job_pool_moved() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE ax.task t SET pool_id = m.pool_id
    FROM (SELECT u.id, ax.task_pool_for(NEW.target_labels, NEW.executor_kind, u.rate_class) AS pool_id
          FROM ax.task u
          WHERE u.execution_id IN (SELECT e.id FROM ax.execution e WHERE e.job_id = NEW.id AND e.finished_at IS NULL)
            AND u.state = 'pending' AND NOT u.agentless) m
    WHERE t.id = m.id AND t.pool_id <> m.pool_id;
    RETURN NULL;
END $$;
-- +goose StatementEnd
CREATE TRIGGER job_pool_moved AFTER UPDATE OF target_labels, executor_kind, rate_limit_class ON ax.job
    FOR EACH ROW WHEN (OLD.pool_id IS DISTINCT FROM NEW.pool_id) EXECUTE FUNCTION ax.job_pool_moved();

-- The jobs of a class, and their live tasks, move to the class's pools.
UPDATE ax.job SET pool_id = ax.task_pool_for(target_labels, executor_kind, rate_limit_class)
WHERE rate_limit_class IS NOT NULL;
UPDATE ax.task t SET pool_id = ax.task_pool_for(j.target_labels, j.executor_kind, t.rate_class)
FROM ax.job j
WHERE j.id = t.job_id AND t.rate_class IS NOT NULL AND NOT t.agentless;

-- ax.lease_pools returns the pools agents of labels, executors and label
-- binding may take from, of no rate class or of classes (TaskLeasePick's
-- pools). A function of its own, planned once a session: inside the
-- pick, its three branches were planned again at every large lease.
-- +goose StatementBegin
CREATE FUNCTION ax.lease_pools(labels jsonb, executors text[], label_bound boolean, classes text[])
RETURNS SETOF integer LANGUAGE plpgsql STABLE ROWS 4 AS $$
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
-- +goose StatementEnd

-- Pool 0 is gone from the picks: every lease read it (four probes of
-- empty pools, a tenth of a small lease). A task written without a pool
-- (by a build before 00079, during a rolling upgrade) gets its job's here;
-- the new build always writes one, and the WHEN clause spares its rows
-- the call.
-- +goose StatementBegin
CREATE FUNCTION ax.task_pool_default() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    SELECT CASE WHEN NEW.agentless THEN -1 ELSE ax.task_pool_for(j.target_labels, j.executor_kind, NEW.rate_class) END
    INTO NEW.pool_id
    FROM ax.job j WHERE j.id = NEW.job_id;
    NEW.pool_id := coalesce(NEW.pool_id, 0);
    RETURN NEW;
END $$;
-- +goose StatementEnd
CREATE TRIGGER task_pool_default BEFORE INSERT ON ax.task
    FOR EACH ROW WHEN (NEW.pool_id = 0) EXECUTE FUNCTION ax.task_pool_default();
UPDATE ax.task t SET pool_id = CASE WHEN t.agentless THEN -1 ELSE ax.task_pool_for(j.target_labels, j.executor_kind, t.rate_class) END
FROM ax.job j
WHERE j.id = t.job_id AND t.pool_id = 0;

-- +goose Down
DROP FUNCTION ax.lease_pools(jsonb, text[], boolean, text[]);
DROP TRIGGER task_pool_default ON ax.task;
DROP FUNCTION ax.task_pool_default();
UPDATE ax.task t SET pool_id = ax.task_pool_for(j.target_labels, j.executor_kind, NULL)
FROM ax.job j
WHERE j.id = t.job_id AND t.rate_class IS NOT NULL AND NOT t.agentless;
UPDATE ax.job SET pool_id = ax.task_pool_for(target_labels, executor_kind, NULL)
WHERE rate_limit_class IS NOT NULL;
DROP TRIGGER job_pool_moved ON ax.job;
DROP TRIGGER job_pool_set ON ax.job;
DROP FUNCTION ax.job_pool_moved();
DROP FUNCTION ax.job_pool_set();
DROP FUNCTION ax.task_pool_for(jsonb, ax.executor_kind, text);
DELETE FROM ax.task_pool WHERE rate_class IS NOT NULL;
DROP INDEX ax.task_pool_key;
ALTER TABLE ax.task_pool DROP COLUMN rate_class;
ALTER TABLE ax.task_pool ADD CONSTRAINT task_pool_labels_digest_executor_kind_key UNIQUE (labels_digest, executor_kind);
-- +goose StatementBegin
CREATE FUNCTION ax.task_pool_for(labels jsonb, kind ax.executor_kind) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    pid integer;
    digest uuid := md5(labels::text)::uuid;
BEGIN
    LOOP
        SELECT p.id INTO pid FROM ax.task_pool p WHERE p.labels_digest = digest AND p.executor_kind = kind;
        IF FOUND THEN
            RETURN pid;
        END IF;
        INSERT INTO ax.task_pool (target_labels, executor_kind, labels_digest)
        VALUES (labels, kind, digest)
        ON CONFLICT DO NOTHING
        RETURNING id INTO pid;
        IF pid IS NOT NULL THEN
            RETURN pid;
        END IF;
    END LOOP;
END $$;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE FUNCTION ax.job_pool_set() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.pool_id := ax.task_pool_for(NEW.target_labels, NEW.executor_kind);
    RETURN NEW;
END $$;
-- +goose StatementEnd
CREATE TRIGGER job_pool_set BEFORE INSERT OR UPDATE OF target_labels, executor_kind ON ax.job
    FOR EACH ROW EXECUTE FUNCTION ax.job_pool_set();
-- +goose StatementBegin
CREATE FUNCTION ax.job_pool_moved() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE ax.task t SET pool_id = NEW.pool_id
    WHERE t.execution_id IN (SELECT e.id FROM ax.execution e WHERE e.job_id = NEW.id AND e.finished_at IS NULL)
      AND t.state = 'pending' AND NOT t.agentless AND t.pool_id <> NEW.pool_id;
    RETURN NULL;
END $$;
-- +goose StatementEnd
CREATE TRIGGER job_pool_moved AFTER UPDATE OF target_labels, executor_kind ON ax.job
    FOR EACH ROW WHEN (OLD.pool_id IS DISTINCT FROM NEW.pool_id) EXECUTE FUNCTION ax.job_pool_moved();
