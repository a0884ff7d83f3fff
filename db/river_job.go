package db

import (
	"context"
	"fmt"
	"time"
)

// riverJobRescue makes running River jobs of one kind that started before
// @older_than ago available again, noting the rescue in their errors as
// River's own rescuer does. It is written here rather than in
// sql/queries because River's tables come from River's Go migrator, which
// sqlc does not read.
const riverJobRescue = `
UPDATE ax.river_job
SET state = 'available', scheduled_at = now(),
    errors = array_append(errors, jsonb_build_object('at', now(), 'attempt', attempt,
        'error', 'rescued by ax: its replica stopped working on it', 'trace', ''))
WHERE state = 'running' AND kind = $1 AND attempted_at < now() - make_interval(secs => $2::double precision)
RETURNING id`

// RiverJobRescue makes the running River jobs of kind that started more
// than olderThan ago available again, and returns their ids. Call it only
// with an olderThan past which no live worker still runs a job of kind
// (its River timeout plus a margin): a job still running there belongs to
// a replica that died.
func RiverJobRescue(ctx context.Context, e Executor, kind string, olderThan time.Duration) ([]int64, error) {
	return riverJobIDs(ctx, e, kind, riverJobRescue, olderThan)
}

// riverJobIDs runs a rescue query over the River jobs of kind and returns
// the ids it made available.
func riverJobIDs(ctx context.Context, e Executor, kind, query string, olderThan time.Duration) ([]int64, error) {
	rows, err := e.Query(ctx, query, kind, olderThan.Seconds())
	if err != nil {
		return nil, fmt.Errorf("error rescuing river jobs of kind %s: %w", kind, err)
	}
	defer rows.Close()
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}

// riverJobRescueUnsent makes running River jobs of agentless HTTP requests
// available again when they started before @older_than ago and their
// task is still pending at their attempt: the worker that fetched the job
// leases the task first thing, so such a job's replica died between
// River's fetch and the lease. Taking it again sends nothing twice: the
// lease is fenced (pending, at that attempt), and a slow worker that
// leases after all leaves the rescued job nothing to send.
const riverJobRescueUnsent = `
UPDATE ax.river_job j
SET state = 'available', scheduled_at = now(),
    errors = array_append(j.errors, jsonb_build_object('at', now(), 'attempt', j.attempt,
        'error', 'rescued by ax: its replica stopped before it leased its task', 'trace', ''))
WHERE j.state = 'running' AND j.kind = $1 AND j.attempted_at < now() - make_interval(secs => $2::double precision)
  -- The casts are guarded: a job whose arguments are not ax's (written
  -- by hand) is left to River's rescuer, and fails no pass.
  AND EXISTS (SELECT 1 FROM ax.task t
              WHERE t.id = CASE WHEN j.args->>'task_id' ~* '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$'
                                THEN (j.args->>'task_id')::uuid END
                AND t.attempt = CASE WHEN j.args->>'attempt' ~ '^[0-9]{1,9}$' THEN (j.args->>'attempt')::integer END
                AND t.state = 'pending')
RETURNING j.id`

// RiverJobRescueUnsent makes the running River jobs of kind (agentless
// HTTP requests: args task_id and attempt) that started more than
// olderThan ago without leasing their task available again, and returns
// their ids.
func RiverJobRescueUnsent(ctx context.Context, e Executor, kind string, olderThan time.Duration) ([]int64, error) {
	return riverJobIDs(ctx, e, kind, riverJobRescueUnsent, olderThan)
}
