package agent

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// These tests check how ClientServer turns calls into requests of the
// generated client and answers into the Server contract (ErrUnauthorized,
// StatusError, conflicts), with canned answers on 127.0.0.1. They do not
// stand in for the ax server: the end-to-end tests run against a real
// `ax serve`.

type cannedRequest struct {
	method, path, auth, body string
}

// canned answers every request with status and body and records it.
func canned(t *testing.T, status int, body string) (*ClientServer, <-chan cannedRequest) {
	t.Helper()
	got := make(chan cannedRequest, 10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		got <- cannedRequest{r.Method, r.URL.Path, r.Header.Get("Authorization"), string(raw)}
		switch {
		case !strings.HasPrefix(body, "{"):
			w.Header().Set("Content-Type", "text/html")
		case status >= 400:
			w.Header().Set("Content-Type", "application/problem+json")
		default:
			w.Header().Set("Content-Type", "application/json")
		}
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	c, err := NewClientServer(srv.URL+"/", nil)
	require.NoError(t, err)
	return c, got
}

const (
	agentUUID = "0190a0b0-0000-7000-8000-000000000001"
	taskUUID  = "0190a0b0-0000-7000-8000-0000000000a1"
	tokenUUID = "0190a0b0-0000-7000-8000-0000000000b1"
)

var session = Session{AgentID: agentUUID, Token: "agent-token"}

func TestClientServerRegister(t *testing.T) {
	t.Parallel()
	c, got := canned(t, http.StatusCreated,
		`{"agent_id":"`+agentUUID+`","token":"t1","lease_seconds":30,"heartbeat_interval_seconds":5}`)
	creds, err := c.Register(context.Background(), "boot", Registration{Name: "w1", Capacity: 4,
		Labels: map[string]string{"pool": "billing"}, Weight: 3, Version: "1.2"})
	require.NoError(t, err)
	require.Equal(t, Credentials{AgentID: agentUUID, Token: "t1", LeaseSeconds: 30, HeartbeatIntervalSeconds: 5}, creds)
	r := <-got
	require.Equal(t, http.MethodPost, r.method)
	require.Equal(t, "/v1/agents/register", r.path)
	require.Equal(t, "Bearer boot", r.auth)
	require.JSONEq(t, `{"name":"w1","labels":{"pool":"billing"},"capacity":4,"weight":3,"version":"1.2"}`, r.body)

	// No weight: the server's default.
	_, err = c.Register(context.Background(), "boot", Registration{Name: "w2", Capacity: 1})
	require.NoError(t, err)
	require.JSONEq(t, `{"name":"w2","capacity":1,"version":""}`, (<-got).body)
}

func TestClientServerLeaseKeepsParamsExact(t *testing.T) {
	t.Parallel()
	c, got := canned(t, http.StatusOK, `{"tasks":[{"task_id":"`+taskUUID+`","lease_token":"`+tokenUUID+`",`+
		`"execution_id":"`+agentUUID+`","shard_index":1,"shard_total":2,"timeout_seconds":60,`+
		`"executor":{"kind":"http","url":"http://x/y","method":"PUT","headers":{"A":"b"}},`+
		`"params":{"customer_id":12345678901234567890}}]}`)
	tasks, err := c.Lease(context.Background(), session, LeaseRequest{Max: 3, WaitSeconds: 25})
	require.NoError(t, err)
	require.Len(t, tasks, 1)
	require.Equal(t, taskUUID, tasks[0].TaskID)
	require.Equal(t, tokenUUID, tasks[0].LeaseToken)
	require.Equal(t, Executor{Kind: KindHTTP, URL: "http://x/y", Method: "PUT", Headers: map[string]string{"A": "b"}}, tasks[0].Executor)
	require.Equal(t, `{"customer_id":12345678901234567890}`, string(tasks[0].Params), "no float64 on the way")
	r := <-got
	require.Equal(t, "/v1/agents/"+agentUUID+"/lease", r.path)
	require.Equal(t, "Bearer agent-token", r.auth)
	require.JSONEq(t, `{"max":3,"wait_seconds":25}`, r.body)
}

func TestClientServerHeartbeatReleaseDrainDeregister(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, got := canned(t, http.StatusOK, `{"renewed":["`+taskUUID+`"],"lost":[],"cancel":null,`+
		`"lease_expires_at":"2024-05-01T00:00:30Z","state":"draining"}`)
	reply, err := c.Heartbeat(ctx, session, Heartbeat{Tasks: []TaskRef{{TaskID: taskUUID, LeaseToken: tokenUUID}},
		Running: 1, CPU: 0.5, Load1: 0.25, Memory: 0.75, Ready: true})
	require.NoError(t, err)
	require.Equal(t, []string{taskUUID}, reply.Renewed)
	require.Empty(t, reply.Lost)
	require.Equal(t, "draining", reply.State)
	require.JSONEq(t, `{"tasks":[{"task_id":"`+taskUUID+`","lease_token":"`+tokenUUID+`"}],"running":1,`+
		`"cpu":0.5,"load1":0.25,"memory":0.75,"ready":true}`, (<-got).body)

	_, err = c.Heartbeat(ctx, session, Heartbeat{})
	require.NoError(t, err)
	require.JSONEq(t, `{"tasks":[],"running":0,"cpu":0,"load1":0,"memory":0,"ready":false}`, (<-got).body,
		"no tasks is [], not null; not ready is said")

	require.NoError(t, c.Release(ctx, session, nil))
	r := <-got
	require.Equal(t, "/v1/agents/"+agentUUID+"/release", r.path)
	require.JSONEq(t, `{"tasks":[]}`, r.body)

	require.NoError(t, c.Drain(ctx, session))
	r = <-got
	require.Equal(t, "/v1/agents/"+agentUUID+"/drain", r.path)
	require.Equal(t, "Bearer agent-token", r.auth)

	require.NoError(t, c.Deregister(ctx, session))
	require.Equal(t, "/v1/agents/"+agentUUID+"/deregister", (<-got).path)
}

func TestClientServerComplete(t *testing.T) {
	t.Parallel()
	c, got := canned(t, http.StatusOK, `{"results":[{"task_id":"`+taskUUID+`","status":"accepted"}]}`)
	out, err := c.Complete(context.Background(), session, []TaskResult{
		{TaskID: taskUUID, LeaseToken: tokenUUID, State: StateSucceeded, Result: json.RawMessage(`{"n":12345678901234567890}`)},
		{TaskID: taskUUID, LeaseToken: tokenUUID, State: StateFailed, Error: "exit code 1"}})
	require.NoError(t, err)
	require.Equal(t, []ResultOutcome{{TaskID: taskUUID, Status: OutcomeAccepted}}, out)
	require.JSONEq(t, `{"results":[`+
		`{"task_id":"`+taskUUID+`","lease_token":"`+tokenUUID+`","state":"succeeded","result":{"n":12345678901234567890}},`+
		`{"task_id":"`+taskUUID+`","lease_token":"`+tokenUUID+`","state":"failed","error":"exit code 1"}]}`, (<-got).body)
}

func TestClientServerCompleteConflicts(t *testing.T) {
	t.Parallel()
	c, _ := canned(t, http.StatusConflict,
		`{"title":"Conflict","status":409,"detail":"no result was recorded: the lease tokens are not current"}`)
	out, err := c.Complete(context.Background(), session, []TaskResult{
		{TaskID: taskUUID, LeaseToken: tokenUUID, State: StateSucceeded}})
	require.NoError(t, err, "409 on complete means every result was a conflict, not a failed call")
	require.Equal(t, []ResultOutcome{{TaskID: taskUUID, Status: OutcomeConflict}}, out)
}

func TestClientServerErrors(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	chunk := []LogChunk{{TaskID: taskUUID, LeaseToken: tokenUUID, Stream: streamStdout, Data: "x"}}
	for _, tc := range []struct {
		name         string
		status       int
		body         string
		call         func(c *ClientServer) error
		unauthorized bool
		temporary    bool
		message      string
	}{
		{name: "token refused", status: 401, body: `{"title":"Unauthorized"}`,
			call: func(c *ClientServer) error { return c.Logs(ctx, session, chunk) }, unauthorized: true},
		{name: "agent unknown", status: 404, body: `{"title":"Not Found","detail":"agent not found: register again"}`,
			call: func(c *ClientServer) error { _, err := c.Heartbeat(ctx, session, Heartbeat{}); return err }, unauthorized: true},
		{name: "bootstrap key refused", status: 401, body: `{"title":"Unauthorized"}`,
			call: func(c *ClientServer) error { _, err := c.Register(ctx, "bad", Registration{}); return err }, unauthorized: true},
		{name: "server down", status: 503, body: `<html>bad gateway</html>`,
			call:      func(c *ClientServer) error { _, err := c.Lease(ctx, session, LeaseRequest{Max: 1}); return err },
			temporary: true, message: "server answered 503 Service Unavailable: <html>bad gateway</html>"},
		{name: "invalid request", status: 422,
			body: `{"title":"Unprocessable Entity","detail":"validation failed","errors":[{"location":"body.results[0].state","message":"expected one of succeeded, failed, cancelled"}]}`,
			call: func(c *ClientServer) error {
				_, err := c.Complete(ctx, session, []TaskResult{{TaskID: taskUUID, LeaseToken: tokenUUID, State: "done"}})
				return err
			},
			message: "server answered 422 Unprocessable Entity: validation failed (body.results[0].state: expected one of succeeded, failed, cancelled)"},
		{name: "wrong agent", status: 403, body: `{"title":"Forbidden","detail":"this key does not belong to agent x"}`,
			call: func(c *ClientServer) error { return c.Release(ctx, session, nil) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, _ := canned(t, tc.status, tc.body)
			err := tc.call(c)
			require.Error(t, err)
			require.Equal(t, tc.unauthorized, errors.Is(err, ErrUnauthorized), err.Error())
			require.Equal(t, tc.temporary, temporary(err), err.Error())
			var se *StatusError
			require.True(t, errors.As(err, &se))
			require.Equal(t, tc.status, se.Code)
			if tc.message != "" {
				require.EqualError(t, se, tc.message)
			}
		})
	}
}

func TestClientServerRefusesIDsThatAreNotUUIDs(t *testing.T) {
	t.Parallel()
	c, _ := canned(t, http.StatusOK, `{}`)
	err := c.Release(context.Background(), session, []TaskRef{{TaskID: "t1", LeaseToken: tokenUUID}})
	require.ErrorIs(t, err, errMalformed)
	require.False(t, temporary(err), "retrying cannot fix it")
	_, err = c.Lease(context.Background(), Session{AgentID: "agent-1"}, LeaseRequest{Max: 1})
	require.ErrorIs(t, err, errMalformed)
}

func TestClientServerNetworkErrorIsTemporary(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close() // nothing listens there any more
	c, err := NewClientServer(url, nil)
	require.NoError(t, err)
	_, err = c.Lease(context.Background(), session, LeaseRequest{Max: 1})
	require.Error(t, err)
	require.True(t, temporary(err), err.Error())
}

func TestNewClientServerRejectsBadURL(t *testing.T) {
	t.Parallel()
	for _, u := range []string{"", "localhost:8080", "ftp://x", "http://"} {
		_, err := NewClientServer(u, nil)
		require.Error(t, err, u)
	}
}

// A server older than error codes refuses the field as an unexpected
// property (the answer below is what ax serve gives for one): the agent
// sends the results again without their codes instead of losing them.
func TestClientServerCompleteWithoutErrorCodesForOlderServers(t *testing.T) {
	t.Parallel()
	var bodies []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		bodies = append(bodies, string(raw))
		if strings.Contains(string(raw), `"error_code"`) {
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusUnprocessableEntity)
			_, _ = io.WriteString(w, `{"title":"Unprocessable Entity","status":422,"detail":"validation failed",`+
				`"errors":[{"location":"body.results[1].error_code","message":"unexpected property"}]}`)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"results":[{"task_id":"`+taskUUID+`","status":"accepted"}]}`)
	}))
	t.Cleanup(srv.Close)
	c, err := NewClientServer(srv.URL+"/", nil)
	require.NoError(t, err)

	out, err := c.Complete(context.Background(), session, []TaskResult{
		{TaskID: taskUUID, LeaseToken: tokenUUID, State: StateSucceeded},
		{TaskID: taskUUID, LeaseToken: tokenUUID, State: StateFailed, Error: "exit code 3", ErrorCode: "exit_3"}})
	require.NoError(t, err)
	require.Equal(t, []ResultOutcome{{TaskID: taskUUID, Status: OutcomeAccepted}}, out)
	require.Len(t, bodies, 2)
	require.Contains(t, bodies[0], `"error_code":"exit_3"`)
	require.JSONEq(t, `{"results":[`+
		`{"task_id":"`+taskUUID+`","lease_token":"`+tokenUUID+`","state":"succeeded"},`+
		`{"task_id":"`+taskUUID+`","lease_token":"`+tokenUUID+`","state":"failed","error":"exit code 3"}]}`, bodies[1])

	// Any other 422 is the caller's to see.
	c, _ = canned(t, http.StatusUnprocessableEntity, `{"title":"Unprocessable Entity","status":422,`+
		`"errors":[{"location":"body.results[0].state","message":"unexpected value"}]}`)
	_, err = c.Complete(context.Background(), session, []TaskResult{
		{TaskID: taskUUID, LeaseToken: tokenUUID, State: StateFailed, ErrorCode: "exit_3"}})
	var se *StatusError
	require.ErrorAs(t, err, &se)
	require.Equal(t, http.StatusUnprocessableEntity, se.Code)
}

// An agent's calls that overlap (lease poll, results, heartbeat, logs)
// reuse their connections from one round to the next: Go's default
// transport kept 2 per host and dialed the others again every time.
func TestClientServerKeepsItsConnectionsOpen(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	dialed := 0
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(20 * time.Millisecond) // the calls of a round overlap
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"renewed":[],"lost":[],"cancel":null,"lease_expires_at":"2024-05-01T00:00:30Z","state":"active"}`)
	}))
	srv.Config.ConnState = func(_ net.Conn, state http.ConnState) {
		if state == http.StateNew {
			mu.Lock()
			dialed++
			mu.Unlock()
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	c, err := NewClientServer(srv.URL, nil)
	require.NoError(t, err)
	const overlapping, rounds = 5, 4
	for range rounds {
		var wg sync.WaitGroup
		for range overlapping {
			wg.Go(func() {
				_, err := c.Heartbeat(context.Background(), session, Heartbeat{})
				require.NoError(t, err)
			})
		}
		wg.Wait()
	}
	mu.Lock()
	defer mu.Unlock()
	require.LessOrEqual(t, dialed, overlapping, "connections dialed for %d rounds of %d overlapping calls", rounds, overlapping)
}
