package dispatch

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ax-scheduler/ax/db"

	"github.com/ax-scheduler/ax/queue/axtype"
	"github.com/ax-scheduler/ax/queue/notify"
)

// RateClasses is the engine's one owner of rate classes, everything about
// them but storage (db/rate_class.go) and HTTP (openapi/classes.go):
//
//   - admission: the lease broker takes tokens before a lease and gives
//     back the unused ones (admit, giveBack);
//   - the priority floor in force: an operator's (Degrade, Restore), else
//     the automatic one while the class is degraded (FloorInForce);
//   - automatic degradation by pressure, and skipping or holding the
//     tasks a floor turns away, run by the reaper's sweep
//     (degradeByPressure, then moveHeld), and releasing them when an
//     operator lifts or lowers a floor (ReleaseHeld).
//
// The bucket arithmetic, the floor check of each task and the fencing stay
// in SQL (RateClassTake, TaskLease, TaskSkipBelowFloor,
// RateClassDegradeAuto), where they are atomic with the rows they guard;
// their Go callers are here.
type RateClasses struct {
	pool     *pgxpool.Pool
	logger   *slog.Logger
	presence classPresence
}

// NewRateClasses returns a RateClasses on pool; logger may be nil.
func NewRateClasses(pool *pgxpool.Pool, logger *slog.Logger) *RateClasses {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &RateClasses{pool: pool, logger: logger}
}

// FloorInForce is the priority below which c's tasks do not lease: the
// operator's floor, else the automatic one while degraded; nil when none.
// TaskLease, TaskSkipBelowFloor and the view ax.rate_class_status apply
// the same rule in SQL.
func FloorInForce(c *axtype.RateClass) *int {
	if c.ManualMinPriority != nil {
		return c.ManualMinPriority
	}
	if c.DegradedSince != nil {
		return c.AutoMinPriority
	}
	return nil
}

// Degrade switches an operator's floor on: until Restore, class leases only
// tasks at or above minPriority (jobs that skip rather than wait have the
// others skipped by the next sweep).
func (c *RateClasses) Degrade(ctx context.Context, class string, minPriority int) (*axtype.RateClass, error) {
	rc, err := db.RateClassSetManualFloor(ctx, c.pool, class, &minPriority)
	if err == nil {
		c.ReleaseHeld(ctx) // a floor lowered
	}
	return rc, err
}

// Restore switches an operator's floor off; the automatic floor, if the
// class has one, still applies while the class is degraded.
func (c *RateClasses) Restore(ctx context.Context, class string) (*axtype.RateClass, error) {
	rc, err := db.RateClassSetManualFloor(ctx, c.pool, class, nil)
	if err == nil {
		c.ReleaseHeld(ctx)
	}
	return rc, err
}

// ReleaseHeld releases at once the tasks held below a floor that an
// operator's change (a restore, a lower floor, new automatic settings, the
// class deleted) no longer turns away, rather than at the reaper's next
// sweep; that sweep releases what this leaves (more than FloorMoveTasks,
// or a hold uncommitted as the change was made, or an error).
func (c *RateClasses) ReleaseHeld(ctx context.Context) {
	if err := c.release(ctx); err != nil {
		c.logger.WarnContext(ctx, "tasks held below a floor left to the reaper", "error", err)
	}
}

// release releases up to FloorMoveTasks held tasks their floor no longer
// turns away, and wakes the long polls when it did.
func (c *RateClasses) release(ctx context.Context) error {
	var n int
	err := db.WithTx(ctx, c.pool, func(tx pgx.Tx) error {
		var err error
		if n, err = db.TaskFloorRelease(ctx, tx, FloorMoveTasks); err != nil || n == 0 {
			return err
		}
		return db.Notify(ctx, tx, notify.TaskReadyChannel, "")
	})
	if err == nil && n > 0 {
		c.logger.InfoContext(ctx, "tasks held below their class's priority floor released", "tasks", n)
	}
	return err
}

// admit takes up to max tokens of each rate class that has tasks waiting,
// in a short statement of its own, so a class's bucket row is never locked
// for a whole lease and concurrent leases do not queue on it. It returns
// the grants by class; nil when no class exists.
func (c *RateClasses) admit(ctx context.Context, max int) (map[string]int, error) {
	used, err := c.presence.any(ctx, c.pool)
	if err != nil || used {
		// An error reading presence takes tokens anyway: never lease a
		// class's tasks without them.
		return db.RateClassTake(ctx, c.pool, max)
	}
	return nil, nil
}

// giveBack returns the tokens of grants that tasks did not use. Tokens
// lost to an error only slow a class down for a moment, never speed it up.
func (c *RateClasses) giveBack(ctx context.Context, grants map[string]int, tasks []*axtype.LeasedTask) {
	if len(grants) == 0 {
		return
	}
	unused := maps.Clone(grants)
	for _, t := range tasks {
		unused[t.RateClass]--
	}
	if err := db.RateClassGiveBack(context.WithoutCancel(ctx), c.pool, unused); err != nil {
		c.logger.WarnContext(ctx, "unused rate class tokens lost", "error", err)
	}
}

// FloorMoveTasks bounds the tasks one sweep skips, holds or releases below
// their class's floor, so each of its statements stays short (5,000 took
// about 100 ms: each is an update of every index of ax.task) when a deep
// class degrades or recovers; the rest are the next sweeps'.
const FloorMoveTasks = 2000

// FloorHoldSettle is how long an automatic floor is in force before its
// tasks are held: a class whose depth hovers at its threshold, degrading
// and recovering sweep after sweep, would otherwise have its backlog
// rewritten both ways each time.
const FloorHoldSettle = 10 * time.Second

// degradeByPressure switches rate classes' automatic priority floors by
// their pressure and skips waiting tasks below a floor whose jobs say so,
// in the reaper's transaction.
func (c *RateClasses) degradeByPressure(ctx context.Context, tx pgx.Tx) error {
	changes, err := db.RateClassDegradeAuto(ctx, tx)
	if err != nil {
		return err
	}
	for _, ch := range changes {
		if ch.Degraded {
			c.logger.WarnContext(ctx, "rate class degraded: only higher priorities lease", "class", ch.Name,
				"min_priority", ch.MinPriority)
		} else {
			c.logger.InfoContext(ctx, "rate class recovered: all priorities lease again", "class", ch.Name)
		}
	}
	skipped, err := db.TaskSkipBelowFloor(ctx, tx, FloorMoveTasks)
	if err != nil || len(skipped) == 0 {
		return err
	}
	for _, id := range skipped {
		c.logger.InfoContext(ctx, "tasks skipped below their class's priority floor", "execution_id", id)
	}
	return db.ExecutionFinalize(ctx, tx, skipped)
}

// moveHeld holds waiting tasks below their class's floor out of the
// leases' way and releases those a floor no longer turns away, each in a
// short transaction of its own, after the reaper's: in its transaction,
// 5,000 rows held or released delayed the expiry of every tenant's
// leases by about 100 ms, and kept those rows locked as long.
func (c *RateClasses) moveHeld(ctx context.Context) error {
	var held int
	holdErr := db.WithTx(ctx, c.pool, func(tx pgx.Tx) error {
		var err error
		held, err = db.TaskFloorHold(ctx, tx, FloorMoveTasks, FloorHoldSettle)
		return err
	})
	if held > 0 {
		c.logger.InfoContext(ctx, "tasks held below their class's priority floor", "tasks", held)
	}
	// A failed hold does not keep tasks whose floor lifted from leasing.
	return errors.Join(holdErr, c.release(ctx))
}

// classPresence remembers for a second whether any rate class exists, so
// deployments without flow control do not pay a token round trip on every
// lease. A class created meanwhile is used within that second (its jobs'
// tasks wait until then, they are not leased without tokens).
type classPresence struct {
	mu      sync.Mutex
	checked time.Time
	exists  bool
}

func (c *classPresence) any(ctx context.Context, e db.Executor) (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if time.Since(c.checked) < time.Second {
		return c.exists, nil
	}
	exists, err := db.RateClassAny(ctx, e)
	if err != nil {
		return false, err
	}
	c.checked, c.exists = time.Now(), exists
	return exists, nil
}
