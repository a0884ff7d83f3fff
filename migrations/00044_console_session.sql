-- +goose Up

-- A console session is a row here, not the API key in a cookie: the
-- cookie holds a random id whose SHA-256 is id_hash, useless as a Bearer
-- key on the API. key_id is the key the visitor logged in with; revoking
-- it deletes its sessions (trigger below), deleting it cascades. A
-- session ends when it has been idle past expires_at (moved forward on
-- use, never past ends_at) or at ends_at, whatever comes first; logout
-- deletes the row. csrf is the token of the session's forms, one per
-- session. The maintenance job deletes ended rows.
CREATE TABLE ax.console_session (
    id_hash      bytea       PRIMARY KEY,
    key_id       uuid        NOT NULL REFERENCES ax.api_key (id) ON DELETE CASCADE,
    csrf         text        NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    last_seen_at timestamptz NOT NULL DEFAULT now(),
    expires_at   timestamptz NOT NULL,
    ends_at      timestamptz NOT NULL,
    CONSTRAINT console_session_id_hash_len CHECK (octet_length(id_hash) = 32),
    CONSTRAINT console_session_expires_within CHECK (expires_at <= ends_at)
);
CREATE INDEX console_session_key_id ON ax.console_session (key_id);
CREATE INDEX console_session_expires_at ON ax.console_session (expires_at);

-- +goose StatementBegin
CREATE FUNCTION ax.console_session_key_revoked() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM ax.console_session WHERE key_id = NEW.id;
    RETURN NULL;
END $$;
-- +goose StatementEnd
CREATE TRIGGER console_session_key_revoked AFTER UPDATE OF revoked_at ON ax.api_key
    FOR EACH ROW WHEN (OLD.revoked_at IS NULL AND NEW.revoked_at IS NOT NULL)
    EXECUTE FUNCTION ax.console_session_key_revoked();

-- +goose Down
DROP TRIGGER console_session_key_revoked ON ax.api_key;
DROP FUNCTION ax.console_session_key_revoked();
DROP TABLE ax.console_session;
