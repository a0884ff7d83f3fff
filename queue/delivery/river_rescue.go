package delivery

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"

	"github.com/ax-scheduler/ax/db"
)

// How long River lets ax's jobs run, and how soon one of a dead replica is
// handed to another. A River job stays running when its replica dies
// (SIGKILL, a lost machine) until it is rescued; River's own rescuer runs
// on its leader every 30 s (not configurable in river v0.51.2) and rescues
// after RescueStuckJobsAfter (default 1 hour). ax bounds its work instead:
//
//   - a callback attempt is cut by the outbound timeout (30 s by default),
//     and its River job by that plus workMargin (the attempt's reads and
//     writes); a job older than that plus rescueMargin is rescued by ax's
//     own pass (rescueArgs), every RescueInterval.
//   - an agentless HTTP request is cut by its task's timeout (at most
//     MaxAgentlessHTTPTimeout); its River job by that plus the lease grace
//     and workMargin; River's rescuer takes it past that, at its next run.
//     ax's reaper has timed its task out (and scheduled the retry the
//     rescued job then enqueues) by then. A job whose replica died after
//     River fetched it but before it leased its task has no lease for the
//     reaper to end: ax's own pass takes it once it has run
//     unsentRescueAfter with its task still pending.
//
// A job is never rescued while its worker may still run it: the rescue
// comes rescueMargin after River has cancelled the work.
const (
	workMargin   = 5 * time.Second
	rescueMargin = 10 * time.Second
	// unsentRescueAfter is far past the few statements between River's
	// fetch and the task's lease; a live worker slower than that only
	// costs a rescued job that finds its task leased.
	unsentRescueAfter = 10 * time.Second
)

// callbackJobTimeout is how long River lets a callback delivery run: the
// attempt's timeout plus workMargin.
func callbackJobTimeout(attempt time.Duration) time.Duration { return attempt + workMargin }

// httpJobTimeout is how long River lets an agentless HTTP request run.
func httpJobTimeout(leaseGrace time.Duration) time.Duration {
	return MaxAgentlessHTTPTimeout + leaseGrace + workMargin
}

// rescueArgs is the periodic job that hands the callback deliveries of a
// replica that died to another: River runs periodic jobs from its leader,
// and a new leader runs it on election, so a dead leader delays it by
// River's leader TTL (15 s) at most.
type rescueArgs struct{}

func (rescueArgs) Kind() string { return "ax_rescue" }

// InsertOpts: unique per interval (oncePer), given where it is enqueued.
func (rescueArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: maintenanceQueue, MaxAttempts: 1}
}

type rescueWorker struct {
	river.WorkerDefaults[rescueArgs]
	pool *pgxpool.Pool
	// after is how long a callback delivery may be running before it is
	// taken for dead: its River timeout plus rescueMargin.
	after time.Duration
	cfg   RiverConfig
}

// Work runs both rescues: one that fails does not keep the other from
// its work (the callbacks of every job are not held up by one request).
func (w *rescueWorker) Work(ctx context.Context, _ *river.Job[rescueArgs]) error {
	return errors.Join(w.rescueUnsent(ctx), w.rescueCallbacks(ctx))
}

// rescueCallbacks hands on the callback deliveries of a replica that
// stopped.
func (w *rescueWorker) rescueCallbacks(ctx context.Context) error {
	ids, err := db.RiverJobRescue(ctx, w.pool, CallbackArgs{}.Kind(), w.after)
	if err != nil || len(ids) == 0 {
		return err
	}
	w.cfg.Logger.WarnContext(ctx, "callback deliveries of a replica that stopped handed to another",
		"river_job_ids", ids, "running_for_more_than", w.after)
	return notifyQueue(ctx, w.pool, callbackQueue)
}

// rescueUnsent hands on the agentless HTTP requests a replica fetched and
// never sent: their runs would otherwise wait for River's rescuer, more
// than a minute.
func (w *rescueWorker) rescueUnsent(ctx context.Context) error {
	ids, err := db.RiverJobRescueUnsent(ctx, w.pool, HTTPTaskArgs{}.Kind(), unsentRescueAfter)
	if err != nil || len(ids) == 0 {
		return err
	}
	w.cfg.Logger.WarnContext(ctx, "http requests of a replica that stopped before sending them handed to another",
		"river_job_ids", ids, "running_for_more_than", unsentRescueAfter)
	return notifyQueue(ctx, w.pool, httpQueue)
}
