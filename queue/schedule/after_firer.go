package schedule

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ax-scheduler/ax/db"
	"github.com/ax-scheduler/ax/queue/axtype"
	"github.com/ax-scheduler/ax/queue/delivery"
	"github.com/ax-scheduler/ax/queue/dispatch"
	"github.com/ax-scheduler/ax/queue/internal/startstop"
	"github.com/ax-scheduler/ax/queue/jobtemplate"
	"github.com/ax-scheduler/ax/queue/metrics"
	"github.com/ax-scheduler/ax/queue/notify"
)

// AfterFirerConfig tunes an AfterFirer.
type AfterFirerConfig struct {
	// BatchSize is how many ready waits one pass holds. Defaults to 100.
	BatchSize int
	// MaxCascadeReruns bounds the re-runs one cascade makes (see
	// axtype.MaxCascadeReruns, the default).
	MaxCascadeReruns int
	// MaxTasks bounds the tasks one pass writes, all its runs together
	// (see axtype.MaxTasksPerBatch, the default; the first run is made
	// whatever its shards). The waits past it stay ready, and the next
	// pass starts at once.
	MaxTasks int
	// MaxSleep is how long the firer sleeps when no notification wakes
	// it: the fallback for a lost one. Defaults to 1 second.
	MaxSleep time.Duration
	// Router places the new tasks on agents; nil leaves them unassigned.
	Router *dispatch.TaskRouter
	// Outbox enqueues agentless HTTP tasks in the fire's transaction.
	Outbox *delivery.Outbox
	// Logger defaults to discarding; Metrics defaults to unregistered.
	Logger  *slog.Logger
	Metrics *metrics.Metrics
}

func (c *AfterFirerConfig) withDefaults() AfterFirerConfig {
	out := *c
	out.BatchSize = cmp.Or(out.BatchSize, 100)
	out.MaxTasks = cmp.Or(out.MaxTasks, axtype.MaxTasksPerBatch)
	out.MaxCascadeReruns = cmp.Or(out.MaxCascadeReruns, axtype.MaxCascadeReruns)
	out.MaxSleep = cmp.Or(out.MaxSleep, time.Second)
	if out.Logger == nil {
		out.Logger = slog.New(slog.DiscardHandler)
	}
	if out.Metrics == nil {
		out.Metrics = metrics.New(nil)
	}
	return out
}

// AfterFirer makes the runs of downstream jobs (trigger kind after) whose
// wait the database marked ready in the transaction that ended their last
// needed upstream run (ax.after_upstream_ended). Every replica runs one;
// a wait is held (SKIP LOCKED) by one pass at a time and marked fired in
// the transaction that makes its run, so a logical time gets one run
// whoever makes it, and a replica killed mid-way leaves the wait ready for
// the next.
type AfterFirer struct {
	pool     *pgxpool.Pool
	notifier *notify.Notifier
	cfg      AfterFirerConfig
	bg       startstop.Runner
}

// NewAfterFirer returns a firer over pool; notifier (may be nil) wakes it
// when a wait becomes ready.
func NewAfterFirer(pool *pgxpool.Pool, notifier *notify.Notifier, cfg AfterFirerConfig) *AfterFirer {
	return &AfterFirer{pool: pool, notifier: notifier, cfg: cfg.withDefaults()}
}

// Start runs the firer in the background until Stop.
func (f *AfterFirer) Start(ctx context.Context) error {
	passLoop{notifier: f.notifier, channels: []string{notify.AfterReadyChannel}, maxSleep: f.cfg.MaxSleep,
		logger: f.cfg.Logger, msg: "error firing downstream jobs", pass: f.fireReady}.start(ctx, &f.bg)
	return nil
}

// Stop ends the firer after its current pass. Safe to call twice or
// without Start.
func (f *AfterFirer) Stop() { f.bg.Stop() }

// FireReady runs one pass: it holds up to BatchSize ready waits and makes
// the run of each, within MaxTasks. It returns how many runs it made.
func (f *AfterFirer) FireReady(ctx context.Context) (int, error) {
	made, _, err := f.fireReady(ctx)
	return made, err
}

// errPastTaskBound: the wait's run would take the pass past MaxTasks.
var errPastTaskBound = errors.New("the run would take the pass past its task bound")

// fireReady is FireReady; more says it stopped at MaxTasks with held
// waits left ready. Unbounded, a pass of 100 waits of jobs of 10,000
// shards wrote a million tasks in one transaction, past any statement
// timeout; failing as transient, the same waits were held again, and no
// other downstream job fired.
func (f *AfterFirer) fireReady(ctx context.Context) (made int, more bool, err error) {
	err = db.WithTx(ctx, f.pool, func(tx pgx.Tx) error {
		waits, err := db.AfterWaitClaimReady(ctx, tx, f.cfg.BatchSize)
		if err != nil {
			return err
		}
		tasks := 0
		for _, w := range waits {
			var wrote int
			err := pgx.BeginFunc(ctx, tx, func(sp pgx.Tx) error {
				room := f.cfg.MaxTasks - tasks
				if tasks == 0 {
					room = math.MaxInt // the first run is made whatever its shards
				}
				var err error
				wrote, err = f.fire(ctx, sp, w, room)
				return err
			})
			switch {
			case err == nil:
				if wrote > 0 {
					made++
					tasks += wrote
				}
			case errors.Is(err, errPastTaskBound):
				more = true
			case ctx.Err() != nil || db.Transient(err):
				return err
			default:
				// Left ready, logged, and tried again behind the other
				// ready waits: first in line (the oldest), waits that
				// failed every time took every claim, and no other
				// downstream job fired.
				f.cfg.Logger.ErrorContext(ctx, "error firing a downstream job", "job_id", w.JobID,
					"logical_time", w.LogicalTime, "error", err)
				if err := db.AfterWaitRequeue(ctx, tx, w); err != nil {
					return err
				}
			}
			if more {
				break // the rest stay ready, for the next pass
			}
		}
		if made > 0 {
			return db.Notify(ctx, tx, notify.TaskReadyChannel, "")
		}
		return nil
	})
	if err != nil {
		return 0, false, fmt.Errorf("error firing downstream jobs: %w", err)
	}
	if made > 0 {
		f.notifier.AfterCommit(notify.TaskReadyChannel) // as FireDue
	}
	return made, more, nil
}

// fire makes the run of one ready wait: a new run (cause after) of its
// logical time, or, when an upstream re-run with cascade made it ready
// again after it had fired, a re-run of the run it made. A paused job's
// time is recorded as skipped. It returns how many tasks it wrote, and
// errPastTaskBound, having written nothing, when they would be more than
// room.
func (f *AfterFirer) fire(ctx context.Context, tx pgx.Tx, w *axtype.AfterWait, room int) (int, error) {
	job, err := db.JobGetByIDForUpdate(ctx, tx, w.JobID)
	if err != nil {
		return 0, err
	}
	shards := max(job.ShardCount, 1)
	if !job.Paused && shards > room {
		return 0, errPastTaskBound
	}
	if job.Paused {
		skip := &axtype.SkippedFire{JobID: job.ID, Reason: axtype.SkipPaused, FirstTick: w.LogicalTime,
			LastTick: w.LogicalTime, TickCount: 1, Detail: "the job was paused when its upstreams ended"}
		if err := db.SkippedFireInsertMany(ctx, tx, []*axtype.SkippedFire{skip}); err != nil {
			return 0, err
		}
		return 0, db.AfterWaitFired(ctx, tx, w, axtype.AfterSkipped, nil)
	}
	params, err := f.params(ctx, tx, job, w)
	if err != nil {
		return 0, err
	}
	id, err := uuid.NewV7()
	if err != nil {
		return 0, fmt.Errorf("error generating execution id: %w", err)
	}
	if w.ExecutionID != nil && w.CascadeFrom != nil {
		return f.cascade(ctx, tx, w, id, params)
	}
	inserted, err := dispatch.InsertExecutions(ctx, tx, f.cfg.Router, f.cfg.Outbox, []*axtype.NewExecution{{
		ID: id, JobID: job.ID, Cause: axtype.CauseAfter, ScheduledFor: w.LogicalTime, Params: params}}, nil)
	if err != nil {
		return 0, err
	}
	if len(inserted) == 0 {
		// The logical time has its run already (the unique tick index):
		// nothing more to make.
		return 0, db.AfterWaitFired(ctx, tx, w, axtype.AfterFired, nil)
	}
	if err := db.TriggerRecordFire(ctx, tx, job.ID, id, w.LogicalTime); err != nil {
		return 0, err
	}
	f.cfg.Metrics.Fires.WithLabelValues(string(axtype.CauseAfter)).Inc()
	f.cfg.Logger.InfoContext(ctx, "downstream job fired", "job_id", job.ID, "execution_id", id,
		"logical_time", w.LogicalTime)
	return shards, db.AfterWaitFired(ctx, tx, w, axtype.AfterFired, &id)
}

// cascade re-runs the run wait w made, for the upstream re-run that made
// it ready again; the re-run cascades in turn, within its cascade's bound
// of re-runs (past it, the time is recorded as skipped).
func (f *AfterFirer) cascade(ctx context.Context, tx pgx.Tx, w *axtype.AfterWait, id uuid.UUID, params json.RawMessage) (int, error) {
	root, made, err := db.ExecutionRerunCascade(ctx, tx, *w.CascadeFrom, f.cfg.MaxCascadeReruns+1)
	if err != nil {
		return 0, err
	}
	if made > f.cfg.MaxCascadeReruns { // the root and as many re-runs as the bound
		skip := &axtype.SkippedFire{JobID: w.JobID, Reason: axtype.SkipCascadeBound, FirstTick: w.LogicalTime,
			LastTick: w.LogicalTime, TickCount: 1, Detail: fmt.Sprintf("the cascade of re-run %s made %d re-runs, its bound: "+
				"run %s was not re-run for upstream re-run %s", root, f.cfg.MaxCascadeReruns, *w.ExecutionID, *w.CascadeFrom)}
		if err := db.SkippedFireInsertMany(ctx, tx, []*axtype.SkippedFire{skip}); err != nil {
			return 0, err
		}
		f.cfg.Logger.WarnContext(ctx, "cascade re-run not made: the cascade reached its bound", "job_id", w.JobID,
			"execution_id", *w.ExecutionID, "cascade_root", root, "upstream_execution_id", *w.CascadeFrom)
		return 0, db.AfterWaitFired(ctx, tx, w, axtype.AfterFired, w.ExecutionID)
	}
	r := &db.NewRerun{ID: id, RerunOf: *w.ExecutionID, RequestKey: "cascade:" + w.CascadeFrom.String(),
		Shards: axtype.RerunAll, Params: params, Cascade: true, CascadeRoot: root}
	prior, err := db.ExecutionRerunClaim(ctx, tx, r)
	if err != nil {
		return 0, err
	}
	if prior != uuid.Nil {
		return 0, db.AfterWaitFired(ctx, tx, w, axtype.AfterFired, &prior)
	}
	tasks, err := db.ExecutionRerunInsert(ctx, tx, r, f.cfg.Router.RouteFunc(tx))
	if err != nil {
		return 0, err
	}
	if err := f.cfg.Outbox.Fired(ctx, tx, tasks); err != nil {
		return 0, err
	}
	f.cfg.Metrics.Fires.WithLabelValues(string(axtype.CauseRerun)).Inc()
	f.cfg.Logger.InfoContext(ctx, "downstream job re-run by cascade", "job_id", w.JobID, "execution_id", id,
		"rerun_of", *w.ExecutionID, "upstream_execution_id", *w.CascadeFrom, "logical_time", w.LogicalTime)
	return max(len(tasks), 1), db.AfterWaitFired(ctx, tx, w, axtype.AfterFired, &id)
}

// params renders the templates among the string values of the job's
// params with the upstream runs that arrived ({{.upstream.<name>.result}}).
// It returns nil when the job's params hold no template.
func (f *AfterFirer) params(ctx context.Context, tx pgx.Tx, job *axtype.Job, w *axtype.AfterWait) (json.RawMessage, error) {
	if !strings.Contains(string(job.Params), "{{") {
		return nil, nil
	}
	ids := make([]uuid.UUID, 0, len(w.Arrived))
	for _, a := range w.Arrived {
		ids = append(ids, a.ExecutionID)
	}
	runs, err := db.AfterUpstreamRuns(ctx, tx, ids)
	if err != nil {
		return nil, err
	}
	rendered, err := RenderAfterParams(job.Params, runs, w.LogicalTime)
	if err != nil {
		// The run goes on with the params as written: a bad template
		// must not hold the logical time back for ever.
		f.cfg.Logger.WarnContext(ctx, "error rendering params of a downstream job", "job_id", job.ID,
			"logical_time", w.LogicalTime, "error", err)
		return nil, nil
	}
	return rendered, nil
}

// RenderAfterParams renders each string value of params (an object, at
// any depth) that holds a template, with data {"upstream": {<job name>:
// {"result", "state", "execution_id", "scheduled_for"}}, "logical_time"}.
func RenderAfterParams(params json.RawMessage, runs []axtype.AfterRun, logicalTime time.Time) (json.RawMessage, error) {
	var doc any
	if err := json.Unmarshal(params, &doc); err != nil {
		return nil, fmt.Errorf("error decoding params: %w", err)
	}
	upstream := make(map[string]any, len(runs))
	for _, r := range runs {
		var result any
		if len(r.Result) > 0 {
			if err := json.Unmarshal(r.Result, &result); err != nil {
				return nil, fmt.Errorf("error decoding result of run %s: %w", r.ID, err)
			}
		}
		upstream[r.Name] = map[string]any{"result": result, "state": r.State, "execution_id": r.ID.String(),
			"scheduled_for": r.ScheduledFor.Format(time.RFC3339Nano)}
	}
	data := map[string]any{"upstream": upstream, "logical_time": logicalTime.UTC().Format(time.RFC3339Nano)}
	r := &paramsRenderer{data: data, left: axtype.MaxParamsBytes}
	out, err := r.value(doc)
	if err != nil {
		return nil, err
	}
	rendered, err := json.Marshal(out)
	switch {
	case err != nil:
		return nil, err
	case len(rendered) > axtype.MaxParamsBytes:
		return nil, errRenderedParamsTooLarge
	}
	return rendered, nil
}

// errRenderedParamsTooLarge: each template's output is bounded, their
// number was not; 8,000 templates of an upstream's 60 KB result rendered
// about 500 MB, carried by every lease and callback of the run.
var errRenderedParamsTooLarge = fmt.Errorf("the rendered params would be larger than the %d bytes params may be", axtype.MaxParamsBytes)

// paramsRenderer renders the templates of a params document; left is
// how many bytes of rendered text may still come.
type paramsRenderer struct {
	data map[string]any
	left int
}

func (r *paramsRenderer) value(v any) (any, error) {
	switch x := v.(type) {
	case string:
		if !strings.Contains(x, "{{") {
			return x, nil
		}
		out, err := renderParam(x, r.data)
		if err != nil {
			return nil, err
		}
		if r.left -= len(out); r.left < 0 {
			return nil, errRenderedParamsTooLarge
		}
		return out, nil
	case map[string]any:
		for k, e := range x {
			rendered, err := r.value(e)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", k, err)
			}
			x[k] = rendered
		}
	case []any:
		for i, e := range x {
			rendered, err := r.value(e)
			if err != nil {
				return nil, fmt.Errorf("[%d]: %w", i, err)
			}
			x[i] = rendered
		}
	}
	return v, nil
}

func renderParam(text string, data map[string]any) (string, error) {
	t, err := jobtemplate.Param.Parse(text)
	if err != nil {
		return "", err
	}
	out, err := jobtemplate.Param.Execute(t, data)
	return string(out), err
}
