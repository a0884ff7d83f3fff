-- +goose Up

-- The lease and complete transactions of small batches run with generic
-- plans (db.WithBatchTxV), and Postgres may choose them for large ones:
-- planned once, without the arrays' lengths. A generic
-- plan takes an unnested array or a read by = ANY of one for 10 rows, and
-- so joined two of them in a nested loop: every result with every task,
-- 40,000 pairs for 200 results, a connection at a time, by the
-- statistics of the moment its plan was made (auto_explain, Postgres 15;
-- BenchmarkEndToEndReplicas ran fast or slow by which plans its
-- connections had). Read through these functions, the same rows come with
-- an estimate of 1,000, for which a join is hashed whatever the batch.
-- plpgsql, so that the planner does not inline them and lose the estimate.

-- task_results is TaskComplete's input: one row per task (the first
-- result of a task reported twice).
-- Its row type is this view's (it shows no rows): sqlc, which reads the
-- migrations, knows the columns of a view, not of a composite type.
CREATE VIEW ax.task_result AS
SELECT NULL::uuid AS id, NULL::uuid AS token, NULL::text AS state, NULL::jsonb AS result, NULL::text AS error,
       NULL::text AS error_code
WHERE false;
-- +goose StatementBegin
CREATE FUNCTION ax.task_results(p_ids uuid[], p_tokens uuid[], p_states text[], p_results jsonb[],
                                p_errors text[], p_codes text[])
RETURNS SETOF ax.task_result
LANGUAGE plpgsql STABLE ROWS 1000 AS $$
BEGIN
    RETURN QUERY
    SELECT DISTINCT ON (x.id) x.id, x.token, x.state, x.result, x.error, x.error_code
    FROM unnest(p_ids, p_tokens, p_states, p_results, p_errors, p_codes)
         WITH ORDINALITY AS x(id, token, state, result, error, error_code, n)
    ORDER BY x.id, x.n;
END $$;
-- +goose StatementEnd

-- leased_runs reads the runs TaskLeaseTake leases tasks of, by primary
-- key from the bound array.
-- +goose StatementBegin
CREATE FUNCTION ax.leased_runs(p_ids uuid[])
RETURNS SETOF ax.execution
LANGUAGE plpgsql STABLE ROWS 1000 AS $$
BEGIN
    RETURN QUERY
    SELECT e.*
    FROM ax.execution e
    WHERE e.id = ANY(p_ids);
END $$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION ax.leased_runs(uuid[]);
DROP FUNCTION ax.task_results(uuid[], uuid[], text[], jsonb[], text[], text[]);
DROP VIEW ax.task_result;
