package openapi_test

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/openapi"
	"github.com/ax-scheduler/ax/queue"
	"github.com/ax-scheduler/ax/queue/notify"
	"github.com/ax-scheduler/ax/queue/outbound"
	"github.com/ax-scheduler/ax/tests/dbtest"
	"github.com/ax-scheduler/ax/tests/testlog"
)

func TestMain(m *testing.M) {
	widenParallel(8)
	dbtest.MainLeakChecked(m)
}

// widenParallel runs up to n tests at once unless -parallel was given:
// these tests mostly wait (on Postgres, long polls, leases running out),
// so the default of one test per CPU leaves the machine idle. Fuzzing
// keeps the default, where -parallel counts fuzz workers.
func widenParallel(n int) {
	flag.Parse()
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" || f.Name == "test.fuzz" })
	if !given {
		_ = flag.Set("test.parallel", strconv.Itoa(n))
	}
}

// apiEnv is a real ax API on loopback over a database of its own.
type apiEnv struct {
	t        *testing.T
	pool     *pgxpool.Pool
	notifier *notify.Notifier
	url      string
	admin    string // an admin key
}

// openapiConfig is what setupConfig starts the API with: its own config
// and that of the engine it is handed.
type openapiConfig struct {
	openapi.Config
	Services queue.EngineConfig
}

func setup(t *testing.T) *apiEnv {
	t.Helper()
	return setupConfig(t, nil)
}

// setupConfig starts the API with a notifier (so long polls wake) and a
// config that mutate may adjust.
func setupConfig(t *testing.T, mutate func(*openapiConfig)) *apiEnv {
	t.Helper()
	return setupOn(t, dbtest.New(t), mutate)
}

// setupOn is setupConfig on a pool the test made.
func setupOn(t *testing.T, pool *pgxpool.Pool, mutate func(*openapiConfig)) *apiEnv {
	t.Helper()
	notifier := notify.NewNotifier(pool, nil, notify.ServeChannels()...)
	require.NoError(t, notifier.Start(context.Background()))
	t.Cleanup(notifier.Stop)
	cfg := openapiConfig{Config: openapi.Config{Version: "test", Outbound: outbound.Policy{AllowLoopback: true},
		// A 500 says only "the server logged the details".
		Logger: testlog.New(t, "server log (warnings and errors)", slog.LevelWarn)},
		Services: queue.EngineConfig{Pool: pool, Notifier: notifier}}
	if mutate != nil {
		mutate(&cfg)
	}
	cfg.Services.Logger = cmp.Or(cfg.Services.Logger, cfg.Logger)
	cfg.Engine = queue.NewEngine(cfg.Services)
	handler, _ := openapi.New(cfg.Config)
	srv := httptest.NewServer(handler)
	t.Cleanup(srv.Close)
	env := &apiEnv{t: t, pool: pool, notifier: notifier, url: srv.URL}
	env.admin = env.key(openapi.ScopeAdmin)
	return env
}

// key creates a key with scopes and returns its secret.
func (e *apiEnv) key(scopes ...string) string {
	e.t.Helper()
	secret, _, err := queue.NewKeyService(e.pool).Create(context.Background(), "test", scopes, queue.KeyLimits{})
	require.NoError(e.t, err)
	return secret
}

// response is an answer with its body decoded as JSON.
type response struct {
	status int
	header http.Header
	raw    []byte
	body   map[string]any
}

// call sends body (marshalled unless it is a string or []byte) with key.
func (e *apiEnv) call(method, path, key string, body any) *response {
	e.t.Helper()
	req, err := e.request(method, path, key, body)
	require.NoError(e.t, err)
	return e.do(req)
}

// request makes the request call sends.
func (e *apiEnv) request(method, path, key string, body any) (*http.Request, error) {
	var rdr io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rdr = bytes.NewBufferString(b)
	case []byte:
		rdr = bytes.NewReader(b)
	default:
		buf, err := json.Marshal(b)
		if err != nil {
			return nil, err
		}
		rdr = bytes.NewReader(buf)
	}
	req, err := http.NewRequest(method, e.url+path, rdr)
	if err != nil {
		return nil, err
	}
	if rdr != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	return req, nil
}

// do sends req and decodes the answer.
func (e *apiEnv) do(req *http.Request) *response {
	e.t.Helper()
	resp, err := http.DefaultClient.Do(req)
	require.NoError(e.t, err)
	defer resp.Body.Close()
	out, err := decodeResponse(resp)
	require.NoError(e.t, err)
	return out
}

// decodeResponse reads an answer, decoding a JSON object body.
func decodeResponse(resp *http.Response) (*response, error) {
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	out := &response{status: resp.StatusCode, header: resp.Header, raw: raw}
	if len(raw) > 0 && raw[0] == '{' {
		if err := json.Unmarshal(raw, &out.body); err != nil {
			return nil, fmt.Errorf("%w: %s", err, raw)
		}
	}
	return out, nil
}

// must checks the status and returns the body.
func (r *response) must(t *testing.T, status int) map[string]any {
	t.Helper()
	require.Equal(t, status, r.status, "body: %s", r.raw)
	return r.body
}

// errorLocations lists the locations of a problem document's errors.
func (r *response) errorLocations() []string {
	var locs []string
	errs, _ := r.body["errors"].([]any)
	for _, e := range errs {
		if m, ok := e.(map[string]any); ok {
			loc, _ := m["location"].(string)
			locs = append(locs, loc)
		}
	}
	return locs
}

// cronJob is a minimal valid job body.
func cronJob(name, expr, tz string) map[string]any {
	return map[string]any{
		"name":     name,
		"trigger":  map[string]any{"kind": "cron", "cron": expr, "timezone": tz},
		"executor": map[string]any{"kind": "shell", "command": "echo hello"},
	}
}

func (e *apiEnv) countJobs() int {
	e.t.Helper()
	var n int
	require.NoError(e.t, e.pool.QueryRow(context.Background(), "SELECT count(*) FROM ax.job").Scan(&n))
	return n
}
