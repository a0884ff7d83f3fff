package console_test

import (
	"context"
	"crypto/sha256"
	"net/http"
	"net/netip"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/db"
	"github.com/ax-scheduler/ax/openapi/console"
	"github.com/ax-scheduler/ax/queue"
)

// cookie is the visitor's session cookie.
func (b *browser) cookie() string {
	b.t.Helper()
	u, err := url.Parse(b.e.url + "/ui/")
	require.NoError(b.t, err)
	for _, c := range b.jar.Cookies(u) {
		if c.Name == "ax_console" {
			return c.Value
		}
	}
	b.t.Fatal("no session cookie")
	return ""
}

// withCookie is a new visitor that presents cookie as its session.
func (e *env) withCookie(value string) *browser {
	b := e.browser()
	u, err := url.Parse(e.url + "/ui/")
	require.NoError(e.t, err)
	b.jar.SetCookies(u, []*http.Cookie{{Name: "ax_console", Value: value, Path: "/ui"}})
	return b
}

// bearerStatus is the API's answer to GET /v1/jobs with secret as Bearer.
func (e *env) bearerStatus(secret string) int {
	e.t.Helper()
	req, err := http.NewRequest("GET", e.url+"/v1/jobs", nil)
	require.NoError(e.t, err)
	req.Header.Set("Authorization", "Bearer "+secret)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(e.t, err)
	resp.Body.Close()
	return resp.StatusCode
}

// A session cookie is a random id, not the key: as a Bearer key it gets
// 401, the table keeps only its hash, and logout ends it server-side, so
// a copy of the old cookie is logged out too. Each session has its own
// CSRF token and another session's (or an ended one's) is refused.
func TestSessionIsNotTheKey(t *testing.T) {
	t.Parallel()
	e := setup(t)
	id := e.job("hourly", "ops", map[string]any{"kind": "interval", "interval_seconds": 3600}, nil)
	b := e.browser()
	require.Equal(t, http.StatusSeeOther, b.login(e.admin).status)
	ck := b.cookie()
	require.NotEqual(t, e.admin, ck)
	require.Equal(t, http.StatusOK, e.bearerStatus(e.admin))
	require.Equal(t, http.StatusUnauthorized, e.bearerStatus(ck), "a session cookie is no API key")

	var stored int
	require.NoError(t, e.pool.QueryRow(context.Background(),
		`SELECT count(*) FROM ax.console_session WHERE id_hash = $1`, sha256Of(ck)).Scan(&stored))
	require.Equal(t, 1, stored, "the table keeps the id's hash")
	require.NoError(t, e.pool.QueryRow(context.Background(),
		`SELECT count(*) FROM ax.console_session WHERE id_hash = $1 OR csrf = $2`, []byte(ck), ck).Scan(&stored))
	require.Equal(t, 0, stored, "and not the id")

	// A second session of the same key has another CSRF token; neither
	// session's token works in the other.
	b2 := e.browser()
	require.Equal(t, http.StatusSeeOther, b2.login(e.admin).status)
	token1, token2 := b.csrf("/ui/jobs/"+id), b2.csrf("/ui/jobs/"+id)
	require.NotEqual(t, token1, token2)
	require.Equal(t, http.StatusForbidden, b2.post("/ui/jobs/"+id+"/pause", url.Values{"csrf": {token1}}).status)

	// Logout ends the session in the database: the old cookie, replayed,
	// is logged out, and its token is refused.
	p := b.post("/ui/logout", url.Values{"csrf": {token1}})
	require.Equal(t, http.StatusSeeOther, p.status)
	replay := e.withCookie(ck)
	require.Equal(t, http.StatusSeeOther, replay.get("/ui/jobs").status, "logged out server-side")
	p = replay.post("/ui/jobs/"+id+"/pause", url.Values{"csrf": {token1}})
	require.Equal(t, http.StatusUnauthorized, p.status)
	_, job := e.api("GET", "/v1/jobs/"+id, nil)
	require.Equal(t, false, job["paused"])
	// A new login is a new session with a new token; the stale one fails.
	require.Equal(t, http.StatusSeeOther, b.login(e.admin).status)
	require.NotEqual(t, ck, b.cookie())
	require.Equal(t, http.StatusForbidden, b.post("/ui/jobs/"+id+"/pause", url.Values{"csrf": {token1}}).status)
	token3 := b.csrf("/ui/jobs/" + id)
	require.NotEqual(t, token1, token3)
	require.Equal(t, http.StatusSeeOther, b.post("/ui/jobs/"+id+"/pause", url.Values{"csrf": {token3}}).status)
	// The other session lives on.
	require.Equal(t, http.StatusOK, b2.get("/ui/jobs").status)
}

func sha256Of(s string) []byte {
	h := sha256.Sum256([]byte(s))
	return h[:]
}

// A session unused for SessionIdle ends, and the maintenance's sweep
// deletes it; revoking the key deletes its sessions at once.
func TestSessionExpiresAndIsSwept(t *testing.T) {
	t.Parallel()
	e := setupWith(t, console.Config{SessionIdle: time.Second})
	b := e.browser()
	p := b.login(e.admin)
	require.Equal(t, http.StatusSeeOther, p.status)
	require.Contains(t, p.header.Get("Set-Cookie"), "Max-Age=43200", "the cookie lasts the absolute maximum")
	require.Equal(t, http.StatusOK, b.get("/ui/jobs").status)
	// The session's end is the database's now() passing its expiry: ask
	// until it has (a page touches the expiry at most once a minute, so
	// asking does not keep it alive).
	require.Eventually(t, func() bool { return b.get("/ui/jobs").status == http.StatusSeeOther },
		10*time.Second, 20*time.Millisecond, "idle past SessionIdle")
	n, err := db.ConsoleSessionDeleteExpired(context.Background(), e.pool)
	require.NoError(t, err)
	require.EqualValues(t, 1, n)

	read := e.key(queue.ScopeRead)
	require.Equal(t, http.StatusSeeOther, b.login(read).status)
	key, err := e.keys.Authenticate(context.Background(), sha256.Sum256([]byte(read)))
	require.NoError(t, err)
	require.NoError(t, db.APIKeyRevoke(context.Background(), e.pool, key.ID))
	var left int
	require.NoError(t, e.pool.QueryRow(context.Background(), `SELECT count(*) FROM ax.console_session`).Scan(&left))
	require.Zero(t, left, "revoking the key deleted its session")
}

// Behind a trusted TLS proxy (X-Forwarded-Proto: https from one of
// TrustedProxies) the cookie is Secure; the same header from anyone else
// is not believed.
func TestSecureCookieBehindTrustedProxy(t *testing.T) {
	t.Parallel()
	login := func(e *env, proto string) string {
		p := e.browser().post("/ui/login", url.Values{"key": {e.admin}, "next": {"/ui/jobs"}}, "X-Forwarded-Proto", proto)
		require.Equal(t, http.StatusSeeOther, p.status, p.body)
		return p.header.Get("Set-Cookie")
	}
	trusted := setupWith(t, console.Config{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}})
	require.Contains(t, login(trusted, "https"), "; Secure")
	require.NotContains(t, login(trusted, "http"), "Secure")
	untrusted := setupWith(t, console.Config{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24")}})
	require.NotContains(t, login(untrusted, "https"), "Secure")
	require.NotContains(t, login(setup(t), "https"), "Secure", "no trusted proxy by default")
}

// A read-only session's job page shows the HTTP executor's header names
// and URLs without their values and credentials; so does an admin's.
func TestJobPageHidesSecrets(t *testing.T) {
	t.Parallel()
	e := setup(t)
	id := e.job("secret", "billing", map[string]any{"kind": "interval", "interval_seconds": 3600}, map[string]any{
		"executor": map[string]any{"kind": "http", "url": "https://127.0.0.1:9/run?sig=s3cret-sig",
			"headers": map[string]string{"Authorization": "Bearer s3cret-header"}},
		"callback": map[string]any{"url": "https://127.0.0.1:9/hook?token=s3cret-token"}})
	for _, key := range []string{e.key(queue.ScopeRead), e.admin} {
		b := e.browser()
		require.Equal(t, http.StatusSeeOther, b.login(key).status)
		p := b.get("/ui/jobs/" + id)
		require.Equal(t, http.StatusOK, p.status, p.body)
		require.Contains(t, p.body, "Authorization")
		require.Contains(t, p.body, "ax-redacted")
		for _, s := range []string{"s3cret-sig", "s3cret-header", "s3cret-token"} {
			require.NotContains(t, p.body, s)
		}
	}
}
