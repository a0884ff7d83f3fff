package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"

	"github.com/ax-scheduler/ax/agent"
	"github.com/ax-scheduler/ax/db"
	"github.com/ax-scheduler/ax/openapi"
	"github.com/ax-scheduler/ax/queue"
	"github.com/ax-scheduler/ax/queue/axtype"
	"github.com/ax-scheduler/ax/queue/delivery"
	"github.com/ax-scheduler/ax/queue/dispatch"
	"github.com/ax-scheduler/ax/queue/metrics"
	"github.com/ax-scheduler/ax/queue/notify"
	"github.com/ax-scheduler/ax/queue/schedule"
	"github.com/ax-scheduler/ax/queue/vacuum"
)

// benchHandler is the name agents register their no-op handler under.
const benchHandler = "bench.noop"

// benchLogger logs like the ax and ax-agent commands do by default (JSON,
// level info), into io.Discard: the benchmarks pay for formatting the
// lines a deployment writes, not for a terminal.
func benchLogger() *slog.Logger {
	return slog.New(slog.NewJSONHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

// axReplica is one ax server wired as `ax serve` wires it (notifier, task
// router, trigger loop, reaper, vacuumer, upcoming fires, API with metrics
// and request logs, and with startReplicaWithRiver River's workers) on a
// loopback listener, with a manual job whose executor is benchHandler.
// The queue-state collector is left out: it only queries when /metrics is
// scraped, which the benchmarks never do.
type axReplica struct {
	pool *pgxpool.Pool
	// requestPool serves the API's requests but agents', as in ax serve.
	requestPool *pgxpool.Pool
	url         string
	metrics     *metrics.Metrics
	router      *dispatch.TaskRouter
	notifier    *notify.Notifier
	jobID       uuid.UUID
	requests    *requestLog // agents' lease and complete calls, when recording
}

// startReplica serves ax on the database at dbURL until b ends, without
// River's workers: most benchmarks use neither callbacks nor agentless
// HTTP tasks, and BenchmarkEndToEnd's River runs in the same schema,
// where a second River client would share its table and its leader.
func startReplica(b *testing.B, dbURL string) *axReplica {
	b.Helper()
	return startReplicaWith(b, dbURL, false)
}

// startReplicaWithRiver is startReplica with River's workers (callbacks,
// agentless HTTP tasks, maintenance) running as in ax serve, for the
// benchmarks that count what an idle replica costs: their polls are part
// of it.
func startReplicaWithRiver(b *testing.B, dbURL string) *axReplica {
	b.Helper()
	return startReplicaWith(b, dbURL, true)
}

func startReplicaWith(b *testing.B, dbURL string, withRiver bool) *axReplica {
	b.Helper()
	ctx := context.Background()
	pool, err := db.Open(ctx, dbURL)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	logger := benchLogger()
	reg := prometheus.NewRegistry()
	metrics := metrics.New(reg)
	notifier := notify.NewNotifier(pool, logger, notify.ServeChannels()...)
	var outbox *delivery.Outbox
	if withRiver {
		river, err := delivery.NewRiverService(pool, delivery.RiverConfig{Logger: logger, Metrics: metrics})
		if err != nil {
			b.Fatal(err)
		}
		if err := river.Start(ctx); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(river.Stop)
		outbox = river.Outbox()
	}
	agentCfg := dispatch.AgentConfig{}
	router, err := dispatch.NewTaskRouter(agentCfg, dispatch.TaskRouterConfig{}, logger, metrics)
	if err != nil {
		b.Fatal(err)
	}
	triggers := schedule.NewTriggerLoop(pool, notifier, schedule.TriggerLoopConfig{Logger: logger, Metrics: metrics, Router: router,
		Outbox: outbox})
	reaper := dispatch.NewReaper(pool, agentCfg, dispatch.ReaperConfig{Logger: logger, Metrics: metrics, Outbox: outbox})
	vacuumer := vacuum.New(pool, vacuum.Config{Logger: logger, Metrics: metrics})
	upcoming := schedule.NewUpcoming(pool, notifier, schedule.UpcomingConfig{Logger: logger})
	for _, svc := range []interface {
		Start(context.Context) error
		Stop()
	}{notifier, triggers, reaper, vacuumer, upcoming} {
		if err := svc.Start(ctx); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(svc.Stop)
	}
	// Two pools, as ax serve opens them.
	requestPool, err := db.OpenPool(ctx, dbURL, db.PoolSize{MaxConns: 2, MinConns: 2})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(requestPool.Close)
	engine := queue.NewEngine(queue.EngineConfig{Pool: pool, RequestPool: requestPool, Logger: logger,
		Metrics: metrics, Notifier: notifier, Agent: agentCfg, Router: router, Outbox: outbox})
	// Calls take turns as in ax serve.
	api, _ := openapi.New(openapi.Config{Engine: engine, Logger: logger, Version: "bench",
		RequestTurns: openapi.TurnsFor(int(requestPool.Config().MaxConns)), Turns: metrics})
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.Handle("/", api)
	requests := &requestLog{}
	srv := httptest.NewServer(requests.wrap(openapi.LogRequests(logger, mux)))
	b.Cleanup(srv.Close)
	r := &axReplica{pool: pool, requestPool: requestPool, url: srv.URL, metrics: metrics, router: router, notifier: notifier,
		requests: requests}
	r.jobID = r.createJob(b)
	return r
}

// createJob creates, through the API, a manual job that runs benchHandler.
func (r *axReplica) createJob(b *testing.B) uuid.UUID {
	b.Helper()
	return r.createJobFor(b, nil)
}

// createJobFor is createJob for a job only agents carrying labels may
// run (nil: any agent).
func (r *axReplica) createJobFor(b *testing.B, labels map[string]string) uuid.UUID {
	b.Helper()
	def := map[string]any{"trigger": map[string]any{"kind": "manual"}}
	if labels != nil {
		def["target"] = map[string]any{"labels": labels}
	}
	return r.createJobDef(b, def)
}

// createJobDef creates, through the API, a job that runs benchHandler
// with the rest of its definition from def (a trigger at least).
func (r *axReplica) createJobDef(b *testing.B, def map[string]any) uuid.UUID {
	b.Helper()
	admin, _, err := queue.NewKeyService(r.pool).Create(context.Background(), "bench-admin", []string{queue.ScopeAdmin}, queue.KeyLimits{})
	if err != nil {
		b.Fatal(err)
	}
	def = maps.Clone(def)
	def["name"] = "bench-noop-" + uuid.NewString()[:8] // unique in a database benchmarks share
	def["executor"] = map[string]any{"kind": "handler", "handler": benchHandler}
	body, _ := json.Marshal(def)
	req, _ := http.NewRequest(http.MethodPost, r.url+"/v1/jobs", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+admin)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	var job struct {
		ID uuid.UUID `json:"id"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&job); err != nil || resp.StatusCode != http.StatusCreated {
		b.Fatalf("error creating the bench job: status %d, %v", resp.StatusCode, err)
	}
	return job.ID
}

// startAgents runs n agents of the given capacity (0: the default) with
// handler as benchHandler, talking to r over HTTP, until b ends; it returns
// once all of them are registered and ready.
func (r *axReplica) startAgents(b *testing.B, n, capacity int, handler agent.HandlerFunc) {
	b.Helper()
	r.startAgentSet(b, agentSet{n: n, capacity: capacity, name: "bench"}, handler)
	r.waitAgentsReady(b, n)
}

// agentSet is n agents of the given capacity named name-0, name-1…,
// carrying labels.
type agentSet struct {
	n, capacity int
	name        string
	labels      map[string]string
}

// startAgentSet runs the agents of set against r until b ends, without
// waiting for them to be ready.
func (r *axReplica) startAgentSet(b *testing.B, set agentSet, handler agent.HandlerFunc) {
	b.Helper()
	key, _, err := queue.NewKeyService(r.pool).Create(context.Background(), "bench-agents", []string{queue.ScopeAgent}, queue.KeyLimits{})
	if err != nil {
		b.Fatal(err)
	}
	for i := range set.n {
		a, err := agent.New(agent.Config{URL: r.url, Key: key, Name: fmt.Sprintf("%s-%d", set.name, i),
			Capacity: set.capacity, Labels: set.labels, Logger: benchLogger()})
		if err != nil {
			b.Fatal(err)
		}
		a.Handle(benchHandler, handler)
		ctx, stop := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- a.Run(ctx) }()
		b.Cleanup(func() {
			stop()
			select {
			case err := <-done:
				if err != nil {
					b.Errorf("agent %d: %v", i, err)
				}
			case <-time.After(30 * time.Second):
				b.Errorf("agent %d did not stop within 30 s", i)
			}
		})
	}
}

// waitAgentsReady waits until the database has n active, ready agents.
func (r *axReplica) waitAgentsReady(b *testing.B, n int) {
	b.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		var ready int
		err := r.pool.QueryRow(context.Background(),
			"SELECT count(*) FROM ax.agent WHERE state = 'active' AND ready").Scan(&ready)
		if err != nil {
			b.Fatal(err)
		}
		if ready == n {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d agents ready after 60 s", ready, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// fire inserts n executions of the bench job (one task each) in one
// transaction that routes their tasks and NOTIFYs the task-ready channel,
// as the trigger loop writes a batch of fires (queue's insertExecutions,
// spelled out with its exported parts), and returns when the commit
// returned.
func (r *axReplica) fire(b *testing.B, n int) time.Time {
	b.Helper()
	if err := r.fireErr(n); err != nil {
		b.Fatal(err)
	}
	return time.Now()
}

// fireErr is fire for goroutines other than the benchmark's.
func (r *axReplica) fireErr(n int) error {
	return r.fireJob(r.jobID, n)
}

// fireJob is fireErr for runs of the job jobID.
func (r *axReplica) fireJob(jobID uuid.UUID, n int) error {
	ctx := context.Background()
	err := db.WithTx(ctx, r.pool, func(tx pgx.Tx) error {
		now, err := db.Now(ctx, tx)
		if err != nil {
			return err
		}
		execs := make([]*axtype.NewExecution, n)
		for i := range execs {
			execs[i] = &axtype.NewExecution{ID: uuid.Must(uuid.NewV7()), JobID: jobID, Cause: axtype.CauseManual, ScheduledFor: now}
		}
		// As the trigger loop fires: the notification names the agents
		// the tasks are routed to.
		var ready notify.Targets
		inserted, err := dispatch.InsertExecutions(ctx, tx, r.router, nil, execs, &ready)
		if err != nil {
			return err
		}
		if len(inserted) != n {
			return fmt.Errorf("inserted %d executions of %d", len(inserted), n)
		}
		return db.Notify(ctx, tx, notify.TaskReadyChannel, ready.Payload())
	})
	if err != nil {
		return fmt.Errorf("error firing %d executions: %w", n, err)
	}
	return nil
}

// succeeded is how many results the server has recorded as succeeded
// (ax_task_results_total{state="succeeded"}), counted after each commit.
func (r *axReplica) succeeded(b *testing.B) int {
	var m dto.Metric
	if err := r.metrics.TaskResults.With("succeeded", "").Write(&m); err != nil {
		b.Fatal(err)
	}
	return int(m.GetCounter().GetValue())
}

// waitSucceeded waits until the server has recorded target successes.
func (r *axReplica) waitSucceeded(b *testing.B, target int, timeout time.Duration) {
	b.Helper()
	deadline := time.Now().Add(timeout)
	for r.succeeded(b) < target {
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d tasks succeeded after %s", r.succeeded(b), target, timeout)
		}
		time.Sleep(500 * time.Microsecond)
	}
}

// vacuums says how many VACUUMs the replica's vacuumer ran, and their
// time, by table (those with any).
func (r *axReplica) vacuums(b *testing.B) string {
	var out []string
	for _, table := range vacuum.HotTables {
		var n, secs dto.Metric
		if err := r.metrics.Vacuums.WithLabelValues(table).Write(&n); err != nil {
			b.Fatal(err)
		}
		if err := r.metrics.VacuumSeconds.WithLabelValues(table).Write(&secs); err != nil {
			b.Fatal(err)
		}
		if c := n.GetCounter().GetValue(); c > 0 {
			out = append(out, fmt.Sprintf("%s %.0f (%.2f s)", table, c, secs.GetCounter().GetValue()))
		}
	}
	return strings.Join(out, ", ")
}
