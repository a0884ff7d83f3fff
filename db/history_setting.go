package db

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ax-scheduler/ax/db/internal/dbsqlc"
)

// HistorySetting is the server-wide retention of finished runs and the
// layout of the history partitions (ax.history_setting).
type HistorySetting struct {
	Retention       time.Duration // succeeded and cancelled runs
	FailedRetention time.Duration // failed and timed-out runs
	PartitionWidth  time.Duration // the time range of one history partition
	MadeUntil       time.Time     // upper bound of the newest partition
}

// HistorySettingGet returns the stored settings.
func HistorySettingGet(ctx context.Context, e Executor) (*HistorySetting, error) {
	r, err := queries.HistorySettingGet(ctx, e)
	if err != nil {
		return nil, fmt.Errorf("error reading history settings: %w", mapErr(err))
	}
	return &HistorySetting{
		Retention: seconds(r.FinishedSeconds), FailedRetention: seconds(r.FailedSeconds),
		PartitionWidth: seconds(r.WidthSeconds), MadeUntil: r.MadeUntil.UTC(),
	}, nil
}

// HistorySettingApply stores the retention and partition width: the
// partitions made ahead that hold no row yet are made again at a new width.
func HistorySettingApply(ctx context.Context, e Executor, s *HistorySetting) error {
	err := queries.HistorySettingApply(ctx, e, dbsqlc.HistorySettingApplyParams{
		FinishedSeconds: s.Retention.Seconds(), FailedSeconds: s.FailedRetention.Seconds(),
	})
	if err == nil {
		err = queries.HistorySetWidth(ctx, e, s.PartitionWidth.Seconds())
	}
	if err != nil {
		return fmt.Errorf("error storing history settings: %w", mapErr(err))
	}
	return nil
}

// HistoryMakePartitions makes, in tx, the history partitions the longest
// retention in use needs from now on (nil: the database clock), waiting at
// most lockTimeout for the history tables' locks (making a partition locks
// its table as a drop does); returns how many it made.
func HistoryMakePartitions(ctx context.Context, tx pgx.Tx, now *time.Time, lockTimeout time.Duration) (int, error) {
	if err := setLockTimeout(ctx, tx, lockTimeout); err != nil {
		return 0, err
	}
	n, err := queries.HistoryMakePartitions(ctx, tx, now)
	if err != nil {
		return 0, fmt.Errorf("error making history partitions: %w", mapErr(err))
	}
	return int(n), nil
}

// setLockTimeout bounds the lock waits of the rest of tx.
func setLockTimeout(ctx context.Context, tx pgx.Tx, d time.Duration) error {
	if _, err := tx.Exec(ctx, fmt.Sprintf("SET LOCAL lock_timeout = %d", max(1, d.Milliseconds()))); err != nil {
		return fmt.Errorf("error setting lock timeout: %w", mapErr(err))
	}
	return nil
}

// HistoryPartition is one partition of a history table.
type HistoryPartition struct {
	Name      string // the partition's table, in schema ax
	Table     string // execution_history or task_history
	RangeFrom time.Time
	RangeTo   time.Time
}

// HistoryPartitionsPassed lists the partitions whose range ended by now
// (nil: the database clock).
func HistoryPartitionsPassed(ctx context.Context, e Executor, now *time.Time) ([]HistoryPartition, error) {
	rows, err := queries.HistoryPartitionsPassed(ctx, e, now)
	if err != nil {
		return nil, fmt.Errorf("error listing history partitions: %w", mapErr(err))
	}
	out := make([]HistoryPartition, len(rows))
	for i, r := range rows {
		out[i] = HistoryPartition{Name: r.PartitionName, Table: r.TableName, RangeFrom: r.RangeFrom.UTC(), RangeTo: r.RangeTo.UTC()}
	}
	return out, nil
}

// HistoryPartitionCount counts the rows of a partition.
func HistoryPartitionCount(ctx context.Context, e Executor, p HistoryPartition) (int64, error) {
	var n int64
	err := e.QueryRow(ctx, "SELECT count(*) FROM "+pgx.Identifier{"ax", p.Name}.Sanitize()).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("error counting rows of %s: %w", p.Name, mapErr(err))
	}
	return n, nil
}

// HistoryPartitionDrop drops a partition in tx, waiting at most
// lockTimeout for its table lock (the drop locks the history table; queued
// behind a long reader it would hold up every move), and records it.
func HistoryPartitionDrop(ctx context.Context, tx pgx.Tx, p HistoryPartition, rows int64, lockTimeout time.Duration) error {
	if err := setLockTimeout(ctx, tx, lockTimeout); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, "DROP TABLE "+pgx.Identifier{"ax", p.Name}.Sanitize()); err != nil {
		return fmt.Errorf("error dropping %s: %w", p.Name, mapErr(err))
	}
	err := queries.HistoryDropInsert(ctx, tx, dbsqlc.HistoryDropInsertParams{
		TableName: p.Table, RangeFrom: p.RangeFrom, RangeTo: p.RangeTo, RowCount: rows,
	})
	if err != nil {
		return fmt.Errorf("error recording the drop of %s: %w", p.Name, mapErr(err))
	}
	return nil
}

// HistoryMoveLeftovers moves up to max runs that ended with a task still
// in flight, once their tasks have ended; returns how many moved.
func HistoryMoveLeftovers(ctx context.Context, e Executor, max int) (int, error) {
	n, err := queries.HistoryMoveLeftovers(ctx, e, int32(max))
	if err != nil {
		return 0, fmt.Errorf("error moving ended runs to history: %w", mapErr(err))
	}
	return int(n), nil
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
