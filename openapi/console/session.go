package console

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/http"
	"net/url"
	"path"
	"strings"
	"time"

	"github.com/ax-scheduler/ax/db"
	"github.com/ax-scheduler/ax/openapi"
	"github.com/ax-scheduler/ax/queue"
)

// The session is the API key itself, in a cookie scripts cannot read
// (HttpOnly), that no other site's request carries (SameSite=Strict), and
// that only the console's paths receive (Path=/ui); Secure over TLS. It is
// checked against the key table on every request, so a revoked key logs
// its console sessions out at once. ax keeps no session state, so any
// replica serves any visitor.
const (
	cookieName = "ax_console"
	// cookieMaxAge ends a console session after a working day.
	cookieMaxAge = 12 * time.Hour
	// maxKeyLen bounds a posted or cookie key: ax keys are 46 bytes.
	maxKeyLen = 512
	// maxForm bounds a posted form: trigger params are the largest field.
	maxForm = 128 << 10
	// csrfField is the hidden field every state-changing form carries.
	csrfField = "csrf"
)

var errNoSession = errors.New("not logged in")

// session is a logged-in visitor.
type session struct {
	secret string
	key    *db.APIKey
	csrf   string
}

// can reports whether the session's key may do what scope allows.
func (s *session) can(scope string) bool { return openapi.Grants(s.key.Scopes, scope) }

// auth puts the session's key on an in-process API request.
func (s *session) auth(_ context.Context, req *http.Request) error {
	req.Header.Set("Authorization", "Bearer "+s.secret)
	return nil
}

// csrfToken is the token of the session holding secret: an HMAC of a
// fixed label keyed with the key itself, so a page of another origin,
// which cannot read the cookie, cannot make one, and every replica
// computes the same without shared state.
func csrfToken(secret string) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte("ax console csrf v1"))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// authenticate returns the live key whose secret this is.
func (c *Console) authenticate(ctx context.Context, secret string) (*db.APIKey, error) {
	if secret == "" || len(secret) > maxKeyLen {
		return nil, db.ErrNotFound
	}
	return c.cfg.Keys.Authenticate(ctx, sha256.Sum256([]byte(secret)))
}

// session reads the visitor's session from the cookie.
func (c *Console) session(r *http.Request) (*session, error) {
	ck, err := r.Cookie(cookieName)
	if err != nil {
		return nil, errNoSession
	}
	key, err := c.authenticate(r.Context(), ck.Value)
	switch {
	case errors.Is(err, db.ErrNotFound):
		return nil, errNoSession
	case err != nil:
		return nil, err
	case !openapi.Grants(key.Scopes, queue.ScopeRead):
		return nil, errNoSession
	}
	return &session{secret: ck.Value, key: key, csrf: csrfToken(ck.Value)}, nil
}

func setCookie(w http.ResponseWriter, r *http.Request, value string, maxAge time.Duration) {
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: value, Path: Prefix, MaxAge: int(maxAge / time.Second),
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
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
	case errors.Is(err, db.ErrNotFound):
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
	setCookie(w, r, secret, cookieMaxAge)
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// logout ends the session. It needs the CSRF token too: another site must
// not be able to log a visitor out either.
func (c *Console) logout(w http.ResponseWriter, r *http.Request) {
	c.action("", func(w http.ResponseWriter, r *http.Request, _ *session) (string, error) {
		setCookie(w, r, "", -time.Second)
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
