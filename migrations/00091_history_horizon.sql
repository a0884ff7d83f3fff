-- +goose Up

-- The instant before which no run is kept in history: the longest
-- retention in use (server-wide, or any job's) and two partition widths
-- of margin (a partition is dropped once its whole range has passed)
-- before p_now. A row that names only runs or agents of before this
-- instant, and none still live, answers nothing a kept run asks: the
-- cleanup deletes such rows of the tables that no partition drop reaches
-- (agents and their tokens, notices, backfill and re-run links), which
-- otherwise grew by a row per agent start, per notice, per backfilled
-- tick and per re-run, for as long as ax runs. HistoryMakePartitions
-- makes partitions as far ahead by the same span.
-- +goose StatementBegin
CREATE FUNCTION ax.longest_retention() RETURNS interval
    LANGUAGE sql STABLE AS $$
    SELECT greatest(s.finished_retention, s.failed_retention,
                    coalesce((SELECT make_interval(secs => max(greatest(coalesce(j.history_retention_seconds, 0),
                                                                   coalesce(j.history_failed_retention_seconds, 0))))
                              FROM ax.job j), interval '0'))
    FROM ax.history_setting s
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION ax.history_horizon(p_now timestamptz) RETURNS timestamptz
    LANGUAGE sql STABLE AS $$
    SELECT p_now - 2 * s.partition_width - ax.longest_retention()
    FROM ax.history_setting s
$$;
-- +goose StatementEnd

-- An agent's token is deleted with the agent (AgentPruneGone), and the
-- token's delete deletes what names it: without an index each one read
-- every agent.
CREATE INDEX agent_api_key_idx ON ax.agent (api_key_id);

-- +goose Down
DROP INDEX ax.agent_api_key_idx;
DROP FUNCTION ax.history_horizon(timestamptz);
DROP FUNCTION ax.longest_retention();
