package console

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"net/http"
	"net/netip"
	"net/url"
	"path"
	"strings"
	"time"

	"github.com/ax-scheduler/ax/openapi"
	"github.com/ax-scheduler/ax/queue"
	"github.com/ax-scheduler/ax/queue/axtype"
)

// A session is a row of ax.console_session (migration 00044) opened at
// login with the posted key; the cookie holds only the session's random
// id, which is no API key (as a Bearer it gets 401). The cookie is one
// scripts cannot read (HttpOnly), that no other site's request carries
// (SameSite=Strict), that only the console's paths receive (Path=/ui),
// and Secure over TLS, ax's own or a trusted proxy's (TrustedProxies).
// The session is read from the database on every request, so any replica
// serves any visitor, and logout or revoking the key ends it at once.
const (
	cookieName = "ax_console"
	// maxKeyLen bounds a posted key or a cookie: ax keys are 46 bytes.
	maxKeyLen = 512
	// maxForm bounds a posted form: trigger params are the largest field.
	maxForm = 128 << 10
	// csrfField is the hidden field every state-changing form carries.
	csrfField = "csrf"
)

var errNoSession = errors.New("not logged in")

// session is a logged-in visitor.
type session struct {
	id   string
	key  *axtype.APIKey
	csrf string
}

// can reports whether the session's key may do what scope allows.
func (s *session) can(scope string) bool { return openapi.Grants(s.key.Scopes, scope) }

// auth makes an in-process API request the session key's: the API checks
// its scopes and groups as for a Bearer request.
func (s *session) auth(_ context.Context, req *http.Request) error {
	*req = *req.WithContext(openapi.WithPrincipal(req.Context(), s.key))
	return nil
}

// authenticate returns the live key whose secret this is.
func (c *Console) authenticate(ctx context.Context, secret string) (*axtype.APIKey, error) {
	if secret == "" || len(secret) > maxKeyLen {
		return nil, axtype.ErrNotFound
	}
	return c.cfg.Keys.Authenticate(ctx, sha256.Sum256([]byte(secret)))
}

// session reads the visitor's session from the cookie.
func (c *Console) session(r *http.Request) (*session, error) {
	ck, err := r.Cookie(cookieName)
	if err != nil || ck.Value == "" || len(ck.Value) > maxKeyLen {
		return nil, errNoSession
	}
	got, err := c.cfg.Keys.ConsoleSession(r.Context(), ck.Value, c.cfg.SessionIdle)
	switch {
	case errors.Is(err, axtype.ErrNotFound):
		return nil, errNoSession
	case err != nil:
		return nil, err
	case !openapi.Grants(got.Key.Scopes, queue.ScopeRead):
		return nil, errNoSession
	}
	return &session{id: ck.Value, key: got.Key, csrf: got.CSRF}, nil
}

func (c *Console) setCookie(w http.ResponseWriter, r *http.Request, value string, maxAge time.Duration) {
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: value, Path: Prefix, MaxAge: int(maxAge / time.Second),
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: c.overTLS(r)})
}

// overTLS reports whether the visitor reached ax over TLS: ax's own, or
// a trusted proxy's that says so in X-Forwarded-Proto. Another client's
// X-Forwarded-Proto is not believed.
func (c *Console) overTLS(r *http.Request) bool {
	if r.TLS != nil {
		return true
	}
	if len(c.cfg.TrustedProxies) == 0 || !strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https") {
		return false
	}
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return false
	}
	addr := ap.Addr().Unmap()
	for _, p := range c.cfg.TrustedProxies {
		if p.Contains(addr) {
			return true
		}
	}
	return false
}

type loginView struct {
	Next, Error string
}

func (c *Console) loginPage(w http.ResponseWriter, r *http.Request) {
	c.render(w, r, nil, http.StatusOK, "login", "Log in", loginView{Next: safeNext(r.URL.Query().Get("next"))})
}

// login checks the posted key and starts a session with it.
func (c *Console) login(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxKeyLen+maxQuery)
	if !sameOrigin(r) {
		c.problem(w, r, nil, http.StatusForbidden, "cross-origin request refused", "the form was not posted from this console")
		return
	}
	if err := r.ParseForm(); err != nil {
		c.problem(w, r, nil, http.StatusBadRequest, "unreadable form", "the login form is at most a key and a path")
		return
	}
	secret := strings.TrimSpace(r.PostForm.Get("key"))
	next := safeNext(r.PostForm.Get("next"))
	key, err := c.authenticate(r.Context(), secret)
	switch {
	case errors.Is(err, axtype.ErrNotFound):
		c.render(w, r, nil, http.StatusUnauthorized, "login", "Log in", loginView{Next: next, Error: "unknown or revoked API key"})
		return
	case err != nil:
		c.cfg.Logger.ErrorContext(r.Context(), "console: error checking a key at login", "error", err)
		c.problem(w, r, nil, http.StatusServiceUnavailable, "cannot check the key right now", "try again shortly")
		return
	case !openapi.Grants(key.Scopes, queue.ScopeRead):
		c.render(w, r, nil, http.StatusForbidden, "login", "Log in", loginView{Next: next,
			Error: "API key " + key.Name + " cannot read (it has " + strings.Join(key.Scopes, ", ") + "): the console needs read, submit or admin"})
		return
	}
	id, _, err := c.cfg.Keys.OpenConsoleSession(r.Context(), key, c.cfg.SessionIdle, c.cfg.SessionMax)
	if err != nil {
		c.cfg.Logger.ErrorContext(r.Context(), "console: error opening a session", "error", err)
		c.problem(w, r, nil, http.StatusServiceUnavailable, "cannot open a session right now", "try again shortly")
		return
	}
	c.setCookie(w, r, id, c.cfg.SessionMax)
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// logout ends the session, in the database: the old cookie is worth
// nothing after it. It needs the CSRF token too: another site must not
// be able to log a visitor out either.
func (c *Console) logout(w http.ResponseWriter, r *http.Request) {
	c.action("", func(w http.ResponseWriter, r *http.Request, s *session) (string, error) {
		if err := c.cfg.Keys.CloseConsoleSession(r.Context(), s.id); err != nil {
			return "", err
		}
		c.setCookie(w, r, "", -time.Second)
		return Prefix + "/login", nil
	})(w, r)
}

// safeNext keeps a redirect after login inside the console. The path is
// cleaned before it is checked: /ui/../../evil is /evil, not a console page.
func safeNext(next string) string {
	u, err := url.Parse(next)
	if err != nil || len(next) > 1024 || u.Scheme != "" || u.Host != "" || u.User != nil ||
		strings.Contains(next, `\`) || strings.HasPrefix(next, "//") {
		return Prefix + "/jobs"
	}
	clean := path.Clean(u.Path)
	if !strings.HasPrefix(clean, Prefix+"/") {
		return Prefix + "/jobs"
	}
	out := &url.URL{Path: clean, RawQuery: u.RawQuery}
	return out.RequestURI()
}

// sameOrigin refuses a POST that a browser says came from another site:
// the Origin header when sent (browsers send it with every form POST),
// else Sec-Fetch-Site. SameSite=Strict keeps the cookie off such requests
// already; this also covers the login form, which has no cookie yet.
func sameOrigin(r *http.Request) bool {
	if o := r.Header.Get("Origin"); o != "" {
		u, err := url.Parse(o)
		return err == nil && u.Host == r.Host
	}
	site := r.Header.Get("Sec-Fetch-Site")
	return site == "" || site == "same-origin" || site == "none"
}

// page serves a page to a logged-in visitor and sends others to the
// login form.
func (c *Console) page(h func(http.ResponseWriter, *http.Request, *session)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s, err := c.session(r)
		switch {
		case errors.Is(err, errNoSession):
			http.Redirect(w, r, Prefix+"/login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
			return
		case err != nil:
			c.cfg.Logger.ErrorContext(r.Context(), "console: error reading a session", "error", err)
			c.problem(w, r, nil, http.StatusServiceUnavailable, "cannot check the key right now", "try again shortly")
			return
		}
		h(w, r, s)
	}
}

// action runs a state-changing form post: same origin, a live session, the
// session's CSRF token, and a key with scope ("" for logout); then h, whose
// answer is the page to go back to. The API checks the scope again.
func (c *Console) action(scope string, h func(http.ResponseWriter, *http.Request, *session) (string, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, maxForm)
		if !sameOrigin(r) {
			c.problem(w, r, nil, http.StatusForbidden, "cross-origin request refused", "the form was not posted from this console")
			return
		}
		s, err := c.session(r)
		if err != nil {
			c.problem(w, r, nil, http.StatusUnauthorized, "not logged in", "log in with an API key first")
			return
		}
		if err := r.ParseForm(); err != nil {
			c.problem(w, r, s, http.StatusRequestEntityTooLarge, "unreadable form", "a form is at most 128 KiB")
			return
		}
		if !hmac.Equal([]byte(r.PostForm.Get(csrfField)), []byte(s.csrf)) {
			c.problem(w, r, s, http.StatusForbidden, "missing or wrong CSRF token", "reload the page and try again")
			return
		}
		if scope != "" && !s.can(scope) {
			c.problem(w, r, s, http.StatusForbidden, "not allowed",
				"API key "+s.key.Name+" lacks scope "+scope+" (it has "+strings.Join(s.key.Scopes, ", ")+")")
			return
		}
		to, err := h(w, r, s)
		if err != nil {
			c.fail(w, r, s, err)
			return
		}
		http.Redirect(w, r, to, http.StatusSeeOther)
	}
}
