-- +goose Up

-- The lease broker records the results of several agents in one
-- statement (coalesced completions): each result carries the agent that
-- reports it, which must hold the task's lease. ax.task_results (00034)
-- stays for replicas of the previous version during a rolling upgrade.
-- The nil UUID stands for no agent (ax's own results, not checked): the
-- array comes from Go, whose uuid type has no null.
CREATE VIEW ax.agent_task_result AS
SELECT NULL::uuid AS id, NULL::uuid AS token, NULL::text AS state, NULL::jsonb AS result, NULL::text AS error,
       NULL::text AS error_code, NULL::uuid AS agent_id
WHERE false;
-- +goose StatementBegin
CREATE FUNCTION ax.agent_task_results(p_ids uuid[], p_tokens uuid[], p_states text[], p_results jsonb[],
                                      p_errors text[], p_codes text[], p_agents uuid[])
RETURNS SETOF ax.agent_task_result
LANGUAGE plpgsql STABLE ROWS 1000 AS $$
BEGIN
    RETURN QUERY
    SELECT DISTINCT ON (x.id) x.id, x.token, x.state, x.result, x.error, x.error_code,
           nullif(x.agent_id, '00000000-0000-0000-0000-000000000000'::uuid)
    FROM unnest(p_ids, p_tokens, p_states, p_results, p_errors, p_codes, p_agents)
         WITH ORDINALITY AS x(id, token, state, result, error, error_code, agent_id, n)
    ORDER BY x.id, x.n;
END $$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION ax.agent_task_results(uuid[], uuid[], text[], jsonb[], text[], text[], uuid[]);
DROP VIEW ax.agent_task_result;
