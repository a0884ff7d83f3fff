// Package history keeps the history of finished runs within its
// retention: it stores the server's retention settings, makes the time
// partitions of ax.execution_history and ax.task_history ahead, drops
// those whose range has passed (never a bulk DELETE) and moves runs that
// ended with a task still in flight once that task ends. Runs are moved to
// history by the database itself as they end (migration 00024). It keeps
// the partitions of events, callbacks, callback attempts (by range of
// execution id) and skip records (by time) likewise (keyed.go, migration
// 00026).
package history

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ax-scheduler/ax/db"

	"github.com/ax-scheduler/ax/queue/axtype"
	"github.com/ax-scheduler/ax/queue/metrics"
)

// Defaults of the server-wide retention (seed 000's status TTL: 7 days).
const (
	DefaultRetention       = 7 * 24 * time.Hour
	DefaultFailedRetention = 30 * 24 * time.Hour
	DefaultPartitionWidth  = 24 * time.Hour
	// MaxRetention bounds every retention, server-wide or a job's: the
	// partitions made ahead follow the longest.
	MaxRetention = 400 * 24 * time.Hour
)

// Config is the retention a replica runs with.
type Config struct {
	Retention       time.Duration // succeeded and cancelled runs; default 7 days
	FailedRetention time.Duration // failed and timed-out runs; default 30 days
	// PartitionWidth is the time range of one partition: how close to its
	// retention a run is removed. Default one day; tests use seconds.
	PartitionWidth time.Duration
	// LockTimeout bounds the wait for a drop's table lock (default 200 ms);
	// a drop that waits longer is tried again next time.
	LockTimeout time.Duration
	// Now is the clock maintenance reads (nil: the database's, the clock
	// runs are moved by).
	Now    func() time.Time
	Logger *slog.Logger
	// Dropped counts the rows removed, by table (ax_history_rows_dropped_total).
	Dropped *prometheus.CounterVec
	// NotOwner, when set, is 1 while maintenance passes find their role
	// may not make or drop partitions (ax_history_maintenance_denied).
	NotOwner prometheus.Gauge
	// Direct, when set, is a pool of connections to the database itself
	// (not a transaction pooler) that detaches go through: a detach runs
	// outside any transaction, bounded by a session's lock_timeout, which
	// behind a transaction pooler would stay on a server session that
	// other clients get next. Nil: the maintenance pool.
	Direct *pgxpool.Pool
}

// WithDefaults fills in what is unset.
func (c Config) WithDefaults() Config {
	c.Retention = cmp.Or(c.Retention, DefaultRetention)
	c.FailedRetention = cmp.Or(c.FailedRetention, DefaultFailedRetention)
	c.PartitionWidth = cmp.Or(c.PartitionWidth, DefaultPartitionWidth)
	c.LockTimeout = cmp.Or(c.LockTimeout, 200*time.Millisecond)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Dropped == nil {
		c.Dropped = metrics.New(nil).HistoryRowsDropped
	}
	return c
}

func (c Config) now() *time.Time {
	if c.Now == nil {
		return nil
	}
	t := c.Now()
	return &t
}

// Validate checks the settings a replica was started with.
func (c Config) Validate() error {
	var errs []error
	if c.PartitionWidth < time.Second || c.PartitionWidth > 7*24*time.Hour {
		errs = append(errs, fmt.Errorf("history partition width %s must be between 1s and 168h", c.PartitionWidth))
	}
	for _, r := range []struct {
		name string
		d    time.Duration
	}{{"history retention", c.Retention}, {"history failed retention", c.FailedRetention}} {
		if r.d < c.PartitionWidth || r.d > MaxRetention {
			errs = append(errs, fmt.Errorf("%s %s must be between the partition width (%s) and %s", r.name, r.d,
				c.PartitionWidth, MaxRetention))
		}
		// Partitions are made ahead for the whole retention.
		if c.PartitionWidth > 0 && r.d/c.PartitionWidth > db.HistoryMaxPartitionsAhead-2 {
			errs = append(errs, fmt.Errorf("%s %s needs more than %d partitions of %s: widen the partitions",
				r.name, r.d, db.HistoryMaxPartitionsAhead-2, c.PartitionWidth))
		}
	}
	return errors.Join(errs...)
}

// Interval is how often maintenance should run: often enough that the
// partitions made stay a margin (two widths) ahead.
func (c Config) Interval() time.Duration {
	return min(time.Hour, max(time.Second/2, c.PartitionWidth/2))
}

// Apply stores a replica's settings (the last replica started wins; a
// change is logged, as replicas should agree) and makes the partitions
// they need.
func Apply(ctx context.Context, pool *pgxpool.Pool, cfg Config) error {
	_, _, err := ApplyCounting(ctx, pool, cfg)
	return err
}

// ApplyCounting is Apply that also says how many partitions it made: of
// each history table, and keyed ones (events, callbacks, attempts, skip
// records) all together.
func ApplyCounting(ctx context.Context, pool *pgxpool.Pool, cfg Config) (made, madeKeyed int, err error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return 0, 0, err
	}
	before, err := db.HistorySettingGet(ctx, pool)
	if err != nil {
		return 0, 0, err
	}
	want := &axtype.HistorySetting{Retention: cfg.Retention, FailedRetention: cfg.FailedRetention, PartitionWidth: cfg.PartitionWidth}
	if before.Retention != want.Retention || before.FailedRetention != want.FailedRetention ||
		before.PartitionWidth != want.PartitionWidth {
		cfg.Logger.InfoContext(ctx, "history retention changed",
			"retention", want.Retention.String(), "failed_retention", want.FailedRetention.String(),
			"partition_width", want.PartitionWidth.String(),
			"was_retention", before.Retention.String(), "was_failed_retention", before.FailedRetention.String(),
			"was_partition_width", before.PartitionWidth.String())
		if err := db.HistorySettingApply(ctx, pool, want); err != nil {
			return 0, 0, err
		}
	}
	owned, owner, err := db.HistoryOwned(ctx, pool)
	if err != nil {
		return 0, 0, err
	}
	if !owned {
		// Making, re-partitioning and dropping need the tables' owner:
		// `ax maintain` as the owner does them (the migration made the
		// partitions of the retention ahead). Runs still end and move.
		cfg.Logger.WarnContext(ctx, "this database role may not make or drop history partitions: "+
			"run `ax maintain` as their owner at least daily (see the managed Postgres guide)",
			"owner", owner, "partition_width", want.PartitionWidth.String(), "stored_width", before.PartitionWidth.String())
		return 0, 0, nil
	}
	if before.PartitionWidth != want.PartitionWidth {
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			return db.HistorySetWidth(ctx, tx, want.PartitionWidth, cfg.LockTimeout)
		})
		if db.IsLockTimeout(err) {
			// The partitions as they are still serve; a later start
			// changes the width.
			cfg.Logger.WarnContext(ctx, "changing the history partition width waited too long for a lock; kept the old width",
				"partition_width", before.PartitionWidth.String(), "wanted", want.PartitionWidth.String(),
				"lock_timeout", cfg.LockTimeout.String())
		} else if err != nil {
			return 0, 0, err
		}
	}
	if made, err = makePartitions(ctx, pool, cfg); errors.Is(err, errLockWait) {
		// The migration made partitions well ahead; maintenance tries again.
		cfg.Logger.WarnContext(ctx, "making history partitions waited too long for a lock; maintenance tries again",
			"lock_timeout", cfg.LockTimeout.String())
	} else if err != nil {
		return made, 0, err
	}
	// (A table whose lock wait was too long is logged; its spill
	// partition takes what comes until maintenance makes them.)
	madeKeyed, _, err = makeKeyed(ctx, pool, cfg)
	return made, madeKeyed, err
}

// makePartitions makes the partitions ahead, a batch per short
// transaction.
func makePartitions(ctx context.Context, pool *pgxpool.Pool, cfg Config) (int, error) {
	total := 0
	for {
		var made int
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			var err error
			made, err = db.HistoryMakePartitions(ctx, tx, cfg.now(), cfg.LockTimeout)
			return err
		})
		if db.IsLockTimeout(err) {
			return total, errLockWait
		}
		if err != nil {
			return total, err
		}
		total += made
		if made < db.HistoryMakePartitionsBatch {
			return total, nil
		}
	}
}

// Report is what one maintenance pass did.
type Report struct {
	// NotOwner is the owner of the history tables when the role of the
	// pass is not (nor a member of it): the pass only moved leftover
	// ended runs; making and dropping partitions is `ax maintain`'s, run
	// as that owner.
	NotOwner  string
	Made      int              // partitions made (of each history table)
	MadeKeyed int              // partitions made of events, callbacks, attempts and skip records, all together
	Dropped   map[string]int64 // rows removed, by table
	Moved     int              // runs moved that had ended with a task in flight
	Waiting   int              // makes and drops that waited too long for their lock (tried next time)
	// DropTime is how long detaching and dropping the passed partitions
	// took, summed (counting their rows is not included), and
	// DropSpans when each group was detached and dropped.
	DropTime  time.Duration
	DropSpans []Span
}

// Maintain makes the partitions ahead, drops the passed ones and moves
// leftover ended runs; then it does the same for the keyed partitions
// (events, callbacks, attempts, skip records). Run by one replica at a time (a River periodic
// job); safe if two overlap (making and dropping lock the settings row
// and the tables).
func Maintain(ctx context.Context, pool *pgxpool.Pool, cfg Config) (*Report, error) {
	cfg = cfg.WithDefaults()
	now := cfg.now()
	rep := &Report{Dropped: map[string]int64{}}
	owned, owner, err := db.HistoryOwned(ctx, pool)
	if err != nil {
		return rep, err
	}
	if !owned {
		rep.NotOwner = owner
		rep.Moved, err = db.HistoryMoveLeftovers(ctx, pool, 1000)
		return rep, err
	}
	// Partitions are made two widths ahead: one pass that waits too long
	// for the lock (a long reader of history) costs nothing.
	if rep.Made, err = makePartitions(ctx, pool, cfg); errors.Is(err, errLockWait) {
		rep.Waiting++
		cfg.Logger.WarnContext(ctx, "making history partitions waited too long for a lock; trying again next time",
			"lock_timeout", cfg.LockTimeout.String())
	} else if err != nil {
		return rep, err
	}
	passed, err := db.HistoryPartitionsPassed(ctx, pool, now)
	if err != nil {
		return rep, err
	}
	var errs []error
	if err := dropLeftovers(ctx, pool, cfg, rep); err != nil {
		errs = append(errs, err)
	}
	for _, group := range byRange(passed) {
		counts, took, err := drop(ctx, pool, group, db.HistoryPartitionRows, cfg)
		if errors.Is(err, errLockWait) {
			rep.Waiting++
			cfg.Logger.WarnContext(ctx, "history partition drop waited too long for its lock; trying again next time",
				"partition", group[0].Name, "lock_timeout", cfg.LockTimeout.String())
			// A detach left pending must be finished before a table may
			// detach another partition: the next pass goes on from here.
			break
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		rep.DropTime += took
		rep.DropSpans = append(rep.DropSpans, Span{From: time.Now().Add(-took), To: time.Now()})
		for i, p := range group {
			rep.Dropped[p.Table] += counts[i]
			cfg.Dropped.WithLabelValues(p.Table).Add(float64(counts[i]))
			cfg.Logger.InfoContext(ctx, "history partition dropped", "table", p.Table, "partition", p.Name,
				"rows", counts[i], "from", p.RangeFrom, "to", p.RangeTo, "drop_ms", took.Milliseconds())
		}
	}
	if rep.Moved, err = db.HistoryMoveLeftovers(ctx, pool, 1000); err != nil {
		errs = append(errs, err)
	}
	if err := maintainKeyed(ctx, pool, cfg, rep); err != nil {
		errs = append(errs, err)
	}
	return rep, errors.Join(errs...)
}

var errLockWait = errors.New("lock wait")

// partitionRows counts the rows of a partition about to be dropped.
type partitionRows func(context.Context, db.Executor, axtype.HistoryPartition) (axtype.PartitionRows, error)

// Span is a stretch of time.
type Span struct{ From, To time.Time }

// byRange groups partitions of the same time range (one of each history
// table): they are dropped together, so a run never loses its tasks and
// keeps its execution, or the other way round.
func byRange(parts []axtype.HistoryPartition) [][]axtype.HistoryPartition {
	var out [][]axtype.HistoryPartition
	for _, p := range parts {
		if n := len(out); n > 0 && out[n-1][0].RangeFrom.Equal(p.RangeFrom) && out[n-1][0].RangeTo.Equal(p.RangeTo) {
			out[n-1] = append(out[n-1], p)
			continue
		}
		out = append(out, []axtype.HistoryPartition{p})
	}
	return out
}

// drop detaches a range's partitions without blocking the moves of ended
// runs, then counts their rows and drops them in one short transaction;
// it returns the counts and how long detaching and dropping took.
//
// The rows are counted once detached, not before: a run moved by a
// transaction whose clock began before the range passed may still land
// in it until the detach, which waits for every such transaction.
func drop(ctx context.Context, pool *pgxpool.Pool, group []axtype.HistoryPartition, rowsOf partitionRows,
	cfg Config) ([]int64, time.Duration, error) {
	began := time.Now()
	for _, p := range group {
		// Detaching blocks no one, so it may wait longer than a drop.
		if err := db.HistoryPartitionDetach(ctx, cmp.Or(cfg.Direct, pool), p, 10*cfg.LockTimeout); err != nil {
			if db.IsLockTimeout(err) {
				err = errLockWait
			}
			return nil, time.Since(began), err
		}
	}
	took := time.Since(began)
	counts := make([]int64, len(group))
	var dropBegan time.Time
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		rows := make([]axtype.PartitionRows, len(group))
		for i, p := range group {
			r, err := rowsOf(ctx, tx, p)
			if err != nil {
				return err
			}
			counts[i], rows[i] = r.Count, r
		}
		dropBegan = time.Now()
		for i, p := range group {
			if err := db.HistoryPartitionDrop(ctx, tx, p, rows[i], cfg.LockTimeout); err != nil {
				return err
			}
		}
		return nil
	})
	if !dropBegan.IsZero() {
		took += time.Since(dropBegan)
	}
	if db.IsLockTimeout(err) {
		return nil, took, errLockWait
	}
	if err != nil {
		return nil, took, err
	}
	return counts, took, nil
}

// dropLeftovers drops history partitions a stopped pass detached and did
// not drop (their rows were past retention), recording each drop as a
// pass does: its runs are answered 410 Gone, not 404.
func dropLeftovers(ctx context.Context, pool *pgxpool.Pool, cfg Config, rep *Report) error {
	names, err := db.HistoryDetachedLeftovers(ctx, pool)
	if err != nil {
		return err
	}
	for _, name := range names {
		var p axtype.HistoryPartition
		var rows axtype.PartitionRows
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			var err error
			if p, rows, err = db.HistoryLeftover(ctx, tx, name); err != nil {
				return err
			}
			return db.HistoryPartitionDrop(ctx, tx, p, rows, cfg.LockTimeout)
		})
		if err != nil {
			return err
		}
		rep.Dropped[p.Table] += rows.Count
		cfg.Dropped.WithLabelValues(p.Table).Add(float64(rows.Count))
		cfg.Logger.WarnContext(ctx, "dropped a history partition detached by an earlier pass", "partition", name,
			"rows", rows.Count)
	}
	return nil
}
