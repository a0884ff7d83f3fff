package history_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/db"
	"github.com/ax-scheduler/ax/queue/axtype"
	"github.com/ax-scheduler/ax/queue/history"
	"github.com/ax-scheduler/ax/tests/dbtest"
	"github.com/ax-scheduler/ax/tests/testfactory"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// env is a fresh database whose history keeps finished runs for minutes,
// in partitions a minute wide; tests move maintenance's clock instead of
// waiting.
type env struct {
	t       *testing.T
	pool    *pgxpool.Pool
	cfg     history.Config
	dropped *prometheus.CounterVec
}

func setup(t *testing.T) *env {
	t.Helper()
	t.Parallel()
	pool := dbtest.New(t)
	e := &env{t: t, pool: pool}
	e.dropped = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "dropped"}, []string{"table"})
	e.cfg = history.Config{Retention: 2 * time.Minute, FailedRetention: 5 * time.Minute, PartitionWidth: time.Minute,
		Dropped: e.dropped}
	require.NoError(t, history.Apply(context.Background(), pool, e.cfg))
	return e
}

// maintainAt runs maintenance as if the clock read now + d.
func (e *env) maintainAt(d time.Duration) *history.Report {
	e.t.Helper()
	now, err := db.Now(context.Background(), e.pool)
	require.NoError(e.t, err)
	cfg := e.cfg
	cfg.Now = func() time.Time { return now.Add(d) }
	rep, err := history.Maintain(context.Background(), e.pool, cfg)
	require.NoError(e.t, err)
	return rep
}

func (e *env) job(mutate func(*axtype.Job)) *axtype.Job {
	e.t.Helper()
	return testfactory.Job(context.Background(), e.t, e.pool, &testfactory.JobOpts{Edit: mutate})
}

func (e *env) trigger(jobID uuid.UUID) uuid.UUID {
	e.t.Helper()
	return testfactory.Execution(context.Background(), e.t, e.pool, jobID, nil).ID
}

// end ends a run's tasks and then the run in state.
func (e *env) end(id uuid.UUID, state string) {
	e.t.Helper()
	_, err := e.pool.Exec(context.Background(),
		`UPDATE ax.task SET state = $2::ax.task_state, finished_at = now() WHERE execution_id = $1`, id, state)
	require.NoError(e.t, err)
	_, err = e.pool.Exec(context.Background(),
		`UPDATE ax.execution SET state = $2::ax.execution_state, finished_at = now() WHERE id = $1`, id, state)
	require.NoError(e.t, err)
}

// where says where a run is: live, history or gone.
func (e *env) where(id uuid.UUID) string {
	e.t.Helper()
	var live, kept, tasks int
	require.NoError(e.t, e.pool.QueryRow(context.Background(), `
		SELECT (SELECT count(*) FROM ax.execution WHERE id = $1),
		       (SELECT count(*) FROM ax.execution_history WHERE id = $1),
		       (SELECT count(*) FROM ax.all_tasks WHERE execution_id = $1)`, id).Scan(&live, &kept, &tasks))
	switch {
	case live == 1 && tasks == 1:
		return "live"
	case kept == 1 && tasks == 1:
		return "history"
	case live+kept+tasks == 0:
		return "gone"
	}
	return "broken"
}

func TestEndedRunsMoveAndPassedPartitionsAreDropped(t *testing.T) {
	e := setup(t)
	job := e.job(nil)
	succeeded, failed, unfinished := e.trigger(job.ID), e.trigger(job.ID), e.trigger(job.ID)
	e.end(succeeded, "succeeded")
	e.end(failed, "failed")
	require.Equal(t, "history", e.where(succeeded))
	require.Equal(t, "history", e.where(failed))
	require.Equal(t, "live", e.where(unfinished))

	var keptFor time.Duration
	require.NoError(t, e.pool.QueryRow(context.Background(),
		`SELECT extract(epoch FROM retain_until - finished_at)::bigint * interval '1 second' FROM ax.execution_history WHERE id = $1`,
		failed).Scan(&keptFor))
	require.Equal(t, 5*time.Minute, keptFor.Round(time.Second), "failed runs keep the failed retention")

	// Three minutes on: the succeeded run's partition has passed, not the
	// failed one's; the run in flight stays whatever its age.
	rep := e.maintainAt(3*time.Minute + e.cfg.PartitionWidth)
	require.Equal(t, int64(1), rep.Dropped["execution_history"])
	require.Equal(t, int64(1), rep.Dropped["task_history"])
	require.Equal(t, "gone", e.where(succeeded))
	require.Equal(t, "history", e.where(failed))
	require.Equal(t, "live", e.where(unfinished))
	var counted dto.Metric
	require.NoError(t, e.dropped.WithLabelValues("execution_history").Write(&counted))
	require.Equal(t, float64(1), counted.GetCounter().GetValue())

	var drops int
	require.NoError(t, e.pool.QueryRow(context.Background(),
		`SELECT count(*) FROM ax.history_drop WHERE row_count = 1`).Scan(&drops))
	require.Equal(t, 2, drops, "each dropped partition is recorded with its rows")

	rep = e.maintainAt(6*time.Minute + e.cfg.PartitionWidth)
	require.Equal(t, int64(1), rep.Dropped["execution_history"])
	require.Equal(t, "gone", e.where(failed))
	require.Equal(t, "live", e.where(unfinished))
}

// A job's own retention (30 s) removes its runs before the server's (2
// minutes) removes the others'. Maintenance runs 1m31s ahead: past the end
// of the partition of a's retain_until (at most 30 s + a minute-wide
// partition after its end) and short of b's (more than 2 minutes after
// its end). With 60 s for the job, no instant was after the one and
// surely before the other: b was dropped when it ended in the last second
// of a minute.
func TestJobRetentionOverridesTheServers(t *testing.T) {
	e := setup(t)
	short := e.job(nil)
	_, err := e.pool.Exec(context.Background(),
		`UPDATE ax.job SET history_retention_seconds = 30, history_failed_retention_seconds = 30 WHERE id = $1`, short.ID)
	require.NoError(t, err)
	other := e.job(nil)
	a, b := e.trigger(short.ID), e.trigger(other.ID)
	e.end(a, "failed")
	e.end(b, "succeeded")
	e.maintainAt(30*time.Second + e.cfg.PartitionWidth + time.Second)
	require.Equal(t, "gone", e.where(a))
	require.Equal(t, "history", e.where(b))
}

func TestADropWaitingForItsLockGivesUpAndComesBack(t *testing.T) {
	e := setup(t)
	run := e.trigger(e.job(nil).ID)
	e.end(run, "succeeded")

	// A long reader of history holds the table: the drop must not queue
	// behind it (every move would then queue behind the drop).
	ctx := context.Background()
	reader, err := e.pool.Begin(ctx)
	require.NoError(t, err)
	defer reader.Rollback(ctx)
	_, err = reader.Exec(ctx, `SELECT count(*) FROM ax.execution_history`)
	require.NoError(t, err)
	rep := e.maintainAt(3*time.Minute + e.cfg.PartitionWidth)
	require.Positive(t, rep.Waiting)
	require.Equal(t, "history", e.where(run))
	require.NoError(t, reader.Rollback(ctx))

	rep = e.maintainAt(3*time.Minute + e.cfg.PartitionWidth)
	require.Zero(t, rep.Waiting)
	require.Equal(t, "gone", e.where(run))
}

func TestARunEndedWithATaskInFlightMovesWhenItEnds(t *testing.T) {
	e := setup(t)
	job := e.job(func(j *axtype.Job) { j.ShardCount = 2 })
	run := e.trigger(job.ID)
	ctx := context.Background()
	// One shard still running when the run is ended (as a cancel that
	// could not wait would): the run stays live until it ends.
	_, err := e.pool.Exec(ctx, `UPDATE ax.task SET state = 'failed', finished_at = now() WHERE execution_id = $1 AND shard_index = 0`, run)
	require.NoError(t, err)
	_, err = e.pool.Exec(ctx, `UPDATE ax.execution SET state = 'failed', finished_at = now() WHERE id = $1`, run)
	require.NoError(t, err)
	require.Zero(t, e.maintainAt(0).Moved)
	var live int
	require.NoError(t, e.pool.QueryRow(ctx, `SELECT count(*) FROM ax.execution WHERE id = $1`, run).Scan(&live))
	require.Equal(t, 1, live)

	_, err = e.pool.Exec(ctx, `UPDATE ax.task SET state = 'failed', finished_at = now() WHERE execution_id = $1`, run)
	require.NoError(t, err)
	require.Equal(t, 1, e.maintainAt(0).Moved)
	var kept, tasks int
	require.NoError(t, e.pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM ax.execution_history WHERE id = $1),
		(SELECT count(*) FROM ax.task_history WHERE execution_id = $1)`, run).Scan(&kept, &tasks))
	require.Equal(t, 1, kept)
	require.Equal(t, 2, tasks)
}

func TestPartitionsAreMadeAheadOfTheLongestRetention(t *testing.T) {
	e := setup(t)
	job := e.job(nil)
	_, err := e.pool.Exec(context.Background(),
		`UPDATE ax.job SET history_failed_retention_seconds = 1800 WHERE id = $1`, job.ID)
	require.NoError(t, err)
	// The clock is read before the pass: the pass's own clock is at or
	// after it, so the bound holds however long the pass and the reads
	// after it take (read after, it failed on a slow CI run).
	before, err := db.Now(context.Background(), e.pool)
	require.NoError(t, err)
	e.maintainAt(0)
	s, err := db.HistorySettingGet(context.Background(), e.pool)
	require.NoError(t, err)
	require.GreaterOrEqual(t, s.MadeUntil, before.Add(30*time.Minute+2*e.cfg.PartitionWidth),
		"a job's longer retention has its partitions")

	run := e.trigger(job.ID)
	e.end(run, "failed")
	e.maintainAt(20 * time.Minute)
	require.Equal(t, "history", e.where(run))
}

// A width change drops the empty partitions made ahead and makes them
// again in one transaction, waiting at most the lock timeout: behind a
// long reader of history it gives up and keeps the old width and
// partitions, so runs still move; a later start changes it.
func TestAWidthChangeThatWaitsKeepsTheOldWidth(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	reader, err := e.pool.Begin(ctx)
	require.NoError(t, err)
	defer reader.Rollback(ctx)
	_, err = reader.Exec(ctx, `SELECT count(*) FROM ax.execution_history`)
	require.NoError(t, err)

	wider := e.cfg
	wider.PartitionWidth = 2 * time.Minute
	require.NoError(t, history.Apply(ctx, e.pool, wider))
	s, err := db.HistorySettingGet(ctx, e.pool)
	require.NoError(t, err)
	require.Equal(t, time.Minute, s.PartitionWidth, "the old width is kept")
	run := e.trigger(e.job(nil).ID)
	e.end(run, "succeeded")
	require.Equal(t, "history", e.where(run))

	require.NoError(t, reader.Rollback(ctx))
	require.NoError(t, history.Apply(ctx, e.pool, wider))
	s, err = db.HistorySettingGet(ctx, e.pool)
	require.NoError(t, err)
	require.Equal(t, 2*time.Minute, s.PartitionWidth)
	later := e.trigger(e.job(nil).ID)
	e.end(later, "succeeded")
	require.Equal(t, "history", e.where(later))
	require.Equal(t, "history", e.where(run), "the partition holding a run stays")
}

// A partition detached by a pass that stopped before dropping it is
// dropped by the next pass.
func TestADetachedLeftoverIsDropped(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	run := e.trigger(e.job(nil).ID)
	e.end(run, "succeeded")
	var execPart, taskPart string
	require.NoError(t, e.pool.QueryRow(ctx, `
		SELECT (SELECT tableoid::regclass::text FROM ax.execution_history WHERE id = $1),
		       (SELECT tableoid::regclass::text FROM ax.task_history WHERE execution_id = $1)`, run).
		Scan(&execPart, &taskPart))
	var retained time.Time
	require.NoError(t, e.pool.QueryRow(ctx, `SELECT retain_until FROM ax.execution_history WHERE id = $1`, run).Scan(&retained))
	_, err := e.pool.Exec(ctx, `ALTER TABLE ax.execution_history DETACH PARTITION `+execPart)
	require.NoError(t, err)
	_, err = e.pool.Exec(ctx, `ALTER TABLE ax.task_history DETACH PARTITION `+taskPart)
	require.NoError(t, err)

	// A table only named like one is not ax's to drop.
	_, err = e.pool.Exec(ctx, `CREATE TABLE ax.execution_h_mine (retain_until timestamptz)`)
	require.NoError(t, err)

	rep := e.maintainAt(0)
	var mine bool
	require.NoError(t, e.pool.QueryRow(ctx, `SELECT to_regclass('ax.execution_h_mine') IS NOT NULL`).Scan(&mine))
	require.True(t, mine, "a table that is no history partition of ax's stays")
	var left int
	require.NoError(t, e.pool.QueryRow(ctx, `SELECT count(*) FROM pg_class WHERE oid IN (to_regclass($1), to_regclass($2))`,
		execPart, taskPart).Scan(&left))
	require.Zero(t, left)
	require.Equal(t, "gone", e.where(run))

	// Recorded as a pass records its drops: the run is answered gone.
	require.Equal(t, int64(1), rep.Dropped["execution_history"])
	require.Equal(t, int64(1), rep.Dropped["task_history"])
	gone, err := db.ExecutionRemoved(ctx, e.pool, run)
	require.NoError(t, err)
	require.True(t, gone, "the record of the drop covers the run")
	var recorded int
	require.NoError(t, e.pool.QueryRow(ctx, `SELECT count(*) FROM ax.history_drop
		WHERE table_name IN ('execution_history', 'task_history') AND row_count = 1
		  AND range_from <= $1 AND range_to = $1`, retained).Scan(&recorded))
	require.Equal(t, 2, recorded, "each recorded with its rows, its range from its name to its last row's retain_until")
}

// Changing the width and maintaining work once Postgres has statistics on
// its catalogs: it then plans a hash join that casts every partition's
// bound before filtering by table, and the UUID bounds of the run-keyed
// tables were cast to timestamps ("invalid input syntax"). A fresh
// cluster's first ANALYZE was enough to break it.
func TestPartitionBoundsReadWithAnalyzedCatalogs(t *testing.T) {
	e := setup(t)
	_, err := e.pool.Exec(context.Background(), "ANALYZE")
	require.NoError(t, err)
	cfg := e.cfg
	cfg.PartitionWidth = 2 * time.Minute
	require.NoError(t, history.Apply(context.Background(), e.pool, cfg))
	e.cfg = cfg
	e.maintainAt(10 * time.Minute)
}

// A run whose move began before its partition passed, and commits while
// the partition is being dropped, is counted with the drop: the rows are
// counted once the detach has waited for such moves, so the record (and
// the 410 Gone it answers for) covers every row dropped. They were
// counted first, and a run moved by a slow transaction was dropped
// unrecorded (seen in CI under load).
func TestARunMovedDuringTheDropIsCounted(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	run := e.trigger(e.job(nil).ID)
	mover, err := e.pool.Begin(ctx)
	require.NoError(t, err)
	defer mover.Rollback(ctx) //nolint:errcheck // committed below
	var began time.Time
	require.NoError(t, mover.QueryRow(ctx, `SELECT now()`).Scan(&began))
	at := func(d time.Duration) history.Config {
		cfg := e.cfg
		cfg.Now = func() time.Time { return began.Add(d) }
		return cfg
	}
	// The partitions before the run's are gone: the run's is the first
	// the next pass counts and detaches.
	_, err = history.Maintain(ctx, e.pool, at(e.cfg.Retention))
	require.NoError(t, err)

	_, err = mover.Exec(ctx, `UPDATE ax.task SET state = 'succeeded', finished_at = now() WHERE execution_id = $1`, run)
	require.NoError(t, err)
	_, err = mover.Exec(ctx, `UPDATE ax.execution SET state = 'succeeded', finished_at = now() WHERE id = $1`, run)
	require.NoError(t, err)
	type result struct {
		rep *history.Report
		err error
	}
	done := make(chan result, 1)
	go func() {
		rep, err := history.Maintain(ctx, e.pool, at(e.cfg.Retention+2*e.cfg.PartitionWidth))
		done <- result{rep, err}
	}()
	// The detach waits for the mover, which holds the history tables.
	require.Eventually(t, func() bool {
		var waiting bool
		err := e.pool.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_stat_activity
			WHERE datname = current_database() AND query LIKE '%DETACH PARTITION%' AND wait_event_type = 'Lock')`).Scan(&waiting)
		return err == nil && waiting
	}, 10*time.Second, 10*time.Millisecond, "maintenance waits for the move to end")
	require.NoError(t, mover.Commit(ctx))

	res := <-done
	require.NoError(t, res.err)
	require.Equal(t, int64(1), res.rep.Dropped["execution_history"])
	require.Equal(t, int64(1), res.rep.Dropped["task_history"])
	require.Equal(t, "gone", e.where(run))
	gone, err := db.ExecutionRemoved(ctx, e.pool, run)
	require.NoError(t, err)
	require.True(t, gone, "the record of the drop covers the run")
}
