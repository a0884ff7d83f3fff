package openapi

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/queue"
	"github.com/ax-scheduler/ax/queue/axtype"
	"github.com/ax-scheduler/ax/queue/dispatch"
	"github.com/ax-scheduler/ax/queue/schedule"
	"github.com/ax-scheduler/ax/tests/dbtest"
)

// jobFuzzSeeds are the seed corpus of FuzzJobDefinition: one of each
// trigger, executor and routing shape, and the definitions that once
// stopped the scheduler.
var jobFuzzSeeds = []string{
	`{"name":"a","trigger":{"kind":"cron","cron":"* * * * * *"},"executor":{"kind":"shell","command":"true"}}`,
	`{"name":"a","trigger":{"kind":"cron","cron":"0 30 2 * * ?","timezone":"America/New_York"},"executor":{"kind":"shell","command":"x"}}`,
	`{"name":"a","trigger":{"kind":"interval","interval_seconds":1},"executor":{"kind":"handler","handler":"h"},"concurrency_policy":"forbid"}`,
	`{"name":"a","trigger":{"kind":"delay","run_at":"2999-01-01T00:00:00Z"},"executor":{"kind":"shell","command":"x"}}`,
	`{"name":"a","trigger":{"kind":"manual"},"executor":{"kind":"shell","command":"x"},"params":{"n":1}}`,
	`{"name":"w","trigger":{"kind":"cron","cron":"* * * * * *"},"executor":{"kind":"shell","command":"x"},"shards":{"count":4,"range":{"from":-9223372036854775808,"to":9223372036854775807}}}`,
	`{"name":"w","trigger":{"kind":"cron","cron":"* * * * * *"},"executor":{"kind":"shell","command":"x"},"shards":{"count":3,"range":{"from":-10,"to":0}}}`,
	`{"name":"w","trigger":{"kind":"manual"},"executor":{"kind":"shell","command":"x"},"shards":{"count":2,"params":["a","b"]}}`,
	`{"name":"k","trigger":{"kind":"manual"},"executor":{"kind":"shell","command":"x"},"route":{"strategy":"consistent_hash","key":"c={{.params.c}}"},"params":{"c":7}}`,
	`{"name":"k","trigger":{"kind":"manual"},"executor":{"kind":"shell","command":"x"},"route":{"strategy":"load_aware","key":"{{range 1000000000}}x{{end}}"}}`,
	`{"name":"k","trigger":{"kind":"cron","cron":"* * * * * *"},"executor":{"kind":"shell","command":"x"},"route":{"strategy":"broadcast"}}`,
	`{"name":"h","trigger":{"kind":"manual"},"executor":{"kind":"http","url":"http://127.0.0.1:9/x","body":"{{json .params}}"}}`,
	`{"name":"h","trigger":{"kind":"manual"},"executor":{"kind":"http","url":"http://127.0.0.1:9/x","body":"{{json (json .params)}}"}}`,
	`{"name":"m","trigger":{"kind":"cron","cron":"*/5 * * * * *"},"executor":{"kind":"shell","command":"x"},"misfire":{"policy":"fire_all","window_seconds":60,"max_fires":3},"retry":{"max_attempts":3,"backoff_seconds":1}}`,
	`{"name":"r","trigger":{"kind":"cron","cron":"* * * * * *"},"executor":{"kind":"shell","command":"x"},"concurrency_policy":"replace","priority":-1000,"timeout_seconds":604800}`,
	`{"name":"t","trigger":{"kind":"cron","cron":"* * * * * *"},"executor":{"kind":"shell","command":"x"},"timeout_mode":"adaptive","timeout_seconds":5,"shards":{"count":3}}`,
}

// jobFuzzMaxBytes is the API's limit on a job body.
const jobFuzzMaxBytes = jobBodyLimit

// FuzzJobDefinition feeds job definitions through what the API does with
// them (JSON decoding, schema and cross-field validation, mapping) and,
// for every definition accepted, stores and fires it against Postgres:
// once through the trigger loop's planning (scheduled jobs) and once by
// hand, with two live agents so route keys render. No input may panic,
// and no accepted definition may fail to fire or be set aside.
//
//	go test -run '^$' -fuzz '^FuzzJobDefinition$' -fuzztime 20s ./openapi/
func FuzzJobDefinition(f *testing.F) {
	for _, s := range jobFuzzSeeds {
		f.Add([]byte(s))
	}
	fx := newJobFuzz(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		job, ok := fx.accept(data)
		if !ok {
			return
		}
		dbJob, err := jobToDB(job, uuid.Nil)
		require.NoError(t, err)
		dbJob.Name = uuid.NewString() // names are unique per group; the fuzzer reuses them
		created, err := fx.jobs.Create(fx.ctx, dbJob)
		require.NoError(t, err, "an accepted definition is stored")
		defer func() { require.NoError(t, fx.jobs.Delete(fx.ctx, created.ID, false)) }()
		if created.NextFireAt != nil {
			fx.fireScheduled(t, created.ID)
		}
		_, _, err = fx.execs.Trigger(fx.ctx, &queue.TriggerRequest{JobID: created.ID})
		if !errors.Is(err, queue.ErrOverlapForbidden) { // the scheduled fire still runs: as promised
			require.NoError(t, err, "an accepted definition fires by hand")
		}
	})
}

// jobFuzz holds what each fuzz input runs against.
type jobFuzz struct {
	ctx      context.Context
	registry huma.Registry
	schema   *huma.Schema
	jobs     *queue.JobService
	execs    *queue.ExecutionService
	loop     *schedule.TriggerLoop
	pool     *pgxpool.Pool
}

func newJobFuzz(f *testing.F) *jobFuzz {
	pool := dbtest.New(f)
	ctx := context.Background()
	registry := huma.NewMapRegistry("#/components/schemas/", huma.DefaultSchemaNamer)
	schema := registry.Schema(reflect.TypeFor[Job](), true, "")
	// A router whose snapshot of two agents lasts the whole run, so keys
	// of keyed strategies are rendered on every fire.
	router, err := dispatch.NewTaskRouter(dispatch.AgentConfig{}, dispatch.TaskRouterConfig{Refresh: time.Hour, Live: time.Hour}, nil, nil)
	require.NoError(f, err)
	agents := dispatch.NewLeaseBroker(pool, nil, dispatch.AgentConfig{}, nil, nil)
	_, key, err := queue.NewKeyService(pool).Create(ctx, "fuzz", []string{ScopeAgent}, queue.KeyLimits{})
	require.NoError(f, err)
	for _, name := range []string{"a", "b"} {
		a, err := agents.Register(ctx, &axtype.Agent{Name: name, Capacity: 10, Labels: map[string]string{}, APIKeyID: key.ID})
		require.NoError(f, err)
		_, err = pool.Exec(ctx, `UPDATE ax.agent SET ready = true, last_heartbeat_at = now() WHERE id = $1`, a.ID)
		require.NoError(f, err)
	}
	return &jobFuzz{ctx: ctx, registry: registry, schema: schema, pool: pool,
		jobs:  queue.NewJobService(pool, nil),
		execs: queue.NewExecutionService(pool, nil, nil).WithRouter(router),
		loop:  schedule.NewTriggerLoop(pool, nil, schedule.TriggerLoopConfig{Router: router, FireAhead: -1})}
}

// accept decodes and validates data as POST /v1/jobs does; false: the API
// would refuse it.
func (fx *jobFuzz) accept(data []byte) (*Job, bool) {
	if len(data) > jobFuzzMaxBytes {
		return nil, false
	}
	if unstorable(data) != nil { // storableBodies, before huma decodes
		return nil, false
	}
	var v any
	if err := jsonFormat.Unmarshal(data, &v); err != nil {
		return nil, false
	}
	res := &huma.ValidateResult{}
	huma.Validate(fx.registry, fx.schema, huma.NewPathBuffer([]byte("body"), 4), huma.ModeWriteToServer, v, res)
	if len(res.Errors) > 0 {
		return nil, false
	}
	var job Job
	if err := jsonFormat.Unmarshal(data, &job); err != nil {
		return nil, false
	}
	if errs := job.Resolve(nil, huma.NewPathBuffer([]byte("body"), 4)); len(errs) > 0 {
		return nil, false
	}
	return &job, true
}

// fireScheduled makes the job due now and runs the trigger loop once: the
// job must not be set aside, and must have fired.
func (fx *jobFuzz) fireScheduled(t *testing.T, id uuid.UUID) {
	_, err := fx.pool.Exec(fx.ctx, `UPDATE ax.trigger SET next_fire_at = now() WHERE job_id = $1`, id)
	require.NoError(t, err)
	_, err = fx.loop.FireDue(fx.ctx)
	require.NoError(t, err)
	job, err := fx.jobs.Get(fx.ctx, id)
	require.NoError(t, err)
	require.Nil(t, job.SetAsideAt, "an accepted definition was set aside: %s", job.SetAsideReason)
	require.NotNil(t, job.LastExecutionID, "an accepted definition fires on schedule")
}
