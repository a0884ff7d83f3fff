// Package testfactory makes the rows tests need (API keys, jobs, runs with
// their tasks, agents) with sensible defaults that options override. It
// writes through package db only, so that the tests of db, queue's
// sub-packages and openapi set up data without importing the engine
// (package queue) above them. River's testfactory is the model.
//
// What it makes is what the engine would store, minus the engine's
// policies: a job is inserted as given (no cross-field validation, no
// default filling), a run is recorded whatever the job's concurrency
// policy. Tests of those policies go through the engine.
package testfactory

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/db"
	"github.com/ax-scheduler/ax/queue/axtype"
	"github.com/ax-scheduler/ax/queue/notify"
	"github.com/ax-scheduler/ax/queue/webhook"
)

// Executor is where the factory writes: a pool, or a transaction (a run is
// made in a transaction of its own, or in a savepoint of the caller's).
type Executor interface {
	db.Executor
	db.TxBeginner
}

// APIKeyOpts are the settings of an API key; zero fields get defaults.
type APIKeyOpts struct {
	// Name defaults to "key-" and a random suffix.
	Name string
	// Scopes defaults to agent.
	Scopes []string
}

// APIKey inserts an API key with a random hash (nobody can present it;
// tests that authenticate make keys through the key service).
func APIKey(ctx context.Context, tb testing.TB, exec Executor, opts *APIKeyOpts) *axtype.APIKey {
	tb.Helper()
	opts = orZero(opts)
	hash := make([]byte, 32)
	_, _ = rand.Read(hash)
	key, err := db.APIKeyInsert(ctx, exec, &db.APIKeyInsertParams{
		ID: uuid.New(), Name: cmp.Or(opts.Name, "key-"+suffix()), Hash: hash, Prefix: "ax_test",
		Scopes: orSlice(opts.Scopes, []string{"agent"})})
	require.NoError(tb, err)
	return key
}

// JobOpts are the settings of a job. Unset, a job is a manual shell job
// running "true" in group default, of one shard, that runs once (no
// retry) for up to 60 s, overlaps allowed: a quick job that fails fast.
type JobOpts struct {
	// Name defaults to "job-" and a random suffix.
	Name string
	// Group defaults to default.
	Group string
	// TriggerKind defaults to manual. A cron or interval job needs its
	// schedule and NextFireAt set by Edit: the factory computes no fire.
	TriggerKind axtype.TriggerKind
	// Edit changes anything else, after the defaults are set.
	Edit func(j *axtype.Job)
}

// Job inserts a job with its signing secret and announces it on the
// job-changed channel, as the job service does.
func Job(ctx context.Context, tb testing.TB, exec Executor, opts *JobOpts) *axtype.Job {
	tb.Helper()
	opts = orZero(opts)
	id, err := uuid.NewV7()
	require.NoError(tb, err)
	j := &axtype.Job{ID: id, Name: cmp.Or(opts.Name, "job-"+suffix()), Group: cmp.Or(opts.Group, axtype.DefaultGroup),
		TriggerKind: cmp.Or(opts.TriggerKind, axtype.TriggerManual), Timezone: axtype.DefaultTimezone,
		ExecutorKind: axtype.ExecutorShell, Executor: axtype.ExecutorConfig{Command: "true"}, RouteStrategy: axtype.RouteRoundRobin,
		ShardCount: 1, ShardRangeTo: axtype.DefaultShardRangeTo, TimeoutSeconds: 60, RetryMaxAttempts: 1,
		ConcurrencyPolicy: axtype.ConcurrencyAllow, MisfirePolicy: axtype.MisfireFireOnce, MisfireWindowSeconds: 3600,
		MisfireMaxFires: axtype.DefaultMisfireMaxFires, DegradeAction: axtype.DegradeWait}
	if opts.Edit != nil {
		opts.Edit(j)
	}
	created, err := db.WithTxV(ctx, exec, func(tx pgx.Tx) (*axtype.Job, error) {
		created, err := db.JobInsert(ctx, tx, j)
		if err != nil {
			return nil, err
		}
		created.SigningSecret = webhook.NewSecret().Text()
		if err := db.JobSecretInsert(ctx, tx, created.ID, created.SigningSecret); err != nil {
			return nil, err
		}
		return created, db.Notify(ctx, tx, notify.JobChangedChannel, created.ID.String())
	})
	require.NoError(tb, err)
	return created
}

// ExecutionOpts are the settings of a run. Unset, a run is a manual fire
// of now (the database's clock), with the job's params and priority, its
// tasks routed nowhere.
type ExecutionOpts struct {
	// Cause defaults to manual.
	Cause axtype.ExecutionCause
	// ScheduledFor defaults to the database's now.
	ScheduledFor time.Time
	// Params are the run's parameters; nil: the job's.
	Params json.RawMessage
	// Priority overrides the job's.
	Priority *int
	// Live is how recently an agent must have heartbeated to get a task of
	// a broadcast job. Defaults to 10 seconds (the engine's default).
	Live time.Duration
	// ShardParams renders the params of a job with a shard generator; nil:
	// such a run fails, as the db package says.
	ShardParams axtype.ShardParamsFunc
	// Route returns what places the new tasks on agents, reading with the
	// run's transaction (a task router's RouteFunc method); nil: none is
	// placed.
	Route func(exec db.Executor) axtype.RouteFunc
	// Fired is handed the new tasks in the run's transaction, as the
	// engine hands agentless HTTP tasks to its outbox (an Outbox's Fired).
	Fired func(ctx context.Context, exec db.Executor, tasks []*axtype.NewTask) error
}

// Execution records a run of job jobID with its tasks, records it as the
// job's last fire and wakes waiting lease polls (task-ready), as a manual
// trigger does. It returns the run as stored.
func Execution(ctx context.Context, tb testing.TB, exec Executor, jobID uuid.UUID, opts *ExecutionOpts) *axtype.Execution {
	tb.Helper()
	opts = orZero(opts)
	id, err := uuid.NewV7()
	require.NoError(tb, err)
	run, err := db.WithTxV(ctx, exec, func(tx pgx.Tx) (*axtype.Execution, error) {
		scheduledFor := opts.ScheduledFor
		if scheduledFor.IsZero() {
			if scheduledFor, err = db.Now(ctx, tx); err != nil {
				return nil, err
			}
		}
		var route axtype.RouteFunc
		if opts.Route != nil {
			route = opts.Route(tx)
		}
		_, tasks, err := db.ExecutionInsertMany(ctx, tx, []*axtype.NewExecution{{ID: id, JobID: jobID,
			Cause: cmp.Or(opts.Cause, axtype.CauseManual), ScheduledFor: scheduledFor, Params: opts.Params,
			Priority: opts.Priority}}, cmp.Or(opts.Live, 10*time.Second), opts.ShardParams, route)
		if err != nil {
			return nil, err
		}
		if opts.Fired != nil {
			if err := opts.Fired(ctx, tx, tasks); err != nil {
				return nil, err
			}
		}
		if err := db.TriggerRecordFire(ctx, tx, jobID, id, scheduledFor); err != nil {
			return nil, err
		}
		if err := db.Notify(ctx, tx, notify.TaskReadyChannel, ""); err != nil {
			return nil, err
		}
		return db.ExecutionGetByID(ctx, tx, id)
	})
	require.NoError(tb, err)
	return run
}

// Tasks returns the tasks of run executionID, by shard.
func Tasks(ctx context.Context, tb testing.TB, exec db.Executor, executionID uuid.UUID) []*axtype.Task {
	tb.Helper()
	tasks, err := db.TaskListByExecution(ctx, exec, executionID)
	require.NoError(tb, err)
	return tasks
}

// Task records a run of job jobID and returns its one task; a job of more
// shards fails the test.
func Task(ctx context.Context, tb testing.TB, exec Executor, jobID uuid.UUID, opts *ExecutionOpts) *axtype.Task {
	tb.Helper()
	tasks := Tasks(ctx, tb, exec, Execution(ctx, tb, exec, jobID, opts).ID)
	require.Len(tb, tasks, 1, "a run of one task")
	return tasks[0]
}

// AgentOpts are the settings of an agent. Unset, an agent is a ready shell
// agent of capacity 100, weight 1, without labels, bound to an agent key
// of its own.
type AgentOpts struct {
	// Name defaults to "agent-" and a random suffix.
	Name string
	// Labels are its labels.
	Labels map[string]string
	// Capacity defaults to 100.
	Capacity int
	// Executors defaults to shell.
	Executors []string
	// APIKeyID defaults to a new key with the agent scope.
	APIKeyID uuid.UUID
	// NotReady leaves it as registration does: not ready until its first
	// heartbeat. By default one heartbeat has said it is ready.
	NotReady bool
	// Now is the time of its heartbeat (a test clock's); nil: the
	// database's now.
	Now *time.Time
	// Edit changes anything else, after the defaults are set.
	Edit func(a *axtype.Agent)
}

// Agent registers an agent and, unless NotReady, records a heartbeat that
// says it is ready. It returns the agent as stored.
func Agent(ctx context.Context, tb testing.TB, exec Executor, opts *AgentOpts) *axtype.Agent {
	tb.Helper()
	opts = orZero(opts)
	keyID := opts.APIKeyID
	if keyID == uuid.Nil {
		keyID = APIKey(ctx, tb, exec, nil).ID
	}
	id, err := uuid.NewV7()
	require.NoError(tb, err)
	a := &axtype.Agent{ID: id, Name: cmp.Or(opts.Name, "agent-"+suffix()), Labels: opts.Labels,
		Capacity: cmp.Or(opts.Capacity, 100), Weight: 1, APIKeyID: keyID,
		Executors: orSlice(opts.Executors, []string{string(axtype.ExecutorShell)})}
	if opts.Edit != nil {
		opts.Edit(a)
	}
	registered, err := db.AgentInsert(ctx, exec, a)
	require.NoError(tb, err)
	if opts.NotReady {
		return registered
	}
	ready := true
	_, err = db.AgentHeartbeat(ctx, exec, registered.ID, &axtype.AgentLoad{Ready: &ready}, opts.Now)
	require.NoError(tb, err)
	got, err := db.AgentGetByID(ctx, exec, registered.ID)
	require.NoError(tb, err)
	return got
}

func suffix() string { return uuid.NewString()[:8] }

func orZero[T any](opts *T) *T {
	if opts == nil {
		return new(T)
	}
	return opts
}

func orSlice[T any](v, fallback []T) []T {
	if len(v) == 0 {
		return fallback
	}
	return v
}
