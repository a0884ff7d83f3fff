package db

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ax-scheduler/ax/db/internal/dbsqlc"
	"github.com/ax-scheduler/ax/queue/axtype"
)

// HistorySettingGet returns the stored settings.
func HistorySettingGet(ctx context.Context, e Executor) (*axtype.HistorySetting, error) {
	r, err := queries.HistorySettingGet(ctx, e)
	if err != nil {
		return nil, fmt.Errorf("error reading history settings: %w", mapErr(err))
	}
	return &axtype.HistorySetting{
		Retention: seconds(r.FinishedSeconds), FailedRetention: seconds(r.FailedSeconds),
		PartitionWidth: seconds(r.WidthSeconds), MadeUntil: r.MadeUntil.UTC(),
	}, nil
}

// HistorySettingApply stores the server-wide retention.
func HistorySettingApply(ctx context.Context, e Executor, s *axtype.HistorySetting) error {
	err := queries.HistorySettingApply(ctx, e, dbsqlc.HistorySettingApplyParams{
		FinishedSeconds: s.Retention.Seconds(), FailedSeconds: s.FailedRetention.Seconds(),
	})
	if err != nil {
		return fmt.Errorf("error storing history settings: %w", mapErr(err))
	}
	return nil
}

// HistorySetWidth changes, in tx, the width of the history partitions:
// the partitions made ahead that hold no row yet are dropped and the
// first batch at the new width is made in the same transaction, so that
// an ended run always finds its partition (a horizon left unmade would
// fail every move). Lock waits are bounded by lockTimeout.
func HistorySetWidth(ctx context.Context, tx pgx.Tx, width time.Duration, lockTimeout time.Duration) error {
	if err := setLockTimeout(ctx, tx, lockTimeout); err != nil {
		return err
	}
	if err := queries.HistorySetWidth(ctx, tx, width.Seconds()); err != nil {
		return fmt.Errorf("error changing the history partition width: %w", mapErr(err))
	}
	_, err := HistoryMakePartitions(ctx, tx, nil, lockTimeout)
	return err
}

// HistoryMakePartitionsBatch is the most partitions (of each history
// table) HistoryMakePartitions makes in one call.
const HistoryMakePartitionsBatch = 50

// HistoryMaxPartitionsAhead bounds how many partition widths ahead
// partitions are made: a retention longer than that many widths is cut to
// it (a run is then removed early). With the default width of a day it is
// more than the longest retention allowed (400 days); with widths of
// seconds (tests) it bounds the partition count.
const HistoryMaxPartitionsAhead = 1000

// HistoryMakePartitions makes, in tx, up to HistoryMakePartitionsBatch of
// the history partitions the longest retention in use needs from now on
// (nil: the database clock), waiting at most lockTimeout for the history
// tables' locks (making a partition locks its table as a drop does);
// returns how many it made: when a full batch, call again.
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

// HistoryPartitionsPassed lists the partitions whose range ended by now
// (nil: the database clock).
func HistoryPartitionsPassed(ctx context.Context, e Executor, now *time.Time) ([]axtype.HistoryPartition, error) {
	rows, err := queries.HistoryPartitionsPassed(ctx, e, now)
	if err != nil {
		return nil, fmt.Errorf("error listing history partitions: %w", mapErr(err))
	}
	out := make([]axtype.HistoryPartition, len(rows))
	for i, r := range rows {
		out[i] = axtype.HistoryPartition{Name: r.PartitionName, Table: r.TableName, RangeFrom: r.RangeFrom.UTC(), RangeTo: r.RangeTo.UTC()}
	}
	return out, nil
}

// HistoryPartitionRows counts the rows of a partition and bounds their
// ids (through the partition's id index).
func HistoryPartitionRows(ctx context.Context, e Executor, p axtype.HistoryPartition) (axtype.PartitionRows, error) {
	var r axtype.PartitionRows
	name := pgx.Identifier{"ax", p.Name}.Sanitize()
	err := e.QueryRow(ctx, "SELECT count(*), (SELECT id FROM "+name+" ORDER BY id LIMIT 1), "+
		"(SELECT id FROM "+name+" ORDER BY id DESC LIMIT 1) FROM "+name).Scan(&r.Count, &r.MinID, &r.MaxID)
	if err != nil {
		return r, fmt.Errorf("error counting rows of %s: %w", p.Name, mapErr(err))
	}
	return r, nil
}

// ExecutionRemoved says whether execution id, not found, was removed by
// history retention: its id lies within the ids of a dropped partition.
func ExecutionRemoved(ctx context.Context, e Executor, id uuid.UUID) (bool, error) {
	gone, err := queries.HistoryDropCovers(ctx, e, dbsqlc.HistoryDropCoversParams{TableName: "execution_history", ID: id})
	if err != nil {
		return false, fmt.Errorf("error reading history drops: %w", mapErr(err))
	}
	return gone, nil
}

// HistoryDropList returns the latest max drops, newest first.
func HistoryDropList(ctx context.Context, e Executor, max int) ([]axtype.HistoryDrop, error) {
	rows, err := queries.HistoryDropList(ctx, e, int32(max))
	if err != nil {
		return nil, fmt.Errorf("error listing history drops: %w", mapErr(err))
	}
	out := make([]axtype.HistoryDrop, len(rows))
	for i, r := range rows {
		out[i] = axtype.HistoryDrop{Table: r.TableName, RangeFrom: r.RangeFrom.UTC(), RangeTo: r.RangeTo.UTC(), Rows: r.RowCount,
			DroppedAt: r.DroppedAt.UTC()}
	}
	return out, nil
}

// HistoryPartitionDetach detaches p from its history table without
// holding up the moves of ended runs: DETACH PARTITION ... CONCURRENTLY
// takes only SHARE UPDATE EXCLUSIVE on the table (a plain DETACH or DROP
// takes ACCESS EXCLUSIVE, which queues every insert behind the drop and
// behind whatever transaction the drop waits for), then waits for the
// transactions that may still read the partition. It must not run in a
// transaction. A detach left pending by an interrupted call is finished.
//
// Its waits are bounded by lockTimeout (a long reader of history holds it
// up, not the other way round): a detach that gives up stays pending and
// is finished by a later call.
func HistoryPartitionDetach(ctx context.Context, pool *pgxpool.Pool, p axtype.HistoryPartition, lockTimeout time.Duration) error {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("error detaching %s: %w", p.Name, mapErr(err))
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, fmt.Sprintf("SET lock_timeout = %d", max(1, lockTimeout.Milliseconds()))); err != nil {
		return fmt.Errorf("error setting lock timeout: %w", mapErr(err))
	}
	// The connection goes back to the pool as it was.
	defer conn.Exec(context.WithoutCancel(ctx), "RESET lock_timeout") //nolint:errcheck // a failed reset fails the next use
	alter := "ALTER TABLE " + pgx.Identifier{"ax", p.Table}.Sanitize() + " DETACH PARTITION " +
		pgx.Identifier{"ax", p.Name}.Sanitize()
	_, err = conn.Exec(ctx, alter+" CONCURRENTLY")
	if err != nil && strings.Contains(err.Error(), "already pending detach") {
		_, err = conn.Exec(ctx, alter+" FINALIZE")
	}
	if err != nil {
		return fmt.Errorf("error detaching %s: %w", p.Name, mapErr(err))
	}
	return nil
}

// HistoryPartitionDrop drops a detached partition in tx, waiting at most
// lockTimeout for its lock, and records it.
func HistoryPartitionDrop(ctx context.Context, tx pgx.Tx, p axtype.HistoryPartition, rows axtype.PartitionRows, lockTimeout time.Duration) error {
	if err := setLockTimeout(ctx, tx, lockTimeout); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, "DROP TABLE "+pgx.Identifier{"ax", p.Name}.Sanitize()); err != nil {
		return fmt.Errorf("error dropping %s: %w", p.Name, mapErr(err))
	}
	err := queries.HistoryDropInsert(ctx, tx, dbsqlc.HistoryDropInsertParams{
		TableName: p.Table, RangeFrom: p.RangeFrom, RangeTo: p.RangeTo, RowCount: rows.Count,
		MinID: rows.MinID, MaxID: rows.MaxID,
	})
	if err != nil {
		return fmt.Errorf("error recording the drop of %s: %w", p.Name, mapErr(err))
	}
	return nil
}

// HistoryDetachedLeftovers lists history partitions detached and never
// dropped (a maintenance pass stopped between the two): tables of schema
// ax named like them that are no partition.
func HistoryDetachedLeftovers(ctx context.Context, e Executor) ([]string, error) {
	names, err := queries.HistoryDetachedLeftovers(ctx, e)
	if err != nil {
		return nil, fmt.Errorf("error listing detached history partitions: %w", mapErr(err))
	}
	return names, nil
}

// historyLeftoverName is how history partitions are named (migration
// 00024), as HistoryDetachedLeftovers matches them: the table's prefix
// and the range's start, UTC.
var historyLeftoverName = regexp.MustCompile(`^(execution|task)_h(\d{8}t\d{6})$`)

// HistoryLeftover reads a detached history partition left over as the
// partition it was and its rows: its range starts where its name says,
// and ends at its last row's retain_until (its bound went with the
// detach; at its start when it is empty).
func HistoryLeftover(ctx context.Context, e Executor, name string) (axtype.HistoryPartition, axtype.PartitionRows, error) {
	m := historyLeftoverName.FindStringSubmatch(name)
	var from time.Time
	err := fmt.Errorf("%s is not named as a history partition", name)
	if m != nil {
		from, err = time.Parse("20060102t150405", m[2])
	}
	if err != nil {
		return axtype.HistoryPartition{}, axtype.PartitionRows{}, fmt.Errorf("error reading leftover %s: %w", name, err)
	}
	p := axtype.HistoryPartition{Name: name, Table: m[1] + "_history", RangeFrom: from, RangeTo: from}
	rows, err := HistoryPartitionRows(ctx, e, p)
	if err != nil {
		return p, rows, err
	}
	var last *time.Time
	if err := e.QueryRow(ctx, "SELECT max(retain_until) FROM "+pgx.Identifier{"ax", name}.Sanitize()).Scan(&last); err != nil {
		return p, rows, fmt.Errorf("error reading the rows of %s: %w", name, mapErr(err))
	}
	if last != nil {
		p.RangeTo = last.UTC()
	}
	return p, rows, nil
}

// HistoryDropTable drops a detached history partition left over.
func HistoryDropTable(ctx context.Context, e Executor, name string) error {
	if _, err := e.Exec(ctx, "DROP TABLE "+pgx.Identifier{"ax", name}.Sanitize()); err != nil {
		return fmt.Errorf("error dropping %s: %w", name, mapErr(err))
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

// HistoryOwned says whether the connected role may make and drop history
// partitions: it is (or is a member of) the owner of ax's history tables,
// or a superuser. A runtime role of the owner/runtime split is not.
func HistoryOwned(ctx context.Context, e Executor) (owned bool, owner string, err error) {
	err = e.QueryRow(ctx, `SELECT pg_has_role(current_user, c.relowner, 'USAGE'), pg_get_userbyid(c.relowner)
		FROM pg_class c WHERE c.oid = 'ax.execution_history'::regclass`).Scan(&owned, &owner)
	if err != nil {
		return false, "", fmt.Errorf("error reading the owner of the history tables: %w", mapErr(err))
	}
	return owned, owner, nil
}
