package runlog

import (
	"cmp"
	"context"
	"log/slog"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ax-scheduler/ax/db"
	"github.com/ax-scheduler/ax/queue/axtype"
	"github.com/ax-scheduler/ax/queue/internal/startstop"
	"github.com/ax-scheduler/ax/queue/notify"
)

// runLoggerLockID is the session advisory lock of the replica that logs
// run ends: every replica hears every end, one logs it.
const runLoggerLockID = 0x61785f72756e6c // "ax_runl"

// RunLoggerConfig configures a RunLogger.
type RunLoggerConfig struct {
	// Logger gets the lines. Required.
	Logger *slog.Logger
	// LinesPerSecond bounds the run-end lines a second; past it they are
	// summarized. Defaults to DefaultLinesPerSecond.
	LinesPerSecond int
	// FlushEvery is how long ended runs are gathered before they are read
	// in one query. Defaults to 200 ms.
	FlushEvery time.Duration
	// RetryLeaderEvery is how often a replica that is not the logging one
	// tries to become it. Defaults to 10 s.
	RetryLeaderEvery time.Duration
}

// RunLogger writes one info line per ended run: execution_id, the job's
// group and name, state, duration, error codes and attempt. It learns of
// ends from the database's ax_execution_ended notifications, so runs
// ended by any path (results, the reaper, a cancel) are logged the same
// way, and reads what it logs in one query per batch. One replica logs
// (it holds an advisory lock on a connection of its own); a notification
// lost while a connection is down loses its line, never a run.
type RunLogger struct {
	pool     *pgxpool.Pool
	notifier *notify.Notifier
	cfg      RunLoggerConfig
	budget   *LineBudget
	bg       startstop.Runner
}

// NewRunLogger returns a RunLogger of pool's runs, woken by notifier.
func NewRunLogger(pool *pgxpool.Pool, notifier *notify.Notifier, cfg RunLoggerConfig) *RunLogger {
	cfg.FlushEvery = cmp.Or(cfg.FlushEvery, 200*time.Millisecond)
	cfg.RetryLeaderEvery = cmp.Or(cfg.RetryLeaderEvery, 10*time.Second)
	return &RunLogger{pool: pool, notifier: notifier, cfg: cfg,
		budget: NewLineBudget(cfg.Logger, cfg.LinesPerSecond, "more runs ended than are logged one by one")}
}

// Start subscribes and starts logging.
func (l *RunLogger) Start(ctx context.Context) error {
	payloads, unsubscribe := l.notifier.SubscribePayloads(notify.ExecutionEndedChannel, 4096)
	l.bg.Start(ctx, func(ctx context.Context) {
		defer unsubscribe()
		l.run(ctx, payloads)
	})
	return nil
}

// Stop stops it; safe to call twice, without Start or on nil.
func (l *RunLogger) Stop() {
	if l != nil {
		l.bg.Stop()
	}
}

func (l *RunLogger) run(ctx context.Context, payloads <-chan string) {
	for ctx.Err() == nil {
		conn, err := l.pool.Acquire(ctx)
		if err == nil {
			var leader bool
			if leader, err = db.TrySessionLock(ctx, conn, runLoggerLockID); err == nil && leader {
				l.lead(ctx, payloads)
				// The lock goes with the connection: closed, not reused.
				_ = conn.Conn().Close(context.WithoutCancel(ctx))
			}
			conn.Release()
		}
		if err != nil && ctx.Err() == nil {
			l.cfg.Logger.WarnContext(ctx, "run logger could not take its lock", "error", err)
		}
		drainUntil(ctx, payloads, time.After(l.cfg.RetryLeaderEvery))
	}
}

// drainUntil drops payloads (another replica logs them) until done.
func drainUntil(ctx context.Context, payloads <-chan string, done <-chan time.Time) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-done:
			return
		case <-payloads:
		}
	}
}

// lead logs the runs that end while ctx lives.
func (l *RunLogger) lead(ctx context.Context, payloads <-chan string) {
	tick := time.NewTicker(l.cfg.FlushEvery)
	defer tick.Stop()
	var ids []uuid.UUID
	for {
		select {
		case <-ctx.Done():
			return
		case p := <-payloads:
			for s := range strings.SplitSeq(p, ",") {
				if id, err := uuid.Parse(s); err == nil {
					ids = append(ids, id)
				}
			}
		case <-tick.C:
			if len(ids) == 0 {
				continue
			}
			if err := l.flush(ctx, ids); err != nil && ctx.Err() == nil {
				l.cfg.Logger.WarnContext(ctx, "run logger could not read ended runs", "runs", len(ids), "error", err)
			}
			ids = ids[:0]
		}
	}
}

// maxRead bounds one query's ids; more wait for the next read.
const maxRead = 1000

func (l *RunLogger) flush(ctx context.Context, ids []uuid.UUID) error {
	for len(ids) > 0 {
		n := min(len(ids), maxRead)
		ends, err := db.ExecutionEndSummaries(ctx, l.pool, ids[:n])
		if err != nil {
			return err
		}
		for _, e := range ends {
			l.log(ctx, e)
		}
		ids = ids[n:]
	}
	return nil
}

// log writes one run's end, within the budget.
func (l *RunLogger) log(ctx context.Context, e axtype.ExecutionEnd) {
	if !l.budget.Allow(e.State) {
		return
	}
	attrs := []slog.Attr{slog.String("execution_id", e.ID.String()), slog.String("job_id", e.JobID.String()),
		slog.String("job", e.Group+"/"+e.Name), slog.String("state", e.State), slog.String("cause", e.Cause),
		slog.Int64("attempt", e.Attempt)}
	if e.StartedAt != nil {
		attrs = append(attrs, slog.Float64("duration_ms", float64(e.FinishedAt.Sub(*e.StartedAt).Microseconds())/1000))
	}
	if e.ErrorCodes != "" {
		attrs = append(attrs, slog.String("error_code", e.ErrorCodes))
	}
	l.cfg.Logger.LogAttrs(ctx, slog.LevelInfo, "run ended", attrs...)
}
