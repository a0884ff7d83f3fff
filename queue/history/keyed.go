package history

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ax-scheduler/ax/db"

	"github.com/ax-scheduler/ax/queue/axtype"
)

// Events, callbacks and callback attempts are partitioned by range of
// execution id, skip records by recorded_at (migration 00026): keyed
// partitions, made two widths ahead and dropped by their own rule (a
// run-keyed partition when no execution of its ids remains, a skip
// partition when older than the longest server retention).

// makeKeyed makes the keyed partitions ahead, each table in its own short
// transaction; returns how many it made and how many tables waited too
// long for their lock (tried again next pass: the spill partition takes
// what comes meanwhile).
func makeKeyed(ctx context.Context, pool *pgxpool.Pool, cfg Config) (made, waiting int, err error) {
	var errs []error
	for _, table := range db.KeyedTables {
		var n int
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			var err error
			n, err = db.KeyedPartitionsMake(ctx, tx, table, cfg.now(), cfg.LockTimeout)
			return err
		})
		if db.IsLockTimeout(err) {
			waiting++
			cfg.Logger.WarnContext(ctx, "making partitions waited too long for a lock; trying again next time",
				"table", table, "lock_timeout", cfg.LockTimeout.String())
			continue
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		made += n
	}
	return made, waiting, errors.Join(errs...)
}

// maintainKeyed drops the keyed partitions detached by a stopped pass and
// those that may go, then makes those ahead, adding what it did to rep.
func maintainKeyed(ctx context.Context, pool *pgxpool.Pool, cfg Config, rep *Report) error {
	var errs []error
	if err := dropKeyedLeftovers(ctx, pool, cfg); err != nil {
		errs = append(errs, err)
	}
	parts, err := db.KeyedPartitionsDroppable(ctx, pool, cfg.now())
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	for _, p := range parts {
		counts, took, err := drop(ctx, pool, []axtype.HistoryPartition{p}, db.KeyedPartitionRows, cfg)
		if errors.Is(err, errLockWait) {
			rep.Waiting++
			cfg.Logger.WarnContext(ctx, "partition drop waited too long for its lock; trying again next time",
				"table", p.Table, "partition", p.Name, "lock_timeout", cfg.LockTimeout.String())
			// A table's pending detach is finished by the next pass.
			break
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		rep.DropTime += took
		rep.DropSpans = append(rep.DropSpans, Span{From: time.Now().Add(-took), To: time.Now()})
		rep.Dropped[p.Table] += counts[0]
		cfg.Dropped.WithLabelValues(p.Table).Add(float64(counts[0]))
		cfg.Logger.InfoContext(ctx, "partition dropped", "table", p.Table, "partition", p.Name,
			"rows", counts[0], "from", p.RangeFrom, "to", p.RangeTo, "drop_ms", took.Milliseconds())
	}
	made, waiting, err := makeKeyed(ctx, pool, cfg)
	rep.MadeKeyed += made
	rep.Waiting += waiting
	if err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// dropKeyedLeftovers drops keyed partitions a stopped pass detached and
// did not drop (no run of theirs remained).
func dropKeyedLeftovers(ctx context.Context, pool *pgxpool.Pool, cfg Config) error {
	names, err := db.KeyedDetachedLeftovers(ctx, pool)
	if err != nil {
		return err
	}
	for _, name := range names {
		if err := db.HistoryDropTable(ctx, pool, name); err != nil {
			return err
		}
		cfg.Logger.WarnContext(ctx, "dropped a partition detached by an earlier pass", "partition", name)
	}
	return nil
}
