// Package db owns ax's access to Postgres: the pool, migrations,
// transactions, error mapping and typed query functions. The sqlc-generated
// code stays in db/internal; callers get ax's own row types.
package db

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	pgxuuid "github.com/vgarvardt/pgx-google-uuid/v5"

	"github.com/ax-scheduler/ax/db/internal/dbsqlc"
	"github.com/ax-scheduler/ax/queue/axtype"
)

// Executor runs queries: a *pgxpool.Pool, a *pgx.Conn or a pgx.Tx, so every
// query function works on its own or inside a caller's transaction.
type Executor = dbsqlc.DBTX

var queries = dbsqlc.New()

// IsLockTimeout reports whether err is Postgres giving up a lock wait
// (lock_timeout, or NOWAIT).
func IsLockTimeout(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "55P03"
}

// Open connects a pool to url and checks that the server answers. The
// pool's size is what url says (pool_max_conns, pool_min_conns) or
// DefaultMaxConns; OpenPool sets it.
func Open(ctx context.Context, url string) (*pgxpool.Pool, error) {
	return OpenPool(ctx, url, PoolSize{})
}

// PoolSize bounds the connection pool of one process.
type PoolSize struct {
	// MaxConns is the most connections the pool opens; requests beyond
	// wait for one to be released. Zero keeps the url's pool_max_conns, or
	// DefaultMaxConns.
	MaxConns int32
	// MinConns is how many connections the pool keeps open while idle, so
	// a burst after a quiet spell does not first wait for connects. Zero
	// keeps the url's pool_min_conns, or none.
	MinConns int32
}

// DefaultMaxConns is a pool's size when neither the caller nor the url
// sets one: four for the work and one a replica's notifier holds while it
// listens. It is fixed rather than pgx's default (the larger of 4 and the
// host's CPUs): what bounds a replica's connections is what the database
// allows all replicas together, not the CPUs of the host ax runs on (a
// 16-CPU host took 17 connections a replica).
const DefaultMaxConns = 5

// MaxPoolConns bounds PoolSize.MaxConns: far above what one process can
// use (Postgres itself rarely allows more than a few hundred connections).
const MaxPoolConns = 1000

func (s PoolSize) validate() error {
	if s.MaxConns < 0 || s.MaxConns > MaxPoolConns {
		return fmt.Errorf("pool max conns %d is not between 1 and %d", s.MaxConns, MaxPoolConns)
	}
	if s.MinConns < 0 {
		return fmt.Errorf("pool min conns %d is negative", s.MinConns)
	}
	return nil
}

// OpenPool is Open with the pool sized by size (zero fields keep the
// url's choice or DefaultMaxConns).
func OpenPool(ctx context.Context, url string, size PoolSize) (*pgxpool.Pool, error) {
	return OpenPoolWith(ctx, url, PoolOptions{Size: size})
}

// PoolOptions say how OpenPoolWith opens a pool.
type PoolOptions struct {
	// Size bounds the pool (zero fields: the url's choice or
	// DefaultMaxConns).
	Size PoolSize
	// BehindPooler says url leads to a transaction-mode pooler
	// (DetectTransactionPooler). The pool then sends no session settings
	// at start (a stock PgBouncer refuses unknown startup parameters;
	// ALTER ROLE sets them instead, see the managed Postgres guide) and
	// prepares no named statement, which would stay on a server session
	// other clients get next: statements are described once and cached
	// by the client, and run unnamed (pgx's cache_describe mode).
	BehindPooler bool
	// Logger, when set, makes the first connection wait: while the
	// server refuses it for a reason a later try may not have (no free
	// connection slot, the server starting or in recovery, the network),
	// it is retried with backoff and the reason logged, until ctx ends.
	// Nil: the first refusal is returned.
	Logger *slog.Logger
	// Name tells the pool apart in the wait's log lines (engine,
	// requests, direct).
	Name string
	// Tracer, when set, sees every statement of the pool's connections
	// (tests count and time them on a pool set up as ax's are).
	Tracer pgx.QueryTracer
}

// OpenPoolWith connects a pool to url as opts say and checks that the
// server answers.
func OpenPoolWith(ctx context.Context, url string, opts PoolOptions) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("error parsing database url: %w", err)
	}
	size := opts.Size
	if err := size.validate(); err != nil {
		return nil, err
	}
	if !strings.Contains(url, "pool_max_conns") {
		cfg.MaxConns = DefaultMaxConns
	}
	cfg.MaxConns = cmp.Or(size.MaxConns, cfg.MaxConns)
	cfg.MinConns = cmp.Or(size.MinConns, cfg.MinConns)
	if cfg.MinConns > cfg.MaxConns {
		return nil, fmt.Errorf("pool min conns %d is more than the max conns %d", cfg.MinConns, cfg.MaxConns)
	}
	cfg.ConnConfig.RuntimeParams["application_name"] = "ax" // poolers pass it on
	if opts.Tracer != nil {
		cfg.ConnConfig.Tracer = opts.Tracer
	}
	if opts.BehindPooler {
		cfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeCacheDescribe
		// A pooled server session may listen for another client that
		// held it before (a LISTEN some tool ran through the pooler):
		// its notifications are dropped, not buffered on a connection
		// that never reads them.
		cfg.ConnConfig.OnNotification = func(*pgconn.PgConn, *pgconn.Notification) {}
	} else {
		setSessionParams(cfg.ConnConfig.RuntimeParams)
	}
	// google/uuid values otherwise reach pgx as driver.Valuers: each id is
	// formatted as text and parsed back, by reflection, element by element
	// of every id array; encoding a completion batch's arrays was 7% of
	// BenchmarkEndToEnd's CPU profile.
	cfg.AfterConnect = func(_ context.Context, conn *pgx.Conn) error {
		pgxuuid.Register(conn.TypeMap())
		if opts.BehindPooler {
			pooledConns.Store(conn, struct{}{})
		}
		return nil
	}
	if opts.BehindPooler {
		cfg.BeforeClose = func(conn *pgx.Conn) { pooledConns.Delete(conn) }
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("error creating pool: %w", err)
	}
	if opts.BehindPooler {
		pooledPools.Store(pool, struct{}{})
	}
	if err := waitForServer(ctx, opts.Logger, opts.Name, pool.Ping); err != nil {
		pooledPools.Delete(pool)
		pool.Close()
		return nil, fmt.Errorf("error connecting to database: %w", err)
	}
	return pool, nil
}

// setSessionParams adds the session settings ax wants on a connection of
// its own to its startup parameters. Behind a pooler they are the role's
// (ALTER ROLE … SET), since a pooled session is shared.
func setSessionParams(params map[string]string) {
	// ax runs short OLTP statements whose row estimates (unnest arrays,
	// CTE chains) can push their cost past jit_above_cost: compiling them
	// took 1.2 s of a 10,000-fire batch and stalls each new connection's
	// first lease. Nothing ax runs is long enough to win it back.
	params["jit"] = "off"
	// A backend that writes a bulk of rows (a batch of delayed runs,
	// history) starts their writeback every 256 kB instead of leaving it
	// to the kernel, which flushed them in bursts about 30 s later: the
	// WAL fsyncs of every commit then waited behind them (IO:WALSync in
	// pg_stat_activity during BenchmarkDelayedRuns' cancels, up to 62 ms).
	// Postgres's default is 0 (off); the setting is the session's own.
	params["backend_flush_after"] = "256kB"
}

// TxBeginner starts transactions: a pool, a connection or a transaction
// (which then nests as a savepoint).
type TxBeginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

// WithTx runs fn in a transaction, committing when fn returns nil and
// rolling back otherwise.
func WithTx(ctx context.Context, b TxBeginner, fn func(tx pgx.Tx) error) error {
	return pgx.BeginFunc(ctx, b, fn)
}

// WithTxV is WithTx for functions that return a value.
func WithTxV[T any](ctx context.Context, b TxBeginner, fn func(tx pgx.Tx) (T, error)) (T, error) {
	var out T
	err := pgx.BeginFunc(ctx, b, func(tx pgx.Tx) error {
		var err error
		out, err = fn(tx)
		return err
	})
	return out, err
}

// setGenericPlans makes the rest of a transaction run with generic plans
// that read by index. A connection makes a generic plan once and keeps
// it while a table only grows (inserts start no VACUUM or ANALYZE, which
// would remake it): made on an empty queue, TaskLeaseTake's scanned every
// task to lease one, 11 ms with 20,000 pending
// (TestSmallBatchPlansStayIndexedAsTablesGrow). Every statement of these
// transactions reads by key.
const setGenericPlans = "SET LOCAL plan_cache_mode = force_generic_plan; SET LOCAL enable_seqscan = off"

// setCachedReads tells a large batch's custom plans that a read by key
// costs about what a page of a scan does, as it does for the hot tables,
// which stay in shared buffers. At the default (4), leasing 442 of 10,000
// pending tasks read the whole execution table to find their 442 runs
// (auto_explain: 12.5 ms of the lease's 43, BenchmarkEndToEnd); a batch
// that is a large share of its table is still scanned.
const setCachedReads = "SET LOCAL random_page_cost = 1.1"

// SmallBatch is the most items (tasks asked for, results reported) of a
// hot-path transaction that WithBatchTxV runs with generic plans.
const SmallBatch = 16

// WithBatchTxV is WithTxV for the hot path's transactions (lease,
// complete) over a batch of size items. A small batch's statements run
// with generic plans: left to choose, Postgres planned them afresh on every
// call while batches were small (a custom plan is kept while it is costed
// below the generic one), and with 200 agents of 5 slots planning was 40%
// of the database's time, 0.7 ms a TaskComplete. A large batch's plans
// are left to Postgres, for which planning is a small part of the cost
// (forced generic for every batch, 4 agents of 250 slots did 7–9% fewer
// tasks a second in BenchmarkManyAgents; forced custom, planning the large
// arrays cost a third more CPU a task in BenchmarkEndToEndReplicas), with
// reads by key costed as cached (setCachedReads). Forcing them to read by
// key (enable_seqscan off) cost a large lease out of one 10,000-shard run
// a fifth of its rate (BenchmarkLeaseWithRateLimit).
func WithBatchTxV[T any](ctx context.Context, b TxBeginner, size int, fn func(tx pgx.Tx) (T, error)) (T, error) {
	set := setGenericPlans
	if size > SmallBatch || unnamedStatements(b) {
		set = setCachedReads
	}
	var out T
	run := func(tx pgx.Tx) error {
		var err error
		out, err = fn(tx)
		return err
	}
	if starter, ok := b.(interface {
		BeginTx(context.Context, pgx.TxOptions) (pgx.Tx, error)
	}); ok {
		// Set in the BEGIN's own round trip (the simple protocol takes both).
		begin := pgx.TxOptions{BeginQuery: "BEGIN; " + set}
		return out, pgx.BeginTxFunc(ctx, starter, begin, run)
	}
	// A transaction: the setting holds to its end.
	return out, pgx.BeginFunc(ctx, b, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, set); err != nil {
			return err
		}
		return run(tx)
	})
}

// unnamedStatements reports whether b runs its statements unnamed (a
// pool behind a transaction pooler, PoolOptions.BehindPooler): each is
// then planned at every execution, and a forced generic plan would be
// planned without the parameters' values, over every partition of the
// history tables (ExecutionEndSingle took seconds through PgBouncer),
// where a custom plan prunes them.
func unnamedStatements(b TxBeginner) bool {
	var ok bool
	switch b := b.(type) {
	case *pgxpool.Pool:
		_, ok = pooledPools.Load(b)
	case *pgx.Conn:
		_, ok = pooledConns.Load(b)
	case pgx.Tx:
		_, ok = pooledConns.Load(b.Conn())
	}
	return ok
}

// pooledPools and pooledConns are the pools opened BehindPooler and their
// connections, so that WithBatchTxV knows without copying their configs
// (pgx's Config methods copy) on the hot path.
var pooledPools, pooledConns sync.Map

// mapErr turns driver errors into the errors callers test for.
func mapErr(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return axtype.ErrNotFound
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case "23505": // unique_violation
			return fmt.Errorf("%w: %s", axtype.ErrConflict, pgErr.ConstraintName)
		case "23514", "23503": // check_violation, foreign_key_violation
			return &axtype.ConstraintError{Constraint: pgErr.ConstraintName, Detail: pgErr.Detail, Err: err}
		}
	}
	return err
}

// Now returns the database clock: every deadline in ax is computed from it.
func Now(ctx context.Context, e Executor) (time.Time, error) {
	now, err := queries.Now(ctx, e)
	return now.UTC(), mapErr(err)
}

// Notify sends a NOTIFY on channel, delivered when the transaction commits.
func Notify(ctx context.Context, e Executor, channel, payload string) error {
	err := queries.Notify(ctx, e, dbsqlc.NotifyParams{Channel: channel, Payload: payload})
	if err != nil {
		return fmt.Errorf("error notifying %s: %w", channel, mapErr(err))
	}
	return nil
}

// TryXactLock takes the advisory lock id until the transaction ends and
// reports whether it got it (false: another session holds it).
func TryXactLock(ctx context.Context, e Executor, id int64) (bool, error) {
	ok, err := queries.TryXactLock(ctx, e, id)
	if err != nil {
		return false, fmt.Errorf("error taking advisory lock: %w", mapErr(err))
	}
	return ok, nil
}

// Transient reports whether err is about the database or the connection
// rather than the data a statement worked on: a lost connection, a
// cancelled context or statement, a serialization failure or deadlock,
// exhausted resources. Retrying the same work later may succeed; the
// trigger loop never blames a job for such an error.
func Transient(err error) bool {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		// No answer from the server: a connection or protocol failure,
		// unless the error came from ax's own code.
		var conn *pgconn.ConnectError
		var netErr net.Error
		return errors.As(err, &conn) || errors.As(err, &netErr) || pgconn.SafeToRetry(err) || pgconn.Timeout(err) ||
			errors.Is(err, net.ErrClosed) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
	}
	switch pgErr.Code[:2] {
	case "08", // connection exception
		"25", // invalid transaction state (an aborted transaction)
		"40", // transaction rollback: serialization failure, deadlock
		"53", // insufficient resources
		"55", // object not in prerequisite state (lock not available)
		"57", // operator intervention: query cancelled, shutdown
		"58", // system error
		"XX": // internal error
		return true
	}
	return false
}
