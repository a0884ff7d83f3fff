-- +goose Up

-- http_task_slot_wait is an agentless HTTP request waiting for a slot (its
-- job or its host at its cap): the River job that will send it, snoozed.
-- A worker that frees a slot wakes the longest-waiting request of that
-- job and of that host at once, instead of every waiting request looking
-- for room every second (a job of thousands of shards aimed at a host that
-- never answers was thousands of wake-ups a second). since keeps a
-- request's place while it waits again; woken_at keeps two frees from
-- waking the same one.
CREATE TABLE ax.http_task_slot_wait (
    river_job_id bigint PRIMARY KEY,
    job_id       uuid NOT NULL REFERENCES ax.job (id) ON DELETE CASCADE,
    host         text NOT NULL,
    since        timestamptz NOT NULL DEFAULT now(),
    woken_at     timestamptz
);
CREATE INDEX http_task_slot_wait_job_idx ON ax.http_task_slot_wait (job_id, since);
CREATE INDEX http_task_slot_wait_host_idx ON ax.http_task_slot_wait (host, since);

-- +goose Down
DROP TABLE ax.http_task_slot_wait;
