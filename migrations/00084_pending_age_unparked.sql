-- +goose Up

-- Tasks parked behind their concurrency key's limit (00063) leave
-- task_pending_age_idx too. The pick's starved and stealable groups walk
-- it oldest first, and the long poll's check reads it pool by pool: with
-- 20,000 waiting runs of one key of limit 1, every lease of any agent of
-- that pool read 40,000 task rows and dropped them on their key (the
-- starved group), and so did every idle agent's check. A parked task is
-- not leasable until a lease unparks it (which writes key_parked, already
-- in other indexes' predicates: no HOT update is lost).
DROP INDEX ax.task_pending_age_idx;
CREATE INDEX task_pending_age_idx ON ax.task (pool_id, not_before)
    WHERE state = 'pending' AND NOT no_agent AND NOT key_parked;

-- +goose Down
DROP INDEX ax.task_pending_age_idx;
CREATE INDEX task_pending_age_idx ON ax.task (pool_id, not_before) WHERE state = 'pending' AND NOT no_agent;
