-- +goose Up

-- Task ids are UUIDv7 from now on, as execution ids are (issue #14:
-- BenchmarkLeaseWithHistory). A finished task is inserted into the
-- task_history partition of its retention day, which holds a day of
-- history; with random ids each insert went to a random page of that
-- partition's (id) index, most of them outside shared_buffers (a read, a
-- dirtied page, a full-page image in the WAL after each checkpoint, per
-- task). Time-ordered ids go to the end of the index, a page that stays
-- in memory. Ids already given keep their values.
ALTER TABLE ax.task ALTER COLUMN id SET DEFAULT ax.uuid_v7();
ALTER TABLE ax.task_history ALTER COLUMN id SET DEFAULT ax.uuid_v7();

-- +goose Down

ALTER TABLE ax.task_history ALTER COLUMN id SET DEFAULT gen_random_uuid();
ALTER TABLE ax.task ALTER COLUMN id SET DEFAULT gen_random_uuid();
