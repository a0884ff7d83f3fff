-- An agent that goes offline loses its token (issue #36, item 7): after
-- POST /v1/agents/{id}/deregister, or once the reaper marks it offline
-- for silence, the token it registered with answers 401, and the agent
-- registers again (a new id and token). Before, the same token's next
-- heartbeat made the agent active again. Only the tokens minted at
-- registration (minted_by set) are revoked, never the key that
-- registered; api_key_revoked_notify makes every replica forget it.

-- +goose Up
-- +goose StatementBegin
CREATE FUNCTION ax.agent_offline_revokes_token() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE ax.api_key SET revoked_at = now()
    WHERE id = NEW.api_key_id AND minted_by IS NOT NULL AND revoked_at IS NULL;
    RETURN NULL;
END $$;
-- +goose StatementEnd
CREATE TRIGGER agent_offline_revokes_token AFTER UPDATE OF state ON ax.agent
    FOR EACH ROW WHEN (NEW.state = 'offline' AND OLD.state <> 'offline')
    EXECUTE FUNCTION ax.agent_offline_revokes_token();

-- +goose Down
DROP TRIGGER agent_offline_revokes_token ON ax.agent;
DROP FUNCTION ax.agent_offline_revokes_token();
