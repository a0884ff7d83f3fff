-- +goose Up

-- Ticks of a paused job are recorded as skipped (reason paused) as they
-- pass, not only when the job resumes: the trigger loop claims paused
-- triggers too when a tick has passed, records it and moves on. So the
-- due index covers paused triggers.
DROP INDEX ax.trigger_due_idx;
CREATE INDEX trigger_due_idx ON ax.trigger (next_fire_at)
    WHERE next_fire_at IS NOT NULL AND set_aside_at IS NULL;

-- +goose Down

DROP INDEX ax.trigger_due_idx;
CREATE INDEX trigger_due_idx ON ax.trigger (next_fire_at)
    WHERE next_fire_at IS NOT NULL AND NOT paused AND set_aside_at IS NULL;
