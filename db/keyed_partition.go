package db

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ax-scheduler/ax/db/internal/dbsqlc"
	"github.com/ax-scheduler/ax/queue/axtype"
)

// KeyedTables are the tables partitioned by range of a key other than
// retention (migration 00026): the run-keyed ones by execution id (a
// UUIDv7, so a range of ids is a stretch of fire times), skip records by
// recorded_at.
var KeyedTables = []string{"task_event", "callback", "callback_attempt", "skipped_fire"}

// KeyedPartitionsMake makes, in tx, the partitions of table (one of
// KeyedTables) up to two partition widths past now (nil: the database
// clock), waiting at most lockTimeout for the table's locks: making them
// cuts them off the table's spill partition, which takes the table's
// ACCESS EXCLUSIVE lock for a moment. Returns how many it made.
func KeyedPartitionsMake(ctx context.Context, tx pgx.Tx, table string, now *time.Time, lockTimeout time.Duration) (int, error) {
	if err := setLockTimeout(ctx, tx, lockTimeout); err != nil {
		return 0, err
	}
	n, err := queries.KeyedPartitionsMake(ctx, tx, dbsqlc.KeyedPartitionsMakeParams{TableName: table, Now: now})
	if err != nil {
		return 0, fmt.Errorf("error making partitions of %s: %w", table, mapErr(err))
	}
	return int(n), nil
}

// KeyedPartitionsDroppable lists the partitions that may be dropped by
// now (nil: the database clock): of the run-keyed tables, those whose id
// range ended a partition width ago and holds the id of no execution left,
// live or in history; of ax.skipped_fire, those whose range ended longer
// ago than the longest server retention. RangeFrom and RangeTo of a
// run-keyed partition are the instants of its bounds' ids.
func KeyedPartitionsDroppable(ctx context.Context, e Executor, now *time.Time) ([]axtype.HistoryPartition, error) {
	runs, err := queries.KeyedRunPartitionsDroppable(ctx, e, now)
	if err != nil {
		return nil, fmt.Errorf("error listing run-keyed partitions: %w", mapErr(err))
	}
	skips, err := queries.KeyedSkipPartitionsPassed(ctx, e, now)
	if err != nil {
		return nil, fmt.Errorf("error listing skip record partitions: %w", mapErr(err))
	}
	out := make([]axtype.HistoryPartition, 0, len(runs)+len(skips))
	for _, r := range runs {
		out = append(out, axtype.HistoryPartition{Name: r.PartitionName, Table: r.TableName, RangeFrom: r.RangeFrom.UTC(),
			RangeTo: r.RangeTo.UTC()})
	}
	for _, r := range skips {
		out = append(out, axtype.HistoryPartition{Name: r.PartitionName, Table: r.TableName, RangeFrom: r.RangeFrom.UTC(),
			RangeTo: r.RangeTo.UTC()})
	}
	return out, nil
}

// KeyedPartitionRows counts the rows of a partition of a keyed table and,
// for the run-keyed ones, bounds their execution ids (through its
// primary key).
func KeyedPartitionRows(ctx context.Context, e Executor, p axtype.HistoryPartition) (axtype.PartitionRows, error) {
	var r axtype.PartitionRows
	name := pgx.Identifier{"ax", p.Name}.Sanitize()
	sql := "SELECT count(*), NULL::uuid, NULL::uuid FROM " + name
	if p.Table != "skipped_fire" {
		sql = "SELECT count(*), (SELECT execution_id FROM " + name + " ORDER BY execution_id LIMIT 1), " +
			"(SELECT execution_id FROM " + name + " ORDER BY execution_id DESC LIMIT 1) FROM " + name
	}
	if err := e.QueryRow(ctx, sql).Scan(&r.Count, &r.MinID, &r.MaxID); err != nil {
		return r, fmt.Errorf("error counting rows of %s: %w", p.Name, mapErr(err))
	}
	return r, nil
}

// KeyedDetachedLeftovers lists partitions of the keyed tables detached
// and never dropped (a maintenance pass stopped between the two).
func KeyedDetachedLeftovers(ctx context.Context, e Executor) ([]string, error) {
	names, err := queries.KeyedDetachedLeftovers(ctx, e)
	if err != nil {
		return nil, fmt.Errorf("error listing detached keyed partitions: %w", mapErr(err))
	}
	return names, nil
}
