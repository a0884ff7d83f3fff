package dispatch

import (
	"fmt"
	"strings"
	"sync"
	"text/template"

	"github.com/ax-scheduler/ax/queue/axtype"
	"github.com/ax-scheduler/ax/queue/jobtemplate"
)

// A concurrency key is a template like a route key (same data, same
// subset: .params, .shard, .job), rendered once per task when its run is
// made and stored on the task; at most axtype.MaxConcurrencyKeyBytes.

// ParseConcurrencyKey reports whether key is a valid concurrency key
// template.
func ParseConcurrencyKey(key string) error {
	_, err := parseConcurrencyKey(key)
	return err
}

// concurrencyKeyTemplates caches parsed templates by text.
var concurrencyKeyTemplates sync.Map // string → *template.Template

func parseConcurrencyKey(key string) (*template.Template, error) {
	if t, ok := concurrencyKeyTemplates.Load(key); ok {
		return t.(*template.Template), nil
	}
	t, err := jobtemplate.ConcurrencyKey.Parse(key)
	if err != nil {
		return nil, err
	}
	concurrencyKeyTemplates.Store(key, t)
	return t, nil
}

// renderConcurrencyKeys renders the concurrency key of every task that
// has one: into ConcurrencyKey, or the reason into ConcurrencyError (a
// missing param, an empty or too long key): such a task is written
// failed, since it could not be held to a limit.
func renderConcurrencyKeys(tasks []*axtype.NewTask) {
	params := runParams{}
	for _, t := range tasks {
		if t.ConcurrencyTemplate == "" {
			continue
		}
		key, err := renderConcurrencyKey(t, params)
		switch {
		case err != nil:
			t.ConcurrencyError = err.Error()
		case key == "":
			t.ConcurrencyError = fmt.Sprintf("concurrency key %q rendered empty", t.ConcurrencyTemplate)
		case len(key) > axtype.MaxConcurrencyKeyBytes:
			t.ConcurrencyError = fmt.Sprintf("concurrency key %q renders to more than %d bytes",
				t.ConcurrencyTemplate, axtype.MaxConcurrencyKeyBytes)
		default:
			t.ConcurrencyKey = key
		}
	}
}

func renderConcurrencyKey(t *axtype.NewTask, params runParams) (string, error) {
	if !strings.Contains(t.ConcurrencyTemplate, "{{") {
		return t.ConcurrencyTemplate, nil
	}
	tmpl, err := parseConcurrencyKey(t.ConcurrencyTemplate)
	if err != nil {
		return "", fmt.Errorf("concurrency key %q: %w", t.ConcurrencyTemplate, err)
	}
	p, err := params.of(t)
	if err != nil {
		return "", err
	}
	data := map[string]any{
		"params": p,
		"shard":  map[string]any{"index": t.ShardIndex, "total": t.ShardTotal, "param": t.ShardParam},
		"job":    map[string]any{"id": t.JobID.String(), "name": t.JobName, "group": t.JobGroup},
	}
	out, err := jobtemplate.ConcurrencyKey.Execute(tmpl, data)
	if err != nil {
		return "", fmt.Errorf("concurrency key %q: %w", t.ConcurrencyTemplate, err)
	}
	return string(out), nil
}
