package delivery_test

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/queue/axtype"
	"github.com/ax-scheduler/ax/queue/delivery"
)

// closedPort is a loopback address nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}

// An agentless HTTP task that fails records why as its error code:
// http_<status> for an answer, connect when nothing answered, timeout when
// the answer did not come in time. The code reaches the callback (the
// shard's, the run's and the count by code) and the results metric.
func TestHTTPTaskErrorCodes(t *testing.T) {
	t.Parallel()
	env := setup(t, nil)
	callbacks := newReceiver(t, nil)
	busy := newReceiver(t, func(_ int, w http.ResponseWriter, _ *http.Request) bool {
		http.Error(w, "try later", http.StatusServiceUnavailable)
		return false
	})
	release := make(chan struct{})
	hanging := newReceiver(t, func(_ int, _ http.ResponseWriter, r *http.Request) bool {
		select {
		case <-release:
		case <-r.Context().Done():
		}
		return false
	})
	defer close(release) // before the receivers close: they wait for their handlers
	withCallback := func(j *axtype.Job) { j.CallbackURL = callbacks.URL }

	cases := map[string]string{
		busy.URL + "/run":                  "http_503",
		"http://" + closedPort(t) + "/run": "connect",
		hanging.URL + "/run":               "timeout",
	}
	execs := map[uuid.UUID]string{}
	for url, code := range cases {
		job := env.httpJob(url, func(j *axtype.Job) {
			withCallback(j)
			j.TimeoutSeconds = 1
		})
		execs[env.trigger(job.ID).ID] = code
	}
	for id, code := range execs {
		env.eventually("delivered", 15*time.Second, "SELECT state::text FROM ax.callback WHERE execution_id = $1", id)
		require.Equal(t, "failed", env.scalar("SELECT state::text FROM ax.all_executions WHERE id = $1", id))
		require.Equal(t, code, env.scalar("SELECT error_code FROM ax.all_tasks WHERE execution_id = $1", id))
		require.Equal(t, float64(1), counterValue(env.engine.TaskResults.With("failed", code)), code)
	}

	require.Len(t, callbacks.requests(), len(cases))
	for _, r := range callbacks.requests() {
		var p delivery.CallbackPayload
		require.NoError(t, json.Unmarshal(r.body, &p))
		code := execs[uuid.MustParse(p.ExecutionID)]
		require.Equal(t, code, p.ErrorCode)
		require.Equal(t, map[string]int{code: 1}, p.Shards.ByErrorCode)
		var shards []delivery.CallbackShard
		require.NoError(t, json.Unmarshal(p.Shards.Items, &shards))
		require.Len(t, shards, 1)
		require.Equal(t, code, shards[0].ErrorCode)
	}
}

// A target that answered 202 may post a failure with its own code.
func TestHTTPTaskPostedErrorCode(t *testing.T) {
	t.Parallel()
	env := setup(t, func(c *delivery.RiverConfig) { c.HTTP.PublicURL = "http://ax.example" })
	target := newReceiver(t, func(_ int, w http.ResponseWriter, _ *http.Request) bool {
		w.WriteHeader(http.StatusAccepted)
		return false
	})
	exec := env.trigger(env.httpJob(target.URL, nil).ID)
	require.Eventually(t, func() bool { return len(target.requests()) == 1 }, 10*time.Second, 10*time.Millisecond)
	env.eventually("scheduled", 10*time.Second, "SELECT state::text FROM ax.river_job WHERE kind = 'ax_http_task'")

	r := taskResult(t, envelope(t, target.requests()[0]), axtype.TaskFailed, "")
	r.Result, r.Error, r.ErrorCode = nil, "over quota", "quota_exceeded"
	completer := delivery.NewTaskCompleter(env.pool, env.river.Outbox(), nil, env.engine)
	state, err := completer.Complete(context.Background(), r)
	require.NoError(t, err)
	require.Equal(t, axtype.TaskFailed, state)
	require.Equal(t, "quota_exceeded", env.scalar("SELECT error_code FROM ax.all_tasks WHERE execution_id = $1", exec.ID))
	require.Equal(t, float64(1), counterValue(env.engine.TaskResults.With("failed", "quota_exceeded")))
}
