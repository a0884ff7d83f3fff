package dbtest

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
)

// EndedRuns writes single-shard runs of job that ended ago before the
// database's clock in state (an execution state: succeeded, failed…),
// after running for durations from lease to result, where ax keeps
// ended runs: in the history tables (kept 7 days), a success's lease and
// end as columns of its task (migration 00067), another result's as its
// state event. It returns their
// execution ids, in the order of durations.
func EndedRuns(t testing.TB, pool *pgxpool.Pool, job uuid.UUID, ago time.Duration, state string,
	durations ...time.Duration) []uuid.UUID {
	t.Helper()
	ids := make([]uuid.UUID, len(durations))
	ms := make([]int64, len(durations))
	for i, d := range durations {
		ids[i], ms[i] = uuid.Must(uuid.NewV7()), d.Milliseconds()
	}
	_, err := pool.Exec(context.Background(), `
		WITH runs AS (
		    SELECT h.id, h.ms, gen_random_uuid() AS task_id,
		           now() - make_interval(secs => $3::double precision) AS finished_at,
		           now() - make_interval(secs => $3::double precision) - make_interval(secs => h.ms / 1000.0) AS leased_at
		    FROM unnest($1::uuid[], $2::bigint[]) AS h(id, ms)
		), execs AS (
		    INSERT INTO ax.execution_history (id, job_id, cause, scheduled_for, state, shard_count, priority,
		                                      started_at, finished_at, retain_until)
		    SELECT id, $4, 'manual', leased_at, $5::ax.execution_state, 1, 0, leased_at, finished_at,
		           finished_at + interval '7 days'
		    FROM runs
		), tasks AS (
		    INSERT INTO ax.task_history (id, execution_id, job_id, shard_index, shard_total, state, priority, max_attempts,
		                                 timeout_seconds, leased_at, started_at, finished_at, retain_until,
		                                 lease_event_id, end_event_id)
		    SELECT task_id, id, $4, 0, 1, $5::text::ax.task_state, 0, 1, 3600, leased_at, leased_at, finished_at,
		           finished_at + interval '7 days', nextval('ax.task_event_id_seq'),
		           CASE WHEN $5::text = 'succeeded' THEN nextval('ax.task_event_id_seq') END
		    FROM runs
		)
		INSERT INTO ax.task_event (task_id, execution_id, shard_index, attempt, kind, state, message, at)
		SELECT task_id, id, 0, 1, 'state', $5::text::ax.task_state, '', finished_at
		FROM runs
		WHERE $5::text <> 'succeeded'`, ids, ms, ago.Seconds(), job, state)
	if err != nil {
		t.Fatalf("dbtest: writing ended runs: %v", err)
	}
	return ids
}
