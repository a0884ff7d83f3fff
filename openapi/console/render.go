package console

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"reflect"
	"strings"
	"time"
)

// pageNames are the templates under templates/, each rendered inside
// layout.html.
var pageNames = []string{"home", "login", "problem", "jobs", "job", "executions", "execution", "agents", "classes", "cron"}

func parsePages() (map[string]*template.Template, error) {
	pages := map[string]*template.Template{}
	for _, name := range pageNames {
		t, err := template.New(name).Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/"+name+".html")
		if err != nil {
			return nil, fmt.Errorf("console: template %s: %w", name, err)
		}
		pages[name] = t
	}
	return pages, nil
}

// view is what every page template gets.
type view struct {
	Title   string
	Session *session
	Data    any
	// Done is the action just done, shown once (from ?done=).
	Done string
}

// Can reports whether the visitor may do what scope allows: the page
// shows the actions of those scopes only.
func (v view) Can(scope string) bool { return v.Session != nil && v.Session.can(scope) }

// CSRF is the token the page's forms carry.
func (v view) CSRF() string {
	if v.Session == nil {
		return ""
	}
	return v.Session.csrf
}

// KeyName names the visitor's key, with its scopes.
func (v view) KeyName() string {
	if v.Session == nil {
		return ""
	}
	return v.Session.key.Name + " (" + strings.Join(v.Session.key.Scopes, ", ") + ")"
}

// doneMessages are the notes an action leaves for the page it returns to;
// anything else in ?done= is ignored.
var doneMessages = map[string]string{
	"paused": "Job paused.", "resumed": "Job resumed.", "triggered": "Run started.", "deleted": "Job deleted.",
	"cancelled": "Cancel requested.", "redelivered": "Callback redelivery started.", "drained": "Agent drained.",
	"rerun": "Re-run started.", "updated": "Job saved.",
	"agent-resumed": "Agent resumed.", "degraded": "Class degraded.", "restored": "Class restored.",
}

func (c *Console) render(w http.ResponseWriter, r *http.Request, s *session, status int, page, title string, data any) {
	var buf bytes.Buffer
	v := view{Title: title, Session: s, Data: data, Done: doneMessages[r.URL.Query().Get("done")]}
	if err := c.pages[page].ExecuteTemplate(&buf, "layout", v); err != nil {
		c.cfg.Logger.ErrorContext(r.Context(), "console: error rendering", "page", page, "error", err)
		http.Error(w, "error rendering the page", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// problemView is an error page: the API's problem (RFC 9457) or the
// console's own, in HTML with the same status.
type problemView struct {
	Status        int
	Title, Detail string
	Errors        []string
}

func (c *Console) problem(w http.ResponseWriter, r *http.Request, s *session, status int, title, detail string) {
	c.render(w, r, s, status, "problem", title, problemView{Status: status, Title: title, Detail: detail})
}

// fail shows err: an API problem as it came, anything else as a 500.
func (c *Console) fail(w http.ResponseWriter, r *http.Request, s *session, err error) {
	var p *apiProblem
	if errors.As(err, &p) {
		c.render(w, r, s, p.Status, "problem", p.Title, problemView{Status: p.Status, Title: p.Title, Detail: p.Detail, Errors: p.Errors})
		return
	}
	c.cfg.Logger.ErrorContext(r.Context(), "console: error calling the API", "error", err)
	c.problem(w, r, s, http.StatusInternalServerError, "internal error", "the error was logged")
}

// apiProblem is an API answer that was not a success.
type apiProblem struct {
	Status        int
	Title, Detail string
	Errors        []string
}

func (p *apiProblem) Error() string {
	return fmt.Sprintf("API answered %d: %s: %s", p.Status, p.Title, p.Detail)
}

// check turns an in-process API answer into an error unless it succeeded.
func check(res *http.Response, body []byte, err error) error {
	if err != nil {
		return err
	}
	if res.StatusCode < 300 {
		return nil
	}
	var doc struct {
		Title, Detail string
		Errors        []struct{ Location, Message string }
	}
	_ = json.Unmarshal(body, &doc)
	p := &apiProblem{Status: res.StatusCode, Title: doc.Title, Detail: doc.Detail}
	if p.Title == "" {
		p.Title = http.StatusText(res.StatusCode)
	}
	for _, e := range doc.Errors {
		p.Errors = append(p.Errors, strings.TrimSpace(e.Location+" "+e.Message))
	}
	return p
}

var funcs = template.FuncMap{
	"ts":    formatTime,
	"at":    localTime,
	"val":   deref,
	"list":  listOf,
	"pct":   func(f float64) string { return fmt.Sprintf("%.0f%%", f*100) },
	"dur":   duration,
	"short": func(s fmt.Stringer) string { return shortID(s.String()) },
}

// formatTime shows an instant in UTC; "—" for none.
func formatTime(v any) string {
	t, ok := timeOf(v)
	if !ok {
		return "—"
	}
	return t.UTC().Format("2006-01-02 15:04:05Z")
}

// localTime shows an instant in zone (an IANA name; UTC when unknown)
// with the instant in UTC on hover, as a <time> element.
func localTime(v any, zone string) template.HTML {
	t, ok := timeOf(v)
	if !ok {
		return "—"
	}
	loc := zoneOf(zone)
	utc := t.UTC().Format("2006-01-02 15:04:05Z")
	return template.HTML(`<time datetime="` + t.UTC().Format(time.RFC3339Nano) + `" title="` + utc + ` (UTC)">` + //nolint:gosec // formatted times only
		template.HTMLEscapeString(t.In(loc).Format("2006-01-02 15:04:05 MST")) + `</time>`)
}

// zoneOf loads an IANA timezone, UTC when it is none or unknown.
func zoneOf(name string) *time.Location {
	if loc, err := time.LoadLocation(name); err == nil && name != "" {
		return loc
	}
	return time.UTC
}

func timeOf(v any) (time.Time, bool) {
	switch t := v.(type) {
	case time.Time:
		return t, !t.IsZero()
	case *time.Time:
		if t != nil && !t.IsZero() {
			return *t, true
		}
	}
	return time.Time{}, false
}

// deref shows what a pointer points to, "" for nil.
func deref(v any) any {
	rv := reflect.ValueOf(v)
	for rv.IsValid() && rv.Kind() == reflect.Pointer {
		if rv.IsNil() {
			return ""
		}
		rv = rv.Elem()
	}
	if !rv.IsValid() {
		return ""
	}
	return rv.Interface()
}

// listOf is the slice a pointer points to, or none: for range.
func listOf(v any) any {
	rv := reflect.ValueOf(v)
	if !rv.IsValid() || (rv.Kind() == reflect.Pointer && rv.IsNil()) {
		return []any{}
	}
	return reflect.Indirect(rv).Interface()
}

// duration is how long from start to end, or to now while running.
func duration(start, end *time.Time) string {
	if start == nil {
		return "—"
	}
	if end == nil {
		return time.Since(*start).Round(time.Second).String() + " so far"
	}
	return end.Sub(*start).Round(time.Millisecond).String()
}

// indentRaw indents a JSON document as it came, numbers untouched.
func indentRaw(raw []byte) string {
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, "", "  "); err != nil {
		return string(raw)
	}
	return buf.String()
}

// rawField is one field of a JSON object as it came, numbers untouched.
func rawField(raw []byte, name string) string {
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(raw, &doc); err != nil {
		return ""
	}
	return string(doc[name])
}

// shortID is the last 12 characters of an id, enough to tell runs apart.
func shortID(id string) string {
	if len(id) <= 12 {
		return id
	}
	return "…" + id[len(id)-12:]
}
