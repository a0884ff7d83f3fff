-- name: RateClassInsert :one
INSERT INTO ax.rate_class (name, description, rate, burst, tokens, manual_min_priority,
                           auto_min_priority, auto_depth, auto_age_seconds, groups)
VALUES (@name, @description, @rate, @burst, @burst, sqlc.narg('manual_min_priority'),
        sqlc.narg('auto_min_priority'), sqlc.narg('auto_depth'), sqlc.narg('auto_age_seconds'),
        sqlc.narg('groups')::text[])
RETURNING *;

-- RateClassUpdate changes a class's settings; the bucket keeps its level,
-- capped at the new burst.
-- name: RateClassUpdate :one
UPDATE ax.rate_class
SET description = @description, rate = @rate, burst = @burst,
    tokens = least(@burst, tokens + rate * greatest(0, extract(epoch FROM now() - refilled_at))),
    refilled_at = greatest(refilled_at, now()),
    manual_min_priority = sqlc.narg('manual_min_priority'),
    auto_min_priority = sqlc.narg('auto_min_priority'), auto_depth = sqlc.narg('auto_depth'),
    auto_age_seconds = sqlc.narg('auto_age_seconds'), groups = sqlc.narg('groups')::text[],
    degraded_since = CASE WHEN sqlc.narg('auto_min_priority')::integer IS NULL THEN NULL ELSE degraded_since END,
    updated_at = now()
WHERE name = @name
RETURNING *;

-- RateClassSetManualFloor switches an operator's priority floor on (a
-- value) or off (null).
-- name: RateClassSetManualFloor :one
UPDATE ax.rate_class SET manual_min_priority = sqlc.narg('min_priority'), updated_at = now()
WHERE name = @name
RETURNING *;

-- RateClassGroups returns the job groups a class is kept to (NULL: any).
-- name: RateClassGroups :one
SELECT groups FROM ax.rate_class WHERE name = @name;

-- name: RateClassDelete :execrows
DELETE FROM ax.rate_class WHERE name = @name;

-- RateClassList returns classes with their refilled token level, the
-- ready tasks waiting in each, counted to one past @waiting_cap (the
-- caller says "more than the cap" then), and how long the oldest has
-- waited (the first ready task of the class's index). Counted whole,
-- each call of any key that may read classes read every class's backlog
-- (100,000 rows for a class with 100,000 waiting).
-- name: RateClassList :many
SELECT sqlc.embed(c),
       least(c.burst, c.tokens + c.rate * greatest(0, extract(epoch FROM now() - c.refilled_at)))::double precision AS tokens_now,
       coalesce(w.waiting, 0)::bigint AS waiting,
       coalesce(o.oldest_seconds, 0)::double precision AS oldest_wait_seconds
FROM ax.rate_class c
LEFT JOIN LATERAL (
    SELECT count(*) AS waiting
    FROM (SELECT 1 FROM ax.task t
          WHERE t.state = 'pending' AND t.rate_class = c.name AND t.not_before <= now()
          LIMIT sqlc.arg('waiting_cap')::bigint + 1) d
) w ON true
LEFT JOIN LATERAL (
    SELECT extract(epoch FROM clock_timestamp() - t.not_before) AS oldest_seconds
    FROM ax.task t
    WHERE t.state = 'pending' AND t.rate_class = c.name AND t.not_before <= now()
    ORDER BY t.not_before
    LIMIT 1
) o ON true
WHERE sqlc.narg('name')::text IS NULL OR c.name = sqlc.narg('name')::text
ORDER BY c.name;

-- RateClassDegradeAuto turns automatic degradation on for classes whose
-- waiting depth or oldest wait is above their thresholds, and off for
-- those back under them. Returns the classes that changed. The depth is
-- counted to one past the threshold, no further (whether it is over is
-- all that counts), and the oldest wait is the first ready task of the
-- class's index: counted whole, a class's backlog (held tasks too) was
-- read by every sweep, in the reaper's transaction.
-- name: RateClassDegradeAuto :many
WITH pressure AS (
    SELECT c.name,
           (c.auto_depth IS NOT NULL AND coalesce(w.waiting, 0) > c.auto_depth)
           OR (c.auto_age_seconds IS NOT NULL AND coalesce(o.oldest_seconds, 0) > c.auto_age_seconds) AS over
    FROM ax.rate_class c
    LEFT JOIN LATERAL (
        SELECT count(*) AS waiting
        FROM (SELECT 1 FROM ax.task t
              WHERE t.state = 'pending' AND t.rate_class = c.name AND t.not_before <= now()
              -- (bigint: an auto_depth of the largest integer overflowed.)
              LIMIT greatest(coalesce(c.auto_depth, 0)::bigint + 1, 0)) d
    ) w ON c.auto_depth IS NOT NULL
    LEFT JOIN LATERAL (
        SELECT extract(epoch FROM now() - t.not_before) AS oldest_seconds
        FROM ax.task t
        WHERE t.state = 'pending' AND t.rate_class = c.name AND t.not_before <= now()
        ORDER BY t.not_before
        LIMIT 1
    ) o ON c.auto_age_seconds IS NOT NULL
    WHERE c.auto_min_priority IS NOT NULL
)
UPDATE ax.rate_class c
SET degraded_since = CASE WHEN p.over THEN now() END, updated_at = now()
FROM pressure p
WHERE c.name = p.name AND p.over <> (c.degraded_since IS NOT NULL)
RETURNING c.name, (c.degraded_since IS NOT NULL)::boolean AS degraded, c.auto_min_priority;

-- RateClassTake takes up to @max tokens from each class that has ready
-- tasks waiting and a token to give, refilling lazily from now(). It runs
-- as its own short statement before a lease so the bucket row is locked
-- only for this update; the lease then takes at most the granted number
-- of each class's tasks and gives the rest back.
-- name: RateClassTake :many
WITH level AS (
    SELECT c.name, least(c.burst, c.tokens + c.rate * greatest(0, extract(epoch FROM now() - c.refilled_at))) AS level
    FROM ax.rate_class c
    WHERE c.tokens + c.rate * greatest(0, extract(epoch FROM now() - c.refilled_at)) >= 1
      AND EXISTS (SELECT 1 FROM ax.task t
                  WHERE t.state = 'pending' AND t.rate_class = c.name AND t.not_before <= now())
    -- NO KEY: a job written naming the class holds its row FOR KEY SHARE
    -- (the foreign key, migration 00080) until it commits; FOR UPDATE
    -- waited for it, and a declaration of a thousand jobs held the
    -- class's leases up for its whole transaction. SKIP LOCKED: a change
    -- of the class's groups holds it for a moment (00083); this lease
    -- then gets none of its tokens rather than waiting.
    FOR NO KEY UPDATE OF c SKIP LOCKED
)
UPDATE ax.rate_class c
SET tokens = l.level - least(sqlc.arg('max')::integer, floor(l.level)), refilled_at = greatest(c.refilled_at, now())
FROM level l
WHERE c.name = l.name
RETURNING c.name, least(sqlc.arg('max')::integer, floor(l.level))::integer AS granted;

-- RateClassGiveBack returns tokens a lease was granted but did not use.
-- name: RateClassGiveBack :exec
UPDATE ax.rate_class c
SET tokens = least(c.burst, c.tokens + g.n)
FROM (SELECT unnest(@names::text[]) AS name, unnest(@amounts::double precision[]) AS n) g
WHERE c.name = g.name;

-- name: RateClassAny :one
SELECT EXISTS (SELECT 1 FROM ax.rate_class)::boolean AS any;
