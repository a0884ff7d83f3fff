-- name: CalendarInsert :one
INSERT INTO ax.calendar (name, description, timezone, entries)
VALUES (@name, @description, @timezone, @entries)
RETURNING *;

-- CalendarUpdate replaces a calendar's definition and bumps its version,
-- which tells the trigger loops' caches to read it again.
-- name: CalendarUpdate :one
UPDATE ax.calendar
SET description = @description, timezone = @timezone, entries = @entries,
    version = version + 1, updated_at = now()
WHERE name = @name
RETURNING *;

-- name: CalendarGet :one
SELECT * FROM ax.calendar WHERE name = @name;

-- CalendarGetForUpdate locks a calendar row: a delete holds it while it
-- checks for jobs, and a job naming it waits (the foreign key's share
-- lock) until the delete ends.
-- name: CalendarGetForUpdate :one
SELECT * FROM ax.calendar WHERE name = @name FOR UPDATE;

-- name: CalendarList :many
SELECT * FROM ax.calendar ORDER BY name;

-- CalendarListByNames returns the named calendars (for the upcoming fires
-- and explain).
-- name: CalendarListByNames :many
SELECT * FROM ax.calendar WHERE name = ANY(@names::text[]) ORDER BY name;

-- CalendarListChanged returns the named calendars whose version is not
-- the one a cache holds (@versions[i] for @names[i]; 0 when not cached):
-- a trigger loop asks once per batch with jobs that exclude dates, and
-- reads full rows only of calendars that changed.
-- name: CalendarListChanged :many
WITH known AS (
    SELECT unnest(@names::text[]) AS name, unnest(@versions::bigint[]) AS version
)
SELECT c.*
FROM ax.calendar c
JOIN known k ON c.name = k.name
WHERE c.version <> k.version;

-- CalendarJobs lists up to @max jobs that name a calendar, as group/name.
-- name: CalendarJobs :many
SELECT j.group_name, j.name
FROM ax.job_calendar jc
JOIN ax.job j ON j.id = jc.job_id
WHERE jc.calendar_name = @calendar_name
ORDER BY j.group_name, j.name
LIMIT @max;

-- name: CalendarDelete :execrows
DELETE FROM ax.calendar WHERE name = @name;
