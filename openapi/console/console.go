// Package console is ax's web console, served by `ax serve` at /ui next
// to the API. Its pages are rendered on the server (html/template) from
// the API itself, called in-process with the visitor's own API key: the
// console has no second authorisation, so a key's scopes and job groups
// limit what it shows and does exactly as they limit the API. It reads no
// database of its own except the key lookup at login (queue.KeyService,
// as the API's authentication does).
package console

import (
	"cmp"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/netip"
	"time"

	"github.com/ax-scheduler/ax/openapi/client"
	"github.com/ax-scheduler/ax/queue"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Prefix is where the console is mounted.
const Prefix = "/ui"

// Config is what the console needs.
type Config struct {
	// API is the API's handler (openapi.New), called in-process for every
	// read and action, with the visitor's key as the bearer.
	API http.Handler
	// Overview aggregates the home page's charts (the engine's
	// queue.OverviewService), limited to the visitor key's groups.
	Overview *queue.OverviewService
	// Keys checks the key posted at login and the one in the session
	// cookie on every request (revoked keys stop working at once).
	Keys *queue.KeyService
	// SessionIdle ends a console session unused for this long. Defaults
	// to 1 hour.
	SessionIdle time.Duration
	// SessionMax ends a console session this long after login, used or
	// not. Defaults to 12 hours (a working day).
	SessionMax time.Duration
	// TrustedProxies are the addresses of TLS-terminating proxies whose
	// X-Forwarded-Proto: https is believed, so the session cookie is
	// marked Secure behind them. Empty: only ax's own TLS counts.
	TrustedProxies []netip.Prefix
	// Logger receives errors. Defaults to discarding.
	Logger *slog.Logger
	// LogPoll is how often a live log stream reads new events while the
	// execution runs. Defaults to 500 ms.
	LogPoll time.Duration
	// LiveFor bounds one live log stream; the browser reconnects after it
	// where it left off. Defaults to 5 minutes.
	LiveFor time.Duration
}

func (c *Config) validate() error {
	if c.API == nil || c.Keys == nil || c.Overview == nil {
		return errors.New("console: API, Keys and Overview are required")
	}
	if c.LogPoll < 0 || c.LiveFor < 0 || c.SessionIdle < 0 || c.SessionMax < 0 {
		return errors.New("console: LogPoll, LiveFor, SessionIdle and SessionMax must not be negative")
	}
	return nil
}

// Console serves the pages under Prefix.
type Console struct {
	cfg   Config
	api   *client.ClientWithResponses
	pages map[string]*template.Template
	mux   *http.ServeMux
}

// New builds the console.
func New(cfg Config) (*Console, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg.Logger = cmp.Or(cfg.Logger, slog.New(slog.DiscardHandler))
	cfg.LogPoll = cmp.Or(cfg.LogPoll, 500*time.Millisecond)
	cfg.LiveFor = cmp.Or(cfg.LiveFor, 5*time.Minute)
	cfg.SessionIdle = cmp.Or(cfg.SessionIdle, time.Hour)
	cfg.SessionMax = cmp.Or(cfg.SessionMax, 12*time.Hour)
	api, err := client.NewClientWithResponses("http://ax.in-process", client.WithHTTPClient(inProcess{h: cfg.API}))
	if err != nil {
		return nil, fmt.Errorf("console: %w", err)
	}
	pages, err := parsePages()
	if err != nil {
		return nil, err
	}
	c := &Console{cfg: cfg, api: api, pages: pages, mux: http.NewServeMux()}
	c.routes()
	return c, nil
}

func (c *Console) routes() {
	static, _ := fs.Sub(staticFS, "static")
	c.mux.Handle("GET "+Prefix+"/static/", http.StripPrefix(Prefix+"/static/", http.FileServerFS(static)))
	c.mux.HandleFunc("GET "+Prefix+"/{$}", c.page(c.home))
	c.mux.HandleFunc("GET "+Prefix+"/login", c.loginPage)
	c.mux.HandleFunc("POST "+Prefix+"/login", c.login)
	c.mux.HandleFunc("POST "+Prefix+"/logout", c.logout)

	c.mux.HandleFunc("GET "+Prefix+"/jobs", c.page(c.jobs))
	c.mux.HandleFunc("GET "+Prefix+"/jobs/{id}", c.page(c.job))
	c.mux.HandleFunc("POST "+Prefix+"/jobs/{id}/pause", c.action(queue.ScopeSubmit, c.pauseJob))
	c.mux.HandleFunc("POST "+Prefix+"/jobs/{id}/resume", c.action(queue.ScopeSubmit, c.resumeJob))
	c.mux.HandleFunc("POST "+Prefix+"/jobs/{id}/trigger", c.action(queue.ScopeSubmit, c.triggerJob))
	c.mux.HandleFunc("POST "+Prefix+"/jobs/{id}/delete", c.action(queue.ScopeSubmit, c.deleteJob))
	c.mux.HandleFunc("POST "+Prefix+"/jobs/{id}/edit", c.action(queue.ScopeSubmit, c.editJob))

	c.mux.HandleFunc("GET "+Prefix+"/executions", c.page(c.executions))
	c.mux.HandleFunc("GET "+Prefix+"/executions/{id}", c.page(c.execution))
	c.mux.HandleFunc("GET "+Prefix+"/executions/{id}/live", c.page(c.live))
	c.mux.HandleFunc("POST "+Prefix+"/executions/{id}/cancel", c.action(queue.ScopeSubmit, c.cancelExecution))
	c.mux.HandleFunc("POST "+Prefix+"/executions/{id}/rerun", c.action(queue.ScopeSubmit, c.rerunExecution))
	c.mux.HandleFunc("POST "+Prefix+"/executions/{id}/redeliver", c.action(queue.ScopeSubmit, c.redeliverCallback))

	c.mux.HandleFunc("GET "+Prefix+"/agents", c.page(c.agents))
	c.mux.HandleFunc("POST "+Prefix+"/agents/{id}/drain", c.action(queue.ScopeAdmin, c.drainAgent))
	c.mux.HandleFunc("POST "+Prefix+"/agents/{id}/resume", c.action(queue.ScopeAdmin, c.resumeAgent))

	c.mux.HandleFunc("GET "+Prefix+"/classes", c.page(c.classes))
	c.mux.HandleFunc("POST "+Prefix+"/classes/{name}/degrade", c.action(queue.ScopeAdmin, c.degradeClass))
	c.mux.HandleFunc("POST "+Prefix+"/classes/{name}/restore", c.action(queue.ScopeAdmin, c.restoreClass))

	c.mux.HandleFunc("GET "+Prefix+"/cron", c.page(c.cron))
}

// ServeHTTP serves the console with headers that keep its pages out of
// frames, caches and other origins' scripts.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "+
		"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Cache-Control", "no-store")
	if len(r.URL.RawQuery) > maxQuery {
		c.problem(w, r, nil, http.StatusRequestURITooLong, "query string too long", fmt.Sprintf("at most %d bytes", maxQuery))
		return
	}
	c.mux.ServeHTTP(w, r)
}

// maxQuery bounds a page's query string: filters are short.
const maxQuery = 4 << 10
