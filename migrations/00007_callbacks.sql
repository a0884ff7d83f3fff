-- +goose Up
-- Outbound work and replay-proof requests: result callbacks (a
-- transactional outbox, every delivery attempt, a circuit breaker per
-- destination host), the secrets that sign callbacks and HTTP jobs,
-- agentless HTTP tasks run by ax serve itself, HMAC request signing keys
-- with their nonces, and responses remembered for any mutating call made
-- with an Idempotency-Key.

CREATE TYPE ax.callback_state AS ENUM ('pending', 'delivered', 'callback_failed');
CREATE TYPE ax.breaker_state AS ENUM ('closed', 'open', 'half_open');

-- job_secret holds the Standard Webhooks secret ("whsec_…") that signs a
-- job's callbacks and HTTP requests. Rotation keeps the previous secret
-- valid until previous_expires_at, and both signatures are sent meanwhile,
-- so receivers can switch without losing a message. Secrets are stored as
-- such: signing needs them.
CREATE TABLE ax.job_secret (
    job_id               uuid PRIMARY KEY REFERENCES ax.job (id) ON DELETE CASCADE,
    secret               text NOT NULL,
    previous_secret      text,
    previous_expires_at  timestamptz,
    rotated_at           timestamptz,
    created_at           timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT job_secret_is_whsec CHECK (secret LIKE 'whsec\_%'),
    CONSTRAINT job_secret_previous_expires CHECK ((previous_secret IS NULL) = (previous_expires_at IS NULL))
);

-- Jobs made before this migration get a secret too (random bits from two
-- v4 UUIDs: 244 of 256). Rotate it through the API to see it.
INSERT INTO ax.job_secret (job_id, secret)
SELECT id, 'whsec_' || encode(decode(replace(gen_random_uuid()::text || gen_random_uuid()::text, '-', ''), 'hex'), 'base64')
FROM ax.job;

-- callback is the outbox row of an ended execution whose job has a
-- callback URL: written by the trigger below in the transaction that ends
-- the execution, so a result is never lost and never announced before it
-- commits. enqueued_at is set when the River job that delivers it has been
-- inserted (normally in that same transaction; a periodic flush catches
-- any path that did not). delivery counts redeliveries: a worker of an
-- older delivery stands down.
CREATE TABLE ax.callback (
    execution_id   uuid PRIMARY KEY REFERENCES ax.execution (id) ON DELETE CASCADE,
    job_id         uuid NOT NULL,
    state          ax.callback_state NOT NULL DEFAULT 'pending',
    delivery       integer NOT NULL DEFAULT 1,
    attempts       integer NOT NULL DEFAULT 0,
    last_status    integer,
    last_error     text,
    next_attempt_at timestamptz,
    enqueued_at    timestamptz,
    delivered_at   timestamptz,
    failed_at      timestamptz,
    created_at     timestamptz NOT NULL DEFAULT now(),
    updated_at     timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT callback_delivered_at_set CHECK ((state = 'delivered') = (delivered_at IS NOT NULL)),
    CONSTRAINT callback_failed_at_set CHECK ((state = 'callback_failed') = (failed_at IS NOT NULL)),
    CONSTRAINT callback_counts_positive CHECK (delivery >= 1 AND attempts >= 0)
);
CREATE INDEX callback_unenqueued_idx ON ax.callback (created_at) WHERE enqueued_at IS NULL;
CREATE INDEX callback_failed_idx ON ax.callback (failed_at) WHERE state = 'callback_failed';

-- callback_attempt records every request made to deliver a callback.
-- status_code is null when no answer came (refused, timed out, blocked).
CREATE TABLE ax.callback_attempt (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    execution_id  uuid NOT NULL REFERENCES ax.callback (execution_id) ON DELETE CASCADE,
    delivery      integer NOT NULL,
    attempt       integer NOT NULL,
    url           text NOT NULL,
    at            timestamptz NOT NULL,
    status_code   integer,
    latency_ms    double precision NOT NULL,
    error         text NOT NULL DEFAULT '',
    CONSTRAINT callback_attempt_number_positive CHECK (delivery >= 1 AND attempt >= 1)
);
CREATE INDEX callback_attempt_execution_idx ON ax.callback_attempt (execution_id, id);

-- callback_breaker is the circuit breaker of one destination host
-- (host[:port]), shared by every replica: closed lets deliveries through;
-- open holds them until open_until; half_open lets one probe through
-- (probe_started_at) whose outcome closes or reopens it.
CREATE TABLE ax.callback_breaker (
    host                  text PRIMARY KEY,
    state                 ax.breaker_state NOT NULL DEFAULT 'closed',
    consecutive_failures  integer NOT NULL DEFAULT 0,
    opened_at             timestamptz,
    open_until            timestamptz,
    probe_started_at      timestamptz,
    updated_at            timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT callback_breaker_open_has_until CHECK ((state = 'closed') = (open_until IS NULL)),
    CONSTRAINT callback_breaker_probe_when_half_open CHECK ((state = 'half_open') = (probe_started_at IS NOT NULL))
);

-- execution_ended writes the outbox rows of executions that ended in the
-- statement (whatever code path ended them) and tells long polls, in one
-- NOTIFY per 200 ended executions (payload: their ids, comma-separated).
-- +goose StatementBegin
CREATE FUNCTION ax.execution_ended() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    notified integer;
BEGIN
    WITH ended AS (
        SELECT n.id, n.job_id
        FROM new_rows n JOIN old_rows o ON o.id = n.id
        WHERE o.state IN ('pending', 'running') AND n.state NOT IN ('pending', 'running')
    ), outbox AS (
        INSERT INTO ax.callback (execution_id, job_id)
        SELECT e.id, e.job_id FROM ended e JOIN ax.job j ON j.id = e.job_id
        WHERE j.callback_url IS NOT NULL
        ON CONFLICT (execution_id) DO NOTHING
    ), notes AS (
        SELECT pg_notify('ax_execution_ended', string_agg(id::text, ','))
        FROM (SELECT id, (row_number() OVER () - 1) / 200 AS chunk FROM ended) c
        GROUP BY chunk
    )
    SELECT count(*) INTO notified FROM notes;
    RETURN NULL;
END $$;
-- +goose StatementEnd

CREATE TRIGGER execution_ended AFTER UPDATE ON ax.execution
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION ax.execution_ended();

-- Agentless HTTP tasks (executor http, no target labels) are run by ax serve
-- itself; agents never lease them (TaskLease filters on NOT agentless).
-- The column is set when the task is made.
ALTER TABLE ax.task ADD COLUMN agentless boolean NOT NULL DEFAULT false;
-- Agentless tasks whose execution was cancelled while their request ran
-- have no agent to stop them: the outbox flush ends them.
CREATE INDEX task_agentless_cancel_idx ON ax.task (execution_id)
    WHERE agentless AND state IN ('leased', 'running') AND cancel_requested_at IS NOT NULL;

-- api_signing_key is a secret for HMAC-signed requests, acting for its API
-- key (and its scopes). The secret is stored as such: verifying needs it.
CREATE TABLE ax.api_signing_key (
    id          uuid PRIMARY KEY,
    api_key_id  uuid NOT NULL REFERENCES ax.api_key (id) ON DELETE CASCADE,
    secret      bytea NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    revoked_at  timestamptz,
    CONSTRAINT api_signing_key_secret_size CHECK (length(secret) = 32)
);

-- nonce remembers the nonces of signed requests for as long as their
-- timestamp would be accepted, so a replay is refused.
CREATE TABLE ax.nonce (
    key_id      uuid NOT NULL,
    nonce       text NOT NULL,
    expires_at  timestamptz NOT NULL,
    PRIMARY KEY (key_id, nonce),
    CONSTRAINT nonce_length CHECK (length(nonce) BETWEEN 16 AND 128)
);
CREATE INDEX nonce_expires_idx ON ax.nonce (expires_at);

-- Any mutating call may carry an Idempotency-Key now: its response headers
-- are replayed with its status and body.
ALTER TABLE ax.idempotency_key ADD COLUMN response_headers jsonb NOT NULL DEFAULT '{}';

-- Callbacks that gave up, newest first: the operator's "what did not reach
-- its receiver" in one SELECT.
CREATE VIEW ax.callbacks_failed AS
SELECT j.group_name, j.name, c.execution_id, c.attempts, c.last_status, c.last_error, c.failed_at
FROM ax.callback c JOIN ax.job j ON j.id = c.job_id
WHERE c.state = 'callback_failed'
ORDER BY c.failed_at DESC;

-- +goose Down
DROP VIEW ax.callbacks_failed;
ALTER TABLE ax.idempotency_key DROP COLUMN response_headers;
DROP TABLE ax.nonce;
DROP TABLE ax.api_signing_key;
DROP INDEX ax.task_agentless_cancel_idx;
ALTER TABLE ax.task DROP COLUMN agentless;
DROP TRIGGER execution_ended ON ax.execution;
DROP FUNCTION ax.execution_ended();
DROP TABLE ax.callback_breaker;
DROP TABLE ax.callback_attempt;
DROP TABLE ax.callback;
DROP TABLE ax.job_secret;
DROP TYPE ax.breaker_state;
DROP TYPE ax.callback_state;
