package dispatch

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"text/template"

	"github.com/ax-scheduler/ax/queue/jobtemplate"
)

// A route key is a text/template over the task: .params (the run's
// params), .shard (.index, .total, .param) and .job (.id, .name, .group),
// e.g. "customer_id={{.params.customer_id}}". Missing params render as
// "<no value>" would hide mistakes, so they are errors instead. It keeps
// to the bounded subset of job templates (package jobtemplate).

// ParseRouteKey reports whether key is a valid route key template.
func ParseRouteKey(key string) error {
	_, err := parseRouteKey(key)
	return err
}

// routeKeyTemplates caches parsed templates: a job fires many times with
// the same key.
var routeKeyTemplates sync.Map // string → *template.Template

func parseRouteKey(key string) (*template.Template, error) {
	if t, ok := routeKeyTemplates.Load(key); ok {
		return t.(*template.Template), nil
	}
	t, err := jobtemplate.RouteKey.Parse(key)
	if err != nil {
		return nil, err
	}
	routeKeyTemplates.Store(key, t)
	return t, nil
}

// routeKeyInput is what a route key template sees.
type routeKeyInput struct {
	JobID, JobName, JobGroup string
	Params                   json.RawMessage
	ShardIndex, ShardTotal   int
	ShardParam               string
}

// renderRouteKey expands key for one task. A key without "{{" is used as
// it is, without decoding the params.
func renderRouteKey(key string, in *routeKeyInput) (string, error) {
	if !strings.Contains(key, "{{") {
		return key, nil
	}
	t, err := parseRouteKey(key)
	if err != nil {
		return "", err
	}
	params := map[string]any{}
	if len(in.Params) > 0 {
		dec := json.NewDecoder(bytes.NewReader(in.Params))
		dec.UseNumber() // customer ids stay exact, not float64
		if err := dec.Decode(&params); err != nil {
			return "", fmt.Errorf("error decoding params: %w", err)
		}
	}
	data := map[string]any{
		"params": params,
		"shard":  map[string]any{"index": in.ShardIndex, "total": in.ShardTotal, "param": in.ShardParam},
		"job":    map[string]any{"id": in.JobID, "name": in.JobName, "group": in.JobGroup},
	}
	out, err := jobtemplate.RouteKey.Execute(t, data)
	if err != nil {
		return "", fmt.Errorf("route key %q: %w", key, err)
	}
	return string(out), nil
}
