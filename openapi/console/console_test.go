package console_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/db"
	"github.com/ax-scheduler/ax/openapi"
	"github.com/ax-scheduler/ax/openapi/console"
	"github.com/ax-scheduler/ax/queue"
	"github.com/ax-scheduler/ax/queue/notify"
	"github.com/ax-scheduler/ax/queue/outbound"
	"github.com/ax-scheduler/ax/tests/dbtest"
)

func TestMain(m *testing.M) {
	dbtest.MainLeakChecked(m)
}

// env is the API and the console on one loopback server, as ax serve
// mounts them, over a database of its own.
type env struct {
	t     *testing.T
	url   string
	keys  *queue.KeyService
	pool  *pgxpool.Pool
	admin string
}

func setup(t *testing.T) *env {
	t.Helper()
	return setupWith(t, console.Config{})
}

// setupWith is setup with the console's optional settings from cfg.
func setupWith(t *testing.T, cfg console.Config) *env {
	t.Helper()
	pool := dbtest.New(t)
	notifier := notify.NewNotifier(pool, nil, notify.ServeChannels()...)
	require.NoError(t, notifier.Start(context.Background()))
	t.Cleanup(notifier.Stop)
	engine := queue.NewEngine(queue.EngineConfig{Pool: pool, Notifier: notifier})
	api, _ := openapi.New(openapi.Config{Engine: engine, Version: "test", Outbound: outbound.Policy{AllowLoopback: true}})
	cfg.API, cfg.Keys, cfg.Overview, cfg.LogPoll = api, engine.Keys, engine.Overview, 50*time.Millisecond
	ui, err := console.New(cfg)
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.Handle(console.Prefix+"/", ui)
	mux.Handle("/", api)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	e := &env{t: t, url: srv.URL, keys: engine.Keys, pool: pool}
	e.admin = e.key(queue.ScopeAdmin)
	return e
}

func (e *env) key(scopes ...string) string {
	e.t.Helper()
	secret, _, err := e.keys.Create(context.Background(), "key-"+strings.Join(scopes, "-"), scopes, queue.KeyLimits{})
	require.NoError(e.t, err)
	return secret
}

// api calls the API with the admin key and decodes its JSON answer.
func (e *env) api(method, path string, body any) (int, map[string]any) {
	e.t.Helper()
	var rdr io.Reader
	if body != nil {
		raw, err := json.Marshal(body)
		require.NoError(e.t, err)
		rdr = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, e.url+path, rdr)
	require.NoError(e.t, err)
	req.Header.Set("Authorization", "Bearer "+e.admin)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(e.t, err)
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

func (e *env) job(name, group string, trigger map[string]any, extra map[string]any) string {
	e.t.Helper()
	job := map[string]any{"name": name, "group": group, "owner": "team-" + group, "trigger": trigger,
		"executor": map[string]any{"kind": "shell", "command": "echo hi"}}
	for k, v := range extra {
		job[k] = v
	}
	status, out := e.api("POST", "/v1/jobs", job)
	require.Equal(e.t, http.StatusCreated, status, out)
	return out["id"].(string)
}

// browser is a visitor: a cookie jar, redirects not followed.
type browser struct {
	t   *testing.T
	e   *env
	c   *http.Client
	jar *cookiejar.Jar
}

func (e *env) browser() *browser {
	jar, err := cookiejar.New(nil)
	require.NoError(e.t, err)
	return &browser{t: e.t, e: e, jar: jar, c: &http.Client{Jar: jar,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

type page struct {
	status int
	header http.Header
	body   string
}

func (b *browser) get(path string) page {
	b.t.Helper()
	resp, err := b.c.Get(b.e.url + path)
	require.NoError(b.t, err)
	return read(b.t, resp)
}

// post sends a form as a browser of this origin does (Origin header).
func (b *browser) post(path string, form url.Values, header ...string) page {
	b.t.Helper()
	req, err := http.NewRequest("POST", b.e.url+path, strings.NewReader(form.Encode()))
	require.NoError(b.t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", b.e.url)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := b.c.Do(req)
	require.NoError(b.t, err)
	return read(b.t, resp)
}

func read(t *testing.T, resp *http.Response) page {
	t.Helper()
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return page{status: resp.StatusCode, header: resp.Header, body: string(raw)}
}

func (b *browser) login(key string) page {
	b.t.Helper()
	return b.post("/ui/login", url.Values{"key": {key}, "next": {"/ui/jobs"}})
}

var csrfPattern = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// csrf is the token of the forms on a page.
func (b *browser) csrf(path string) string {
	b.t.Helper()
	p := b.get(path)
	require.Equal(b.t, http.StatusOK, p.status, p.body)
	m := csrfPattern.FindStringSubmatch(p.body)
	require.NotNil(b.t, m, "a form with a CSRF token on %s", path)
	return m[1]
}

// Logging in sets a cookie scripts cannot read, that no other site's
// request carries and that only /ui gets; an unknown key or one that
// cannot read gets no session; pages send visitors without one to the
// login form; logging out clears the cookie.
func TestLoginCookie(t *testing.T) {
	t.Parallel()
	e := setup(t)
	b := e.browser()

	p := b.get("/ui/jobs?group=x")
	require.Equal(t, http.StatusSeeOther, p.status)
	require.Equal(t, "/ui/login?next="+url.QueryEscape("/ui/jobs?group=x"), p.header.Get("Location"))

	p = b.login("ax_not_a_key")
	require.Equal(t, http.StatusUnauthorized, p.status)
	require.Contains(t, p.body, "unknown or revoked API key")
	require.Empty(t, p.header.Values("Set-Cookie"))

	p = b.login(e.key(queue.ScopeAgent))
	require.Equal(t, http.StatusForbidden, p.status, "an agent key cannot read")
	require.Empty(t, p.header.Values("Set-Cookie"))

	p = b.login(e.key(queue.ScopeRead))
	require.Equal(t, http.StatusSeeOther, p.status, p.body)
	require.Equal(t, "/ui/jobs", p.header.Get("Location"))
	ck := p.header.Get("Set-Cookie")
	for _, attr := range []string{"ax_console=", "Path=/ui", "HttpOnly", "SameSite=Strict", "Max-Age=43200"} {
		require.Contains(t, ck, attr)
	}
	require.NotContains(t, ck, "Secure", "plain HTTP here: a Secure cookie would not come back")
	p = b.get("/ui/jobs")
	require.Equal(t, http.StatusOK, p.status)
	require.Contains(t, p.body, "key-read (read)")
	require.Equal(t, "frame-ancestors 'none'", regexp.MustCompile(`frame-ancestors '[a-z]+'`).FindString(p.header.Get("Content-Security-Policy")))

	// A redirect after login stays inside the console.
	other := e.browser()
	p = other.post("/ui/login", url.Values{"key": {e.admin}, "next": {"//evil.example/ui/x"}})
	require.Equal(t, "/ui/jobs", p.header.Get("Location"))
	// It is cleaned before it is checked.
	for next, want := range map[string]string{"/ui/../../evil": "/ui/jobs", "/ui/../evil?x=1": "/ui/jobs",
		"/ui/jobs/../fleet?a=b": "/ui/fleet?a=b", "/ui/./jobs": "/ui/jobs"} {
		p = e.browser().post("/ui/login", url.Values{"key": {e.admin}, "next": {next}})
		require.Equal(t, want, p.header.Get("Location"), next)
	}

	p = b.post("/ui/logout", url.Values{}) // without the token: refused
	require.Equal(t, http.StatusForbidden, p.status)
	p = b.post("/ui/logout", url.Values{"csrf": {b.csrf("/ui/jobs")}})
	require.Equal(t, http.StatusSeeOther, p.status)
	require.Contains(t, p.header.Get("Set-Cookie"), "Max-Age=0")
	require.Equal(t, http.StatusSeeOther, b.get("/ui/jobs").status, "logged out")
}

// A read key sees jobs but no action; an action posted anyway is refused
// (403) and changes nothing. A revoked key's session ends at once.
func TestReadKeyCannotAct(t *testing.T) {
	t.Parallel()
	e := setup(t)
	id := e.job("nightly", "billing", map[string]any{"kind": "cron", "cron": "0 3 * * *", "timezone": "Europe/Paris"}, nil)
	b := e.browser()
	read := e.key(queue.ScopeRead)
	require.Equal(t, http.StatusSeeOther, b.login(read).status)

	p := b.get("/ui/jobs/" + id)
	require.Equal(t, http.StatusOK, p.status, p.body)
	require.Contains(t, p.body, "every day at 03:00 Europe/Paris (cron 0 3 * * *)")
	require.Contains(t, html.UnescapeString(p.body), "03:00:00+01:00", "next fires in the job's timezone")
	require.Contains(t, p.body, "02:00:00Z", "and in UTC")
	for _, action := range []string{"pause-job", "trigger-job", "delete-job"} {
		require.NotContains(t, p.body, action)
	}
	// "Why didn't it run at 03:00?": the API's explanation of an instant.
	p = b.get("/ui/jobs/" + id + "?explain=2020-01-01T03:00:00")
	require.Contains(t, p.body, `id="explanation"`)
	require.Contains(t, html.UnescapeString(p.body), "2020-01-01T03:00:00+01:00", "read as a wall time in the job's timezone")
	p = b.get("/ui/jobs/" + id + "?explain=soon")
	require.Equal(t, http.StatusOK, p.status)
	require.Contains(t, p.body, `id="explanation-error"`)

	token := csrfPattern.FindStringSubmatch(p.body)[1] // the logout form's
	p = b.post("/ui/jobs/"+id+"/pause", url.Values{"csrf": {token}})
	require.Equal(t, http.StatusForbidden, p.status)
	require.Contains(t, p.body, "lacks scope submit")
	_, job := e.api("GET", "/v1/jobs/"+id, nil)
	require.Equal(t, false, job["paused"])

	// Revoked (ax key revoke), the key's session ends with its next request.
	key, err := e.keys.Authenticate(context.Background(), sha256.Sum256([]byte(read)))
	require.NoError(t, err)
	require.NoError(t, db.APIKeyRevoke(context.Background(), e.pool, key.ID))
	require.Equal(t, http.StatusSeeOther, b.get("/ui/jobs/"+id).status)
}

// An admin's actions need the page's CSRF token and a request from the
// console's own origin; with both, they act through the API.
func TestActionsNeedCSRF(t *testing.T) {
	t.Parallel()
	e := setup(t)
	id := e.job("hourly", "ops", map[string]any{"kind": "interval", "interval_seconds": 3600}, nil)
	b := e.browser()
	require.Equal(t, http.StatusSeeOther, b.login(e.admin).status)

	p := b.post("/ui/jobs/"+id+"/pause", url.Values{})
	require.Equal(t, http.StatusForbidden, p.status)
	require.Contains(t, p.body, "CSRF")
	p = b.post("/ui/jobs/"+id+"/pause", url.Values{"csrf": {"forged"}})
	require.Equal(t, http.StatusForbidden, p.status)
	token := b.csrf("/ui/jobs/" + id)
	p = b.post("/ui/jobs/"+id+"/pause", url.Values{"csrf": {token}}, "Origin", "https://evil.example")
	require.Equal(t, http.StatusForbidden, p.status)
	require.Contains(t, p.body, "cross-origin")
	_, job := e.api("GET", "/v1/jobs/"+id, nil)
	require.Equal(t, false, job["paused"], "nothing refused changed the job")

	p = b.post("/ui/jobs/"+id+"/pause", url.Values{"csrf": {token}})
	require.Equal(t, http.StatusSeeOther, p.status, p.body)
	require.Equal(t, "/ui/jobs/"+id+"?done=paused", p.header.Get("Location"))
	_, job = e.api("GET", "/v1/jobs/"+id, nil)
	require.Equal(t, true, job["paused"])
	require.Contains(t, b.get("/ui/jobs/"+id+"?done=paused").body, "Job paused.")

	// Trigger with params that are not a JSON object: refused, naming the field.
	p = b.post("/ui/jobs/"+id+"/trigger", url.Values{"csrf": {token}, "params": {"[1,2"}})
	require.Equal(t, http.StatusUnprocessableEntity, p.status)
	require.Contains(t, p.body, "form.params")
	p = b.post("/ui/jobs/"+id+"/trigger", url.Values{"csrf": {token}, "params": {`{"day": "2026-03-29", "big": 12345678901234567890}`}})
	require.Equal(t, http.StatusSeeOther, p.status, p.body)
	require.Regexp(t, `^/ui/executions/[0-9a-f-]{36}\?done=triggered$`, p.header.Get("Location"))
	run := b.get(strings.TrimSuffix(p.header.Get("Location"), "?done=triggered"))
	require.Contains(t, run.body, "2026-03-29")
	require.Contains(t, run.body, "12345678901234567890", "numbers are not rounded on the way")

	// Delete wants the name typed.
	p = b.post("/ui/jobs/"+id+"/delete", url.Values{"csrf": {token}, "confirm": {"nope"}})
	require.Equal(t, http.StatusUnprocessableEntity, p.status)
	p = b.post("/ui/jobs/"+id+"/delete", url.Values{"csrf": {token}, "confirm": {"hourly"}})
	require.Equal(t, http.StatusSeeOther, p.status, p.body)
	status, _ := e.api("GET", "/v1/jobs/"+id, nil)
	require.Equal(t, http.StatusNotFound, status)
}

// What jobs hold is escaped wherever it is shown; filters are bounded.
func TestEscapingAndBounds(t *testing.T) {
	t.Parallel()
	e := setup(t)
	id := e.job(`<script>alert(1)</script>`, "web", map[string]any{"kind": "manual"},
		map[string]any{"description": `"><img src=x onerror=alert(2)>`, "target": map[string]any{"labels": map[string]string{"pool": "gpu"}}})
	e.job("other", "web", map[string]any{"kind": "manual"}, nil)
	b := e.browser()
	require.Equal(t, http.StatusSeeOther, b.login(e.admin).status)
	for _, path := range []string{"/ui/jobs", "/ui/jobs/" + id} {
		p := b.get(path)
		require.Equal(t, http.StatusOK, p.status)
		require.NotContains(t, p.body, "<script>alert")
		require.NotContains(t, p.body, "<img src=x")
		require.Contains(t, p.body, "&lt;script&gt;alert(1)&lt;/script&gt;")
	}
	p := b.get("/ui/jobs?label=pool%3Dgpu")
	require.Contains(t, p.body, "&lt;script&gt;")
	require.NotContains(t, p.body, ">other<", "the label filter leaves out jobs without the label")
	p = b.get("/ui/jobs?q=OTH")
	require.Contains(t, p.body, ">other<")
	require.NotContains(t, p.body, "&lt;script&gt;")

	require.Equal(t, http.StatusUnprocessableEntity, b.get("/ui/jobs?state=sleeping").status)
	require.Equal(t, http.StatusUnprocessableEntity, b.get("/ui/jobs?q="+strings.Repeat("a", 201)).status)
	require.Equal(t, http.StatusRequestURITooLong, b.get("/ui/jobs?q="+strings.Repeat("a", 5000)).status)
	require.Equal(t, http.StatusNotFound, b.get("/ui/jobs/not-an-id").status)
	require.Equal(t, http.StatusUnprocessableEntity, b.get("/ui/executions?from=yesterday").status)
}

// A key limited to job groups sees in the console what the API shows it:
// its groups' jobs, and a 404 for the others.
func TestGroupLimitedKey(t *testing.T) {
	t.Parallel()
	e := setup(t)
	mine := e.job("mine", "billing", map[string]any{"kind": "manual"}, nil)
	theirs := e.job("theirs", "search", map[string]any{"kind": "manual"}, nil)
	secret, _, err := e.keys.Create(context.Background(), "billing-reader", []string{queue.ScopeRead},
		queue.KeyLimits{Groups: []string{"billing"}})
	require.NoError(t, err)
	b := e.browser()
	require.Equal(t, http.StatusSeeOther, b.login(secret).status)
	p := b.get("/ui/jobs")
	require.Contains(t, p.body, ">mine<")
	require.NotContains(t, p.body, ">theirs<")
	require.Equal(t, http.StatusOK, b.get("/ui/jobs/"+mine).status)
	require.Equal(t, http.StatusNotFound, b.get("/ui/jobs/"+theirs).status)
}

// The cron playground lists fires from the API's preview and shows the
// API's reason for an expression it refuses.
func TestCronPlayground(t *testing.T) {
	t.Parallel()
	e := setup(t)
	b := e.browser()
	require.Equal(t, http.StatusSeeOther, b.login(e.key(queue.ScopeRead)).status)
	p := b.get("/ui/cron?cron=30+2+*+*+*&timezone=Europe%2FBerlin&count=3&after=2026-03-28T00:00")
	require.Equal(t, http.StatusOK, p.status, p.body)
	require.Contains(t, html.UnescapeString(p.body), "2026-03-28T02:30:00+01:00")
	require.Contains(t, html.UnescapeString(p.body), "2026-03-29T03:00:00+02:00", "the tick in the DST gap fires at its end")
	p = b.get("/ui/cron?cron=61+*+*+*+*")
	require.Equal(t, http.StatusOK, p.status)
	require.Contains(t, p.body, `id="cron-error"`)
}

// A run's page streams its state as server-sent events and ends the
// stream once the run has ended.
func TestLiveStreamEnds(t *testing.T) {
	t.Parallel()
	e := setup(t)
	id := e.job("manual", "ops", map[string]any{"kind": "manual"}, nil)
	status, run := e.api("POST", "/v1/jobs/"+id+"/trigger", nil)
	require.Equal(t, http.StatusAccepted, status, run)
	execID := run["id"].(string)
	b := e.browser()
	require.Equal(t, http.StatusSeeOther, b.login(e.admin).status)
	p := b.get("/ui/executions/" + execID)
	require.Contains(t, p.body, `data-live="/ui/executions/`+execID+`/live?after=`)

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", e.url+"/ui/executions/"+execID+"/live", nil)
	require.NoError(t, err)
	resp, err := b.c.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	events := make(chan string, 16)
	go func() {
		defer close(events)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if name, ok := strings.CutPrefix(sc.Text(), "event: "); ok {
				events <- name
			}
		}
	}()
	require.Equal(t, "execution", <-events, "the state first")
	status, _ = e.api("POST", "/v1/executions/"+execID+"/cancel", nil)
	require.Equal(t, http.StatusOK, status)
	var got []string
	for name := range events {
		got = append(got, name)
	}
	require.Contains(t, got, "end")
	require.Equal(t, "end", got[len(got)-1], "the stream closes after end")
}

// A key that may submit edits a job's definition on its page (the API
// validates it, naming the field); a job managed by a declaration set
// shows its definition read-only, and an edit posted anyway is refused by
// the API.
func TestEditJobDefinition(t *testing.T) {
	t.Parallel()
	e := setup(t)
	id := e.job("nightly", "billing", map[string]any{"kind": "cron", "cron": "0 3 * * *", "timezone": "UTC"}, nil)
	b := e.browser()
	require.Equal(t, http.StatusSeeOther, b.login(e.key(queue.ScopeAdmin)).status)
	p := b.get("/ui/jobs/" + id)
	require.Contains(t, p.body, `id="save-job"`)
	token := csrfPattern.FindStringSubmatch(p.body)[1]

	_, job := e.api("GET", "/v1/jobs/"+id, nil)
	job["trigger"].(map[string]any)["cron"] = "30 4 * * *"
	def, err := json.Marshal(job)
	require.NoError(t, err)
	p = b.post("/ui/jobs/"+id+"/edit", url.Values{"csrf": {token}, "definition": {string(def)}})
	require.Equal(t, http.StatusSeeOther, p.status, p.body)
	_, job = e.api("GET", "/v1/jobs/"+id, nil)
	require.Equal(t, "30 4 * * *", job["trigger"].(map[string]any)["cron"])

	job["trigger"].(map[string]any)["cron"] = "61 * * * *"
	def, err = json.Marshal(job)
	require.NoError(t, err)
	p = b.post("/ui/jobs/"+id+"/edit", url.Values{"csrf": {token}, "definition": {string(def)}})
	require.Equal(t, http.StatusUnprocessableEntity, p.status)
	require.Contains(t, p.body, "body.trigger.cron")
	p = b.post("/ui/jobs/"+id+"/edit", url.Values{"csrf": {token}, "definition": {"not json"}})
	require.Equal(t, http.StatusUnprocessableEntity, p.status)
	_, job = e.api("GET", "/v1/jobs/"+id, nil)
	require.Equal(t, "30 4 * * *", job["trigger"].(map[string]any)["cron"], "a refused edit changes nothing")

	status, _ := e.api("POST", "/v1/declarations", map[string]any{"managed_by": "file:jobs.yaml", "version": "1",
		"jobs": []any{map[string]any{"name": "declared", "group": "billing", "trigger": map[string]any{"kind": "manual"},
			"executor": map[string]any{"kind": "shell", "command": "true"}}}})
	require.Equal(t, http.StatusOK, status)
	var declared string
	require.NoError(t, e.pool.QueryRow(context.Background(), "SELECT id::text FROM ax.job WHERE name = 'declared'").Scan(&declared))
	p = b.get("/ui/jobs/" + declared)
	require.NotContains(t, p.body, `id="save-job"`)
	require.Contains(t, p.body, "change it where it is declared")
	_, dj := e.api("GET", "/v1/jobs/"+declared, nil)
	dj["description"] = "edited in the console"
	def, err = json.Marshal(dj)
	require.NoError(t, err)
	p = b.post("/ui/jobs/"+declared+"/edit", url.Values{"csrf": {token}, "definition": {string(def)}})
	require.Equal(t, http.StatusConflict, p.status, p.body)
	require.Contains(t, p.body, "file:jobs.yaml")
}

// The classes page prints a bucket's tokens and oldest wait as numbers,
// not as Go's rendering of a pointer (%!f(*float64=0x…)).
func TestClassesPageShowsNumbers(t *testing.T) {
	t.Parallel()
	e := setup(t)
	status, _ := e.api("POST", "/v1/classes", map[string]any{"name": "billing-db", "rate": 5, "burst": 10})
	require.Equal(t, http.StatusCreated, status)
	b := e.browser()
	b.login(e.admin)
	p := b.get("/ui/classes")
	require.Equal(t, http.StatusOK, p.status)
	require.NotContains(t, p.body, "%!")
	require.Regexp(t, `<td>billing-db</td><td>5</td><td>10</td><td>(10\.0|9\.\d)</td>`, p.body)
}

// A class with more ready tasks than the listing counts (10,000) says
// "more than 10000" on the classes page, and waiting_capped in the API;
// a class under it shows its count.
func TestClassesPageSaysMoreThanTheCap(t *testing.T) {
	t.Parallel()
	e := setup(t)
	for _, name := range []string{"bulk", "small"} {
		status, out := e.api("POST", "/v1/classes", map[string]any{"name": name, "rate": 1, "burst": 1})
		require.Equal(t, http.StatusCreated, status, out)
	}
	job := e.job("load", "bulk", map[string]any{"kind": "manual"}, nil)
	_, err := e.pool.Exec(context.Background(), `
		WITH e AS (
			INSERT INTO ax.execution (id, job_id, cause, scheduled_for, shard_count, priority)
			SELECT gen_random_uuid(), $1, 'manual', now(), 1, 0 FROM generate_series(1, $2 + 3)
			RETURNING id)
		INSERT INTO ax.task (execution_id, job_id, shard_index, shard_total, priority, max_attempts, timeout_seconds, rate_class)
		SELECT id, $1, 0, 1, 0, 1, 60, CASE WHEN row_number() OVER () <= 3 THEN 'small' ELSE 'bulk' END FROM e`,
		job, db.RateClassWaitingCap+1)
	require.NoError(t, err)

	status, out := e.api("GET", "/v1/classes/bulk", nil)
	require.Equal(t, http.StatusOK, status, out)
	require.EqualValues(t, db.RateClassWaitingCap, out["waiting"])
	require.Equal(t, true, out["waiting_capped"])
	b := e.browser()
	b.login(e.admin)
	p := b.get("/ui/classes")
	require.Equal(t, http.StatusOK, p.status)
	require.Contains(t, p.body, `<td data-role="waiting">more than 10000</td>`)
	require.Contains(t, p.body, `<td data-role="waiting">3</td>`)
}

// The executions filter takes a job by GROUP/NAME or a unique NAME, as the
// CLI does; an unknown name is refused naming the field.
func TestExecutionsFilterByJobName(t *testing.T) {
	t.Parallel()
	e := setup(t)
	manual := map[string]any{"kind": "manual"}
	e.job("water", "kitchen", manual, nil)
	garden := e.job("water", "garden", manual, nil)
	status, run := e.api("POST", "/v1/jobs/"+garden+"/trigger", map[string]any{})
	require.Equal(t, http.StatusAccepted, status)
	b := e.browser()
	b.login(e.admin)
	p := b.get("/ui/executions?job=garden/water")
	require.Equal(t, http.StatusOK, p.status)
	require.Contains(t, p.body, run["id"].(string)[:8])
	p = b.get("/ui/executions?job=water")
	require.Equal(t, http.StatusUnprocessableEntity, p.status)
	require.Contains(t, p.body, "GROUP/NAME")
	p = b.get("/ui/executions?job=nothing")
	require.Equal(t, http.StatusUnprocessableEntity, p.status)
	require.Contains(t, p.body, "no job")
}

// The home page draws the runs of the key's groups only; the re-run button
// shows on an ended run for a key that may submit, its post needs the
// session's CSRF token and scope submit, and it goes to the new run,
// linked to the original both ways.
func TestHomeAndRerun(t *testing.T) {
	t.Parallel()
	e := setup(t)
	manual := map[string]any{"kind": "manual"}
	mine := e.job("mine", "billing", manual, nil)
	theirs := e.job("theirs", "search", manual, nil)
	var runs []string
	for _, job := range []string{mine, theirs, theirs} {
		status, run := e.api("POST", "/v1/jobs/"+job+"/trigger", map[string]any{})
		require.Equal(t, http.StatusAccepted, status, run)
		runs = append(runs, run["id"].(string))
	}
	status, out := e.api("POST", "/v1/executions/"+runs[0]+"/cancel", nil)
	require.Less(t, status, 300, out)

	admin := e.browser()
	admin.login(e.admin)
	p := admin.get("/ui/")
	require.Equal(t, http.StatusOK, p.status, p.body)
	require.Contains(t, p.body, `<svg id="runs-chart"`)
	require.Contains(t, p.body, `data-state="pending" data-total="2"`)
	require.Contains(t, p.body, `data-state="cancelled" data-total="1"`)
	require.Contains(t, p.body, `data-class="" data-priority="0" data-tasks="2"`, "the pending runs' tasks")
	secret, _, err := e.keys.Create(context.Background(), "billing-reader", []string{queue.ScopeRead},
		queue.KeyLimits{Groups: []string{"billing"}})
	require.NoError(t, err)
	reader := e.browser()
	reader.login(secret)
	p = reader.get("/ui/")
	require.Equal(t, http.StatusOK, p.status, p.body)
	require.Contains(t, p.body, `data-state="cancelled" data-total="1"`)
	require.NotContains(t, p.body, `data-state="pending"`, "the other group's runs are not drawn")
	require.Contains(t, p.body, "No task is waiting.")

	// A read key is shown no re-run and may not post one.
	p = reader.get("/ui/executions/" + runs[0])
	require.Equal(t, http.StatusOK, p.status)
	require.NotContains(t, p.body, "rerun-execution")
	require.Equal(t, http.StatusForbidden, reader.post("/ui/executions/"+runs[0]+"/rerun",
		url.Values{"csrf": {reader.csrf("/ui/executions/" + runs[0])}}).status)
	// The admin sees it on the ended run only; without the token: 403.
	require.NotContains(t, admin.get("/ui/executions/"+runs[1]).body, "rerun-execution", "not on a run still going")
	p = admin.get("/ui/executions/" + runs[0])
	require.Contains(t, p.body, `id="rerun-execution"`)
	require.Equal(t, http.StatusForbidden, admin.post("/ui/executions/"+runs[0]+"/rerun", url.Values{}).status)
	form := url.Values{"csrf": {admin.csrf("/ui/executions/" + runs[0])}, "request_key": {"console-test"}}
	p = admin.post("/ui/executions/"+runs[0]+"/rerun", form)
	require.Equal(t, http.StatusSeeOther, p.status, p.body)
	to := p.header.Get("Location")
	require.Regexp(t, `^/ui/executions/[0-9a-f-]{36}\?done=rerun$`, to)
	again := admin.post("/ui/executions/"+runs[0]+"/rerun", form)
	require.Equal(t, to, again.header.Get("Location"), "the same form posted twice is one re-run")
	p = admin.get(to)
	require.Contains(t, p.body, `id="rerun-of" href="/ui/executions/`+runs[0]+`"`)
	rerun := strings.TrimSuffix(strings.TrimPrefix(to, "/ui/executions/"), "?done=rerun")
	require.Contains(t, admin.get("/ui/executions/"+runs[0]).body, `href="/ui/executions/`+rerun+`"`)
}

// agent registers an agent that runs shell tasks, makes it ready and
// returns its id and token.
func (e *env) agent(name string) (id, token string) {
	e.t.Helper()
	status, creds := e.api("POST", "/v1/agents/register", map[string]any{"name": name, "capacity": 1,
		"executors": []string{"shell"}})
	require.Equal(e.t, http.StatusCreated, status, creds)
	id, token = creds["agent_id"].(string), creds["token"].(string)
	e.agentCall(token, id, "heartbeat", map[string]any{"tasks": []any{}, "running": 0, "ready": true})
	return id, token
}

// agentCall posts an agent protocol call with the agent's token.
func (e *env) agentCall(token, id, call string, body any) map[string]any {
	e.t.Helper()
	raw, err := json.Marshal(body)
	require.NoError(e.t, err)
	req, err := http.NewRequest("POST", e.url+"/v1/agents/"+id+"/"+call, bytes.NewReader(raw))
	require.NoError(e.t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(e.t, err)
	defer resp.Body.Close()
	require.Less(e.t, resp.StatusCode, 300, call)
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return out
}

// The agents page lists the agents not offline unless asked for a state,
// and a run's page names the agent that ran it though it is offline now
// (GET /v1/agents by id): before, both read every agent ever registered.
func TestAgentsPageAndOfflineAgentNames(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.agent("serving-worker")
	retiredID, token := e.agent("retired-worker")
	job := e.job("once", "ops", map[string]any{"kind": "manual"}, nil)
	status, run := e.api("POST", "/v1/jobs/"+job+"/trigger", nil)
	require.Equal(t, http.StatusAccepted, status, run)
	leased := e.agentCall(token, retiredID, "lease", map[string]any{"max": 1, "wait_seconds": 5})["tasks"].([]any)
	require.Len(t, leased, 1)
	task := leased[0].(map[string]any)
	e.agentCall(token, retiredID, "complete", map[string]any{"results": []any{map[string]any{
		"task_id": task["task_id"], "lease_token": task["lease_token"], "state": "succeeded"}}})
	e.agentCall(token, retiredID, "deregister", nil)

	b := e.browser()
	b.login(e.admin)
	p := b.get("/ui/agents")
	require.Equal(t, http.StatusOK, p.status, p.body)
	require.Contains(t, p.body, `data-agent="serving-worker"`)
	require.NotContains(t, p.body, `data-agent="retired-worker"`, "offline agents only when asked for")
	p = b.get("/ui/agents?state=offline")
	require.Equal(t, http.StatusOK, p.status, p.body)
	require.Contains(t, p.body, `data-agent="retired-worker"`)
	require.NotContains(t, p.body, `data-agent="serving-worker"`)
	require.Equal(t, http.StatusUnprocessableEntity, b.get("/ui/agents?state=gone").status)

	p = b.get("/ui/executions/" + run["id"].(string))
	require.Equal(t, http.StatusOK, p.status, p.body)
	require.Contains(t, p.body, "retired-worker", "the run's agent by its name")
	require.NotContains(t, p.body, retiredID, "not by its id")
}
