-- +goose Up
-- shard_generator makes each run's shard params from the fire instead of a
-- stored list or range (db.ShardGenerator; README "Shards"):
--   time_window: shard i of n gets the i-th of n equal windows of
--                shard_window_seconds ending at the fire's scheduled time,
--                in the job's timezone;
--   mod:         shard i of n gets the residue i of modulus n.
-- NULL keeps the list or range. The window is required with time_window,
-- refused otherwise, at most 366 days, and splits into whole seconds.
ALTER TABLE ax.job
    ADD COLUMN shard_generator text,
    ADD COLUMN shard_window_seconds integer,
    ADD CONSTRAINT job_shard_generator_kind CHECK (shard_generator IN ('time_window', 'mod')),
    ADD CONSTRAINT job_shard_window_only_time_window
        CHECK ((shard_generator IS NOT DISTINCT FROM 'time_window') = (shard_window_seconds IS NOT NULL)),
    ADD CONSTRAINT job_shard_window_range CHECK (shard_window_seconds BETWEEN 1 AND 31622400),
    ADD CONSTRAINT job_shard_window_whole_seconds CHECK (shard_window_seconds % shard_count = 0);

-- +goose Down
ALTER TABLE ax.job DROP COLUMN shard_window_seconds, DROP COLUMN shard_generator;
