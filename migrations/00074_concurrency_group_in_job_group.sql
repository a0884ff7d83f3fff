-- +goose Up

-- A concurrency group counts within its job group (axtype.ConcurrencyScope:
-- 'group:<job group>/<concurrency group>'): named alike by the jobs of
-- every group, it let a key limited to its own groups run tasks under
-- another team's key, at a limit of its own choosing, and hold that
-- team's places. The tasks still to run, and the keys whose places freed,
-- move to the new scopes, so no place is counted twice across the
-- upgrade; ended tasks keep the scope they ran under.
UPDATE ax.task t SET concurrency_scope = 'group:' || j.group_name || '/' || substr(t.concurrency_scope, 7)
FROM ax.job j
WHERE j.id = t.job_id AND t.concurrency_scope LIKE 'group:%' AND t.state IN ('pending', 'leased', 'running');
-- A freed key of an old scope is unparked under each job group that has
-- waiting tasks of it.
INSERT INTO ax.concurrency_key_freed (concurrency_scope, concurrency_key)
SELECT DISTINCT t.concurrency_scope, t.concurrency_key
FROM ax.concurrency_key_freed f
JOIN ax.task t ON t.concurrency_key = f.concurrency_key AND t.state = 'pending'
              AND t.concurrency_scope LIKE 'group:%/' || substr(f.concurrency_scope, 7)
WHERE f.concurrency_scope LIKE 'group:%' AND f.concurrency_scope NOT LIKE 'group:%/%';
DELETE FROM ax.concurrency_key_freed WHERE concurrency_scope LIKE 'group:%' AND concurrency_scope NOT LIKE 'group:%/%';
-- A task parked behind another team's task of the old scope would wait
-- for a place of its new scope to free, which may never come: every
-- parked key of a group scope is looked at again by the next lease (a
-- key without room stays parked: the unpark counts under its lock).
INSERT INTO ax.concurrency_key_freed (concurrency_scope, concurrency_key)
SELECT DISTINCT t.concurrency_scope, t.concurrency_key
FROM ax.task t
WHERE t.state = 'pending' AND t.key_parked AND t.concurrency_scope LIKE 'group:%/%';

-- +goose Down
UPDATE ax.task SET concurrency_scope = 'group:' || substr(concurrency_scope, strpos(concurrency_scope, '/') + 1)
WHERE concurrency_scope LIKE 'group:%/%' AND state IN ('pending', 'leased', 'running');
UPDATE ax.concurrency_key_freed SET concurrency_scope = 'group:' || substr(concurrency_scope, strpos(concurrency_scope, '/') + 1)
WHERE concurrency_scope LIKE 'group:%/%';
