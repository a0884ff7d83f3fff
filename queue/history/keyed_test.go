package history_test

import (
	"context"
	"encoding/binary"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/db"

	"github.com/ax-scheduler/ax/queue/axtype"
)

// idAt is a UUIDv7 of instant t, as ax makes for a run fired then.
func idAt(t time.Time) uuid.UUID {
	id := uuid.Must(uuid.NewV7())
	var ms [8]byte
	binary.BigEndian.PutUint64(ms[:], uint64(t.UnixMilli()))
	copy(id[:6], ms[2:])
	return id
}

// run inserts a pending run of job with id (no task).
func (e *env) run(jobID, id uuid.UUID) {
	e.t.Helper()
	_, err := e.pool.Exec(context.Background(), `
		INSERT INTO ax.execution (id, job_id, cause, scheduled_for, state, shard_count, priority)
		VALUES ($1, $2, 'manual', now(), 'pending', 1, 0)`, id, jobID)
	require.NoError(e.t, err)
}

// event records a log event of run id.
func (e *env) event(id uuid.UUID) {
	e.t.Helper()
	_, err := e.pool.Exec(context.Background(), `
		INSERT INTO ax.task_event (task_id, execution_id, shard_index, attempt, kind, stream, message)
		VALUES (gen_random_uuid(), $1, 0, 1, 'log', 'stdout', 'hello')`, id)
	require.NoError(e.t, err)
}

// partitionOf names the partition of table holding execution id's rows.
func (e *env) partitionOf(table string, id uuid.UUID) string {
	e.t.Helper()
	var name string
	require.NoError(e.t, e.pool.QueryRow(context.Background(),
		`SELECT tableoid::regclass::text FROM `+pgx.Identifier{"ax", table}.Sanitize()+` WHERE execution_id = $1 LIMIT 1`,
		id).Scan(&name))
	return name
}

func (e *env) countRows(sql string, args ...any) int {
	e.t.Helper()
	var n int
	require.NoError(e.t, e.pool.QueryRow(context.Background(), sql, args...).Scan(&n))
	return n
}

func (e *env) spillFrom(table string) time.Time {
	e.t.Helper()
	var t time.Time
	require.NoError(e.t, e.pool.QueryRow(context.Background(), `SELECT ax.retention_spill_from($1)`, table).Scan(&t))
	return t
}

// The events, callback and attempts of a run fired long ago stay while a
// run of their id range is live or in history, and are dropped, counted
// and recorded once none is.
func TestRunKeyedPartitionStaysWhileARunOfItsRangeRemains(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	job := e.job(func(j *axtype.Job) { j.CallbackURL = "http://127.0.0.1:1/hook" })
	now, err := db.Now(ctx, e.pool)
	require.NoError(t, err)
	// Ten days ago: below the first slot, in the low partition.
	live, kept := idAt(now.Add(-10*24*time.Hour)), idAt(now.Add(-10*24*time.Hour+time.Second))
	e.run(job.ID, live)
	e.run(job.ID, kept)
	e.end(kept, "succeeded")
	for _, id := range []uuid.UUID{live, kept} {
		e.event(id)
		e.event(id)
	}
	_, err = e.pool.Exec(ctx, `INSERT INTO ax.callback_attempt (execution_id, delivery, attempt, url, at, latency_ms)
		VALUES ($1, 1, 1, 'http://127.0.0.1:1/hook', now(), 1)`, kept)
	require.NoError(t, err)
	require.Equal(t, "ax.task_event_p_low", e.partitionOf("task_event", live))
	require.Equal(t, "ax.callback_p_low", e.partitionOf("callback", kept))
	events := `SELECT count(*) FROM ax.task_event WHERE execution_id = ANY($1)`
	ids := []uuid.UUID{live, kept}

	rep := e.maintainAt(0)
	require.Zero(t, rep.Dropped["task_event"], "a live run keeps its range")
	require.Equal(t, 4, e.countRows(events, ids))

	// Both in history now: their range stays as long as they do.
	e.end(live, "succeeded")
	rep = e.maintainAt(0)
	require.Zero(t, rep.Dropped["task_event"], "a run in history keeps its range")
	require.Equal(t, 4, e.countRows(events, ids))

	// Past their retention: the history goes, and with it the range.
	rep = e.maintainAt(2*time.Minute + e.cfg.PartitionWidth + time.Second)
	require.Equal(t, int64(2), rep.Dropped["execution_history"])
	require.Equal(t, int64(4), rep.Dropped["task_event"])
	require.Equal(t, int64(2), rep.Dropped["callback"])
	require.Equal(t, int64(1), rep.Dropped["callback_attempt"])
	require.Zero(t, e.countRows(`SELECT count(*) FROM pg_class WHERE relname = 'task_event_p_low'`))

	var counted dto.Metric
	require.NoError(t, e.dropped.WithLabelValues("task_event").Write(&counted))
	require.Equal(t, float64(4), counted.GetCounter().GetValue())
	require.Equal(t, 1, e.countRows(`SELECT count(*) FROM ax.history_drop
		WHERE table_name = 'task_event' AND row_count = 4 AND min_id = least($1::uuid, $2::uuid)
		  AND max_id = greatest($1::uuid, $2::uuid) AND range_from = 'epoch'`, live, kept))

	// Today's partitions stay: runs of today may come.
	run := e.trigger(job.ID)
	e.event(run)
	require.Equal(t, 1, e.countRows(events, []uuid.UUID{run}))
}

// Inserts never fail for want of a partition: ids past the partitions
// made (maintenance lagging) and ids not made by ax land in the spill;
// the next pass makes the spill the partition of the lag's range.
func TestRunKeyedInsertsOutsideTheMadeRangesSucceed(t *testing.T) {
	e := setup(t)
	job := e.job(nil)
	horizon := e.spillFrom("task_event")
	lagged, far, random := idAt(horizon.Add(30*time.Second)), idAt(horizon.Add(1000*24*time.Hour)), uuid.New()
	for _, id := range []uuid.UUID{lagged, far, random} {
		e.run(job.ID, id)
		e.event(id)
	}
	require.Equal(t, "ax.task_event_p_spill", e.partitionOf("task_event", lagged))
	require.Equal(t, "ax.task_event_p_spill", e.partitionOf("task_event", far))

	// Maintenance comes back when the clock reads the horizon: the lag
	// stays where it is, as the partition of its range; the rest moves to
	// a new spill.
	made := e.makeKeyedAt("task_event", horizon)
	require.Equal(t, 1, made)
	lagPart := "ax.task_event_p" + horizon.UTC().Format("20060102t150405")
	require.Equal(t, lagPart, e.partitionOf("task_event", lagged))
	require.Equal(t, "ax.task_event_p_spill", e.partitionOf("task_event", far))
	require.Equal(t, horizon.Add(2*e.cfg.PartitionWidth), e.spillFrom("task_event"))
	for _, id := range []uuid.UUID{lagged, far, random} {
		e.event(id)
		require.Equal(t, 2, e.countRows(`SELECT count(*) FROM ax.task_event WHERE execution_id = $1`, id))
	}

	// And then on, slots of one width again.
	require.Equal(t, 1, e.makeKeyedAt("task_event", horizon.Add(time.Minute)))
	next := idAt(horizon.Add(2*e.cfg.PartitionWidth + time.Second))
	e.run(job.ID, next)
	e.event(next)
	require.Equal(t, "ax.task_event_p"+horizon.Add(2*e.cfg.PartitionWidth).UTC().Format("20060102t150405"),
		e.partitionOf("task_event", next))
}

// Partitions are made two widths ahead of the clock, for every keyed
// table, a width each.
func TestKeyedPartitionsAreMadeAhead(t *testing.T) {
	e := setup(t)
	now, err := db.Now(context.Background(), e.pool)
	require.NoError(t, err)
	e.maintainAt(0)
	for _, table := range db.KeyedTables {
		horizon := e.spillFrom(table)
		require.False(t, horizon.Before(now.Add(2*e.cfg.PartitionWidth)), table)
		// Ten minutes past the horizon: twelve slots of a minute.
		require.Equal(t, 12, e.makeKeyedAt(table, horizon.Add(10*time.Minute)), table)
		require.Equal(t, horizon.Add(12*time.Minute), e.spillFrom(table), table)
		require.Zero(t, e.makeKeyedAt(table, horizon.Add(10*time.Minute)), table)
	}
}

// makeKeyedAt makes table's partitions as if the clock read at.
func (e *env) makeKeyedAt(table string, at time.Time) int {
	e.t.Helper()
	var made int
	require.NoError(e.t, pgx.BeginFunc(context.Background(), e.pool, func(tx pgx.Tx) error {
		var err error
		made, err = db.KeyedPartitionsMake(context.Background(), tx, table, &at, time.Second)
		return err
	}))
	return made
}

// A read of one run's events or callback attempts reads one partition:
// with the id known when planned, and with a generic plan (a prepared
// statement's), pruned when it starts.
func TestARunsEventsReadOnePartition(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	run := e.trigger(e.job(nil).ID)
	e.event(run)
	conn, err := e.pool.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	for _, table := range []string{"task_event", "callback_attempt"} {
		var partitions int
		require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM pg_inherits WHERE inhparent = $1::regclass`,
			"ax."+table).Scan(&partitions))
		require.Greater(t, partitions, 3, table)

		partition := regexp.MustCompile(table + `_p(\d{8}t\d{6}|_low|_spill)`)
		read := func(plan string) []string {
			return slices.Compact(slices.Sorted(slices.Values(partition.FindAllString(plan, -1))))
		}
		plan := explain(t, conn, `EXPLAIN SELECT * FROM ax.`+table+` WHERE execution_id = '`+run.String()+`' ORDER BY id`)
		require.Len(t, read(plan), 1, plan)

		_, err := conn.Exec(ctx, `SET plan_cache_mode = force_generic_plan`)
		require.NoError(t, err)
		_, err = conn.Exec(ctx, `PREPARE one_run(uuid) AS SELECT * FROM ax.`+table+` WHERE execution_id = $1 ORDER BY id`)
		require.NoError(t, err)
		plan = explain(t, conn, `EXPLAIN EXECUTE one_run('`+run.String()+`')`)
		require.Len(t, read(plan), 1, plan)
		require.Contains(t, plan, "Subplans Removed")
		_, err = conn.Exec(ctx, `DEALLOCATE one_run; RESET plan_cache_mode`)
		require.NoError(t, err)
	}
}

func explain(t *testing.T, conn interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}, sql string) string {
	t.Helper()
	rows, err := conn.Query(context.Background(), sql)
	require.NoError(t, err)
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return strings.Join(lines, "\n")
}

// Skip records older than the longest server retention go with their
// partition; today's stay.
func TestOldSkipRecordsAreDropped(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	job := e.job(nil)
	// The recent record is made at the time maintenance runs at: recorded
	// at the real now, 10 minutes before it, in the last minutes of a UTC
	// day its whole (daily) partition was past the 5-minute retention.
	_, err := e.pool.Exec(ctx, `
		INSERT INTO ax.skipped_fire (job_id, reason, first_tick, last_tick, recorded_at)
		VALUES ($1, 'overlap', now() - interval '40 days', now() - interval '40 days', now() - interval '40 days'),
		       ($1, 'overlap', now(), now(), now() + interval '10 minutes')`, job.ID)
	require.NoError(t, err)
	rep := e.maintainAt(10 * time.Minute)
	require.Equal(t, int64(1), rep.Dropped["skipped_fire"])
	require.Equal(t, 1, e.countRows(`SELECT count(*) FROM ax.skipped_fire WHERE job_id = $1`, job.ID))
	require.Equal(t, 1, e.countRows(`SELECT count(*) FROM ax.history_drop WHERE table_name = 'skipped_fire' AND row_count = 1`))
}
