-- +goose Up
-- Trust boundaries (issue #12, items 7 and 11): what a key may reach and
-- what an agent may run.

-- labels binds an agent key to the label sets its agents may declare:
-- {"pool": ["billing", "reports"]} lets them carry pool=billing or
-- pool=reports and no other label. NULL: any labels (the old behaviour).
-- groups limits a key to the jobs and runs of these job groups; NULL: all.
-- minted_by is the key that registered the agent this key belongs to:
-- revoking a key revokes what it minted.
ALTER TABLE ax.api_key
    ADD COLUMN labels jsonb,
    ADD COLUMN groups text[],
    ADD COLUMN minted_by uuid REFERENCES ax.api_key (id) ON DELETE CASCADE,
    ADD CONSTRAINT api_key_labels_is_object CHECK (labels IS NULL OR jsonb_typeof(labels) = 'object'),
    ADD CONSTRAINT api_key_groups_not_empty CHECK (groups IS NULL OR cardinality(groups) > 0);
CREATE INDEX api_key_minted_by_idx ON ax.api_key (minted_by) WHERE minted_by IS NOT NULL;

-- Revoking a key revokes the agent tokens it minted (recursively, though
-- agent tokens mint nothing) and takes their agents offline, however it
-- is revoked: `ax key revoke` or an UPDATE in psql. Every replica then
-- forgets the keys it cached (ax_api_key_revoked), so they get 401 at once.
-- +goose StatementBegin
CREATE FUNCTION ax.api_key_revoked() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE ax.api_key SET revoked_at = NEW.revoked_at
    WHERE minted_by = NEW.id AND revoked_at IS NULL;
    UPDATE ax.agent SET state = 'offline'
    WHERE api_key_id = NEW.id AND state <> 'offline';
    RETURN NULL;
END $$;
-- +goose StatementEnd
CREATE TRIGGER api_key_revoked AFTER UPDATE OF revoked_at ON ax.api_key
    FOR EACH ROW WHEN (OLD.revoked_at IS NULL AND NEW.revoked_at IS NOT NULL)
    EXECUTE FUNCTION ax.api_key_revoked();

-- +goose StatementBegin
CREATE FUNCTION ax.api_key_revoked_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('ax_api_key_revoked', '');
    RETURN NULL;
END $$;
-- +goose StatementEnd
CREATE TRIGGER api_key_revoked_notify AFTER UPDATE OF revoked_at ON ax.api_key
    FOR EACH STATEMENT EXECUTE FUNCTION ax.api_key_revoked_notify();

-- executors are the kinds of task an agent accepts; it is never handed
-- another kind. Shell is off unless the agent enables it (AX_EXECUTORS).
-- registered_by is the key the agent registered with: with its name, the
-- agent's identity across registrations. drained_at is set when an
-- operator drained it (not when it drained itself on SIGTERM): an
-- operator's drain, like a quarantine (quarantined_at), survives
-- deregistration, going offline and registering again, until an admin
-- resumes the agent or, for a quarantine, its probes succeed.
ALTER TABLE ax.agent
    -- text[], not ax.executor_kind[]: pgx reads it without a registered
    -- type (agent rows are read whole); the CHECK keeps it to the kinds.
    ADD COLUMN executors text[] NOT NULL DEFAULT '{handler,http}',
    ADD COLUMN registered_by uuid,
    ADD COLUMN drained_at timestamptz,
    -- label_bound: registered with a key bound to labels, the agent serves
    -- only jobs targeted at labels it has, never untargeted ones.
    ADD COLUMN label_bound boolean NOT NULL DEFAULT false,
    DROP CONSTRAINT agent_quarantined_at_set,
    ADD CONSTRAINT agent_quarantined_at_set CHECK (state <> 'quarantined' OR quarantined_at IS NOT NULL),
    ADD CONSTRAINT agent_executors_known CHECK (
        cardinality(executors) > 0 AND executors <@ ARRAY['shell', 'http', 'handler']);
CREATE INDEX agent_identity_idx ON ax.agent (registered_by, name, registered_at DESC);

-- Why is a task still pending? One row per pending agent task that no
-- live agent may take, with the reason: no agent has its labels, or none
-- of those accepts its executor kind (e.g. shell).
CREATE VIEW ax.tasks_without_agent AS
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

-- +goose Down
DROP VIEW ax.tasks_without_agent;
DROP INDEX ax.agent_identity_idx;
UPDATE ax.agent SET quarantined_at = NULL WHERE state <> 'quarantined';
ALTER TABLE ax.agent
    DROP CONSTRAINT agent_executors_known,
    DROP CONSTRAINT agent_quarantined_at_set,
    ADD CONSTRAINT agent_quarantined_at_set CHECK ((state = 'quarantined') = (quarantined_at IS NOT NULL)),
    DROP COLUMN label_bound,
    DROP COLUMN drained_at,
    DROP COLUMN registered_by,
    DROP COLUMN executors;
DROP TRIGGER api_key_revoked_notify ON ax.api_key;
DROP FUNCTION ax.api_key_revoked_notify();
DROP TRIGGER api_key_revoked ON ax.api_key;
DROP FUNCTION ax.api_key_revoked();
DROP INDEX ax.api_key_minted_by_idx;
ALTER TABLE ax.api_key
    DROP CONSTRAINT api_key_groups_not_empty,
    DROP CONSTRAINT api_key_labels_is_object,
    DROP COLUMN minted_by,
    DROP COLUMN groups,
    DROP COLUMN labels;
