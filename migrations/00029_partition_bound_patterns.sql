-- +goose Up

-- Partition bounds are read from pg_get_expr(relpartbound) with patterns
-- that match only the bounds of the tables meant: timestamps for the
-- history tables, UUIDs for the run-keyed ones (00026). The filter on the
-- parent table is not guaranteed to run before the cast: once the catalogs
-- have statistics, Postgres plans a hash join that casts every partition's
-- bound, and history_set_width failed with "invalid input syntax for type
-- timestamp with time zone" on a UUID bound. A bound of the other kind now
-- does not match, and its NULL casts to NULL.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION ax.history_set_width(p_width interval) RETURNS void
LANGUAGE plpgsql AS $$
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
-- +goose StatementEnd

-- +goose Down

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION ax.history_set_width(p_width interval) RETURNS void
LANGUAGE plpgsql AS $$
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
                                                'FROM \(''([^'']+)''\) TO \(''([^'']+)''\)') AS b) m
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
                                                'FROM \(''([^'']+)''\) TO \(''([^'']+)''\)') AS b) m
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
-- +goose StatementEnd
