-- +goose Up
-- Core of ax: job definitions, their hot trigger rows, API keys and
-- idempotency keys. Everything lives in schema ax so psql users can
-- `SET search_path = ax` and read it.
CREATE SCHEMA IF NOT EXISTS ax;

CREATE TYPE ax.trigger_kind AS ENUM ('cron', 'interval', 'delay', 'manual');
CREATE TYPE ax.executor_kind AS ENUM ('shell', 'http', 'handler');
CREATE TYPE ax.route_strategy AS ENUM (
    'round_robin', 'random', 'weighted', 'least_active',
    'consistent_hash', 'load_aware', 'broadcast', 'failover');
CREATE TYPE ax.concurrency_policy AS ENUM ('allow', 'forbid', 'replace');
CREATE TYPE ax.misfire_policy AS ENUM ('fire_once', 'skip', 'fire_all');
CREATE TYPE ax.api_scope AS ENUM ('admin', 'submit', 'read', 'agent');

-- job is the definition of what to run, when, where and how. Its hot
-- scheduling state lives in ax.trigger so the definition row is only
-- written when a user changes it.
CREATE TABLE ax.job (
    id                      uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    name                    text NOT NULL,
    group_name              text NOT NULL DEFAULT 'default',
    owner                   text NOT NULL DEFAULT '',
    description             text NOT NULL DEFAULT '',
    trigger_kind            ax.trigger_kind NOT NULL,
    cron_expr               text,
    timezone                text NOT NULL DEFAULT 'UTC',
    interval_seconds        bigint,
    run_at                  timestamptz,
    executor_kind           ax.executor_kind NOT NULL,
    executor                jsonb NOT NULL DEFAULT '{}',
    target_labels           jsonb NOT NULL DEFAULT '{}',
    route_strategy          ax.route_strategy NOT NULL DEFAULT 'round_robin',
    route_key               text NOT NULL DEFAULT '',
    shard_count             integer NOT NULL DEFAULT 1,
    shard_params            jsonb NOT NULL DEFAULT '[]',
    priority                integer NOT NULL DEFAULT 0,
    timeout_seconds         integer NOT NULL DEFAULT 3600,
    retry_max_attempts      integer NOT NULL DEFAULT 1,
    retry_backoff_seconds   integer NOT NULL DEFAULT 5,
    retry_backoff_max_seconds integer NOT NULL DEFAULT 600,
    concurrency_policy      ax.concurrency_policy NOT NULL DEFAULT 'allow',
    misfire_policy          ax.misfire_policy NOT NULL DEFAULT 'fire_once',
    misfire_window_seconds  integer NOT NULL DEFAULT 86400,
    misfire_max_fires       integer NOT NULL DEFAULT 100,
    rate_limit_class        text,
    callback_url            text,
    params                  jsonb NOT NULL DEFAULT '{}',
    created_at              timestamptz NOT NULL DEFAULT now(),
    updated_at              timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT job_name_unique UNIQUE (group_name, name),
    CONSTRAINT job_name_not_blank CHECK (length(btrim(name)) > 0),
    CONSTRAINT job_cron_has_expr CHECK (trigger_kind <> 'cron' OR cron_expr IS NOT NULL),
    CONSTRAINT job_interval_positive CHECK (trigger_kind <> 'interval' OR interval_seconds >= 1),
    CONSTRAINT job_delay_has_run_at CHECK (trigger_kind <> 'delay' OR run_at IS NOT NULL),
    CONSTRAINT job_shard_count_range CHECK (shard_count BETWEEN 1 AND 10000),
    CONSTRAINT job_timeout_positive CHECK (timeout_seconds > 0),
    CONSTRAINT job_retry_attempts_range CHECK (retry_max_attempts BETWEEN 1 AND 100),
    CONSTRAINT job_retry_backoff_range CHECK (retry_backoff_seconds >= 0 AND retry_backoff_max_seconds >= retry_backoff_seconds),
    CONSTRAINT job_misfire_bounds CHECK (misfire_window_seconds >= 0 AND misfire_max_fires BETWEEN 1 AND 10000),
    CONSTRAINT job_executor_is_object CHECK (jsonb_typeof(executor) = 'object'),
    CONSTRAINT job_target_labels_is_object CHECK (jsonb_typeof(target_labels) = 'object'),
    CONSTRAINT job_shard_params_is_array CHECK (jsonb_typeof(shard_params) = 'array'),
    CONSTRAINT job_params_is_object CHECK (jsonb_typeof(params) = 'object')
);

CREATE INDEX job_owner_idx ON ax.job (owner, id);

-- trigger is the one small hot row per job. The partial index on
-- next_fire_at is the time wheel: finding due work reads only due rows.
CREATE TABLE ax.trigger (
    job_id              uuid PRIMARY KEY REFERENCES ax.job (id) ON DELETE CASCADE,
    next_fire_at        timestamptz,
    paused              boolean NOT NULL DEFAULT false,
    paused_at           timestamptz,
    last_fire_at        timestamptz,
    last_scheduled_for  timestamptz,
    updated_at          timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT trigger_paused_at_set CHECK (paused = (paused_at IS NOT NULL))
);

CREATE INDEX trigger_due_idx ON ax.trigger (next_fire_at)
    WHERE next_fire_at IS NOT NULL AND NOT paused;

-- Hot row: leave room for HOT updates and vacuum it often.
ALTER TABLE ax.trigger SET (fillfactor = 70,
    autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_threshold = 1000);

-- api_key holds only a SHA-256 of each key: keys are 256-bit random
-- strings, so a fast hash is enough and a stolen table grants nothing.
CREATE TABLE ax.api_key (
    id            uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    name          text NOT NULL,
    key_hash      bytea NOT NULL,
    key_prefix    text NOT NULL,
    scopes        ax.api_scope[] NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    last_used_at  timestamptz,
    revoked_at    timestamptz,
    CONSTRAINT api_key_hash_unique UNIQUE (key_hash),
    CONSTRAINT api_key_has_scope CHECK (cardinality(scopes) > 0)
);

-- idempotency_key remembers the response to a mutating call so a client's
-- retry with the same key gets the same answer (Stripe semantics).
CREATE TABLE ax.idempotency_key (
    api_key_id      uuid NOT NULL REFERENCES ax.api_key (id) ON DELETE CASCADE,
    key             text NOT NULL,
    method          text NOT NULL,
    path            text NOT NULL,
    request_hash    bytea NOT NULL,
    response_status integer,
    response_body   bytea,
    locked_until    timestamptz,
    created_at      timestamptz NOT NULL DEFAULT now(),
    expires_at      timestamptz NOT NULL DEFAULT now() + interval '24 hours',
    PRIMARY KEY (api_key_id, key),
    CONSTRAINT idempotency_key_length CHECK (length(key) BETWEEN 1 AND 255)
);

CREATE INDEX idempotency_key_expires_idx ON ax.idempotency_key (expires_at);

-- +goose Down
DROP TABLE ax.idempotency_key;
DROP TABLE ax.api_key;
DROP TABLE ax.trigger;
DROP TABLE ax.job;
DROP TYPE ax.api_scope;
DROP TYPE ax.misfire_policy;
DROP TYPE ax.concurrency_policy;
DROP TYPE ax.route_strategy;
DROP TYPE ax.executor_kind;
DROP TYPE ax.trigger_kind;
-- Schema ax stays: it holds goose's version table (ax.schema_version),
-- which the migrator makes before this migration runs.
