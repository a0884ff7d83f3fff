// Package vacuum keeps ax's hot tables free of dead rows when autovacuum
// does not: it is off on some installations, and where it is on it looks
// at a database once a minute (autovacuum_naptime), in which a busy
// replica leaves hundreds of thousands of dead rows in its queue tables.
// Dead rows cost every lease, completion and fire: their index entries are
// read and skipped (measured with BenchmarkDelayedRuns: a lease pick took
// 2.2–3.2 ms with them, 0.2 ms with the tables vacuumed every few seconds).
package vacuum

import (
	"cmp"
	"context"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ax-scheduler/ax/db"
	"github.com/ax-scheduler/ax/queue/internal/startstop"
	"github.com/ax-scheduler/ax/queue/metrics"
)

// HotTables are the tables whose rows are updated or deleted by the work
// itself (each task, fire, lease and callback): the queues.
var HotTables = []string{"task", "execution", "delayed_run", "trigger", "agent", "rate_class", "http_task_slot",
	"http_task_slot_wait", "callback_breaker", "river_job"}

// Config tunes a Vacuumer.
type Config struct {
	// Busy is how often the statistics are read while the last look found
	// a table to vacuum. Defaults to 2 seconds.
	Busy time.Duration
	// Idle is the longest pause between looks when nothing needed a
	// vacuum (the pause doubles from Busy up to it). Defaults to 5 s: a
	// burst of work leaves tens of thousands of dead rows in seconds (a
	// 30 s pause slept through BenchmarkDelayedRuns' 20 s due stream).
	Idle time.Duration
	// MinDead and DeadShare: a table is vacuumed when its dead rows are at
	// least MinDead and at least DeadShare of its live rows. Defaults to
	// 1,000 and 0.2.
	MinDead   int64
	DeadShare float64
	// Tables defaults to HotTables.
	Tables []string
	// Logger defaults to discarding; Metrics to unregistered.
	Logger  *slog.Logger
	Metrics *metrics.Metrics
}

func (c Config) withDefaults() Config {
	c.Busy = cmp.Or(c.Busy, 2*time.Second)
	c.Idle = max(cmp.Or(c.Idle, 5*time.Second), c.Busy)
	c.MinDead = cmp.Or(c.MinDead, 1000)
	c.DeadShare = cmp.Or(c.DeadShare, 0.2)
	if c.Tables == nil {
		c.Tables = HotTables
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Metrics == nil {
		c.Metrics = metrics.New(nil)
	}
	return c
}

// Vacuumer vacuums the hot tables that need it. Every replica runs one;
// VACUUM (SKIP_LOCKED) lets one replica vacuum a table while the others
// skip it, and a table just vacuumed no longer reads as needing it.
type Vacuumer struct {
	pool *pgxpool.Pool
	cfg  Config
	bg   startstop.Runner

	denied map[string]bool // tables the role may not vacuum, reported once
}

// New returns a Vacuumer over pool.
func New(pool *pgxpool.Pool, cfg Config) *Vacuumer {
	return &Vacuumer{pool: pool, cfg: cfg.withDefaults(), denied: map[string]bool{}}
}

// Start runs it in the background until Stop.
func (v *Vacuumer) Start(ctx context.Context) error {
	v.bg.Start(ctx, v.run)
	return nil
}

// Stop ends it, cancelling a VACUUM in progress. Safe to call twice.
func (v *Vacuumer) Stop() { v.bg.Stop() }

func (v *Vacuumer) run(ctx context.Context) {
	pause := v.cfg.Busy
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(pause):
		}
		n, err := v.Pass(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			v.cfg.Logger.ErrorContext(ctx, "error vacuuming hot tables", "error", err)
			pause = v.cfg.Idle
		case n > 0:
			pause = v.cfg.Busy
		default:
			pause = min(pause*2, v.cfg.Idle)
		}
	}
}

// reportDenied says once per table that the role may not vacuum it.
func (v *Vacuumer) reportDenied(ctx context.Context, table string) {
	if v.denied[table] {
		return
	}
	v.denied[table] = true
	v.cfg.Metrics.VacuumDenied.WithLabelValues(table).Set(1)
	v.cfg.Logger.WarnContext(ctx, "not allowed to vacuum a hot table: its dead rows are left to autovacuum; "+
		"vacuuming needs the table's or the database's owner (see the managed Postgres guide)", "table", table)
}

// Pass vacuums each table over the thresholds once and says how many.
// A table the role may not vacuum (a runtime role that owns neither it
// nor the database) is reported once, by a warning and VacuumDenied, and
// left to autovacuum: VACUUM would skip it with a mere warning, and
// counting that as done would hide it.
func (v *Vacuumer) Pass(ctx context.Context) (int, error) {
	stats, err := db.TableDeadTuples(ctx, v.pool, v.cfg.Tables)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, table := range v.cfg.Tables {
		s, ok := stats[table]
		if ok && !s.MayVacuum {
			v.reportDenied(ctx, table)
			continue
		}
		if !ok || s.Dead < v.cfg.MinDead || float64(s.Dead) < v.cfg.DeadShare*float64(s.Live) {
			continue
		}
		began := time.Now()
		if err := db.VacuumTable(ctx, v.pool, table); err != nil {
			return n, err
		}
		n++
		took := time.Since(began)
		v.cfg.Metrics.Vacuums.WithLabelValues(table).Inc()
		v.cfg.Metrics.VacuumSeconds.WithLabelValues(table).Add(took.Seconds())
		v.cfg.Logger.DebugContext(ctx, "table vacuumed", "table", table, "dead_rows", s.Dead, "live_rows", s.Live,
			"took", took)
	}
	return n, nil
}
