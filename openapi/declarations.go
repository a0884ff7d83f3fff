package openapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"

	"github.com/ax-scheduler/ax/queue"
	"github.com/ax-scheduler/ax/queue/axtype"
)

// Bounds of one declaration: a set may hold up to maxDeclaredJobs jobs,
// all in one request of at most declarationBodyLimit bytes.
const (
	maxDeclaredJobs      = 1000
	declarationBodyLimit = 8 << 20
)

// Declaration is a set of jobs declared in one place, applied as a whole.
type Declaration struct {
	ManagedBy string `json:"managed_by" minLength:"1" maxLength:"200" pattern:"^[A-Za-z0-9][A-Za-z0-9_.:/@+-]*$" example:"sdk:billing-agent" doc:"Name of the declaration set: the agent SDK uses sdk:<program>, ax apply file:<file name>. Its jobs get managed_by, and the API refuses to change them unless forced"`
	Version   string `json:"version,omitempty" maxLength:"100" example:"1.4.2" doc:"Version of the declaration. Versions compare in natural order (digit runs by number: 1.10 is newer than 1.9; no version is older than any): a declaration older than the set's version is refused (409, counted in ax_declaration_conflicts_total, shown in GET /v1/declarations), so two builds declaring the same jobs do not undo each other in turn; an equal or newer one applies"`
	Source    string `json:"source,omitempty" maxLength:"500" example:"billing-agent on host-7" doc:"Where the jobs are declared; shown when an API change of one of them is refused"`
	Jobs      []Job  `json:"jobs" maxItems:"1000" doc:"The set's jobs, as POST /v1/jobs takes them (read-only fields are ignored), each (group, name) once"`
	Prune     bool   `json:"prune,omitempty" doc:"Pause the set's jobs that jobs leaves out (never deleted; paused_reason says why). The agent SDK always prunes"`
	DryRun    bool   `json:"dry_run,omitempty" doc:"Report what would change, change nothing"`
	Force     bool   `json:"force,omitempty" doc:"Apply an older version, and take over jobs that another set manages"`
	Adopt     bool   `json:"adopt,omitempty" doc:"Take over declared jobs that exist already and no set manages (made through the API or the console); without it they are refused (409)"`
}

// DeclarationReport is what a declaration did (or would do, on a dry
// run), job by job.
type DeclarationReport struct {
	ManagedBy string               `json:"managed_by"`
	Version   string               `json:"version,omitempty"`
	DryRun    bool                 `json:"dry_run"`
	Changed   bool                 `json:"changed" doc:"Whether any job was (or would be) created, updated or paused"`
	Jobs      []DeclaredJobOutcome `json:"jobs" doc:"The declared jobs in their order, then the set's jobs the declaration left out"`
	Counts    map[string]int       `json:"counts" doc:"Jobs by action"`
}

// DeclaredJobOutcome is what a declaration did to one job.
type DeclaredJobOutcome struct {
	Index   int      `json:"index" doc:"The job's index in jobs; -1 for a job of the set that the declaration left out"`
	ID      string   `json:"id" format:"uuid"`
	Group   string   `json:"group"`
	Name    string   `json:"name"`
	Action  string   `json:"action" enum:"created,updated,unchanged,paused,conflict"`
	Changes []string `json:"changes,omitempty" example:"[\"trigger.interval_seconds: 60 → 30\"]" doc:"What changed, field by field (path: old → new, + path: new, - path: old)"`
	Reason  string   `json:"reason,omitempty" doc:"Why a job was paused, resumed, taken over or refused"`
}

// DeclarationSetSummary is the state of a declaration set.
type DeclarationSetSummary struct {
	ManagedBy string               `json:"managed_by"`
	Version   string               `json:"version,omitempty" doc:"Version the set was last applied at"`
	Source    string               `json:"source,omitempty"`
	Jobs      int                  `json:"jobs" doc:"Jobs in the last applied declaration"`
	AppliedAt time.Time            `json:"applied_at"`
	Conflict  *DeclarationConflict `json:"conflict,omitempty" doc:"The last declaration of the set that was refused"`
}

// DeclarationConflict is a refused declaration.
type DeclarationConflict struct {
	Version string    `json:"version,omitempty"`
	Source  string    `json:"source,omitempty"`
	Reason  string    `json:"reason"`
	At      time.Time `json:"at"`
}

type declarationInput struct {
	Body Declaration
}

type declarationOutput struct {
	Body DeclarationReport
}

type declarationSetsOutput struct {
	Body struct {
		Sets []DeclarationSetSummary `json:"sets"`
	}
}

type declarationHandlers struct {
	decls *queue.DeclarationService
	urls  *urlChecker
	guard groupGuard
}

func (h *declarationHandlers) register(api huma.API) {
	tags := []string{"Declarations"}
	register(api, requireScope(huma.Operation{
		OperationID: "declare-jobs", Method: http.MethodPost, Path: "/v1/declarations", Tags: tags,
		Summary: "Declare a set of jobs", MaxBodyBytes: declarationBodyLimit, BodyReadTimeout: largeBodyReadTimeout,
		Description: "Creates, updates and (with prune) pauses the jobs of a declaration set in one transaction, " +
			"matching jobs by group and name; an unchanged job is not written. Each job is validated as POST /v1/jobs " +
			"validates it (errors name body.jobs[i]…). A declaration older than the set's version, or naming jobs " +
			"another set manages, is refused as a whole (409) unless forced. A set belongs to the groups of the key that " +
			"first applied it (all groups, for a key limited to none): a key limited to groups that does not hold all of them " +
			"and all groups of the set's jobs is refused (403) and changes nothing. The agent SDK and ax apply call it.",
		Errors: []int{http.StatusForbidden, http.StatusConflict, http.StatusUnprocessableEntity},
	}, ScopeSubmit), h.declare)
	register(api, requireScope(huma.Operation{
		OperationID: "list-declarations", Method: http.MethodGet, Path: "/v1/declarations", Tags: tags,
		Summary: "List declaration sets",
		Description: "Each set's version, source and job count, and the last declaration of it that was refused. " +
			"A key limited to groups sees only the sets it may change: owned by its groups, with jobs only in them.",
	}, ScopeRead), h.list)
}

func (h *declarationHandlers) declare(ctx context.Context, in *declarationInput) (*declarationOutput, error) {
	d, err := h.declaration(ctx, &in.Body)
	if err != nil {
		return nil, err
	}
	res, err := h.decls.Apply(ctx, d)
	if err != nil {
		return nil, declarationError(err, &in.Body)
	}
	report, err := declarationReport(res)
	if err != nil {
		return nil, err
	}
	return &declarationOutput{Body: *report}, nil
}

// declaration checks what the schema and Job.Resolve cannot (outbound
// URLs, the key's groups, a job declared twice) and maps the jobs.
func (h *declarationHandlers) declaration(ctx context.Context, in *Declaration) (*queue.Declaration, error) {
	d := &queue.Declaration{ManagedBy: in.ManagedBy, Version: in.Version, Source: in.Source, Prune: in.Prune,
		DryRun: in.DryRun, Force: in.Force, Adopt: in.Adopt, Groups: keyGroups(ctx), Jobs: make([]*axtype.Job, len(in.Jobs))}
	var errs fieldErrors
	seen := make(map[axtype.JobKey]int, len(in.Jobs))
	urls := h.urls.checks(ctx) // each URL once, all within urlCheckTime
	defer urls.done()
	var all []string
	for i := range in.Jobs {
		all = append(all, checkedURLs(&in.Jobs[i])...)
	}
	awayWhile(ctx, func() { urls.prefetch(all) }) // name lookups, up to urlCheckTime
	for i := range in.Jobs {
		j := &in.Jobs[i]
		at := fmt.Sprintf("body.jobs[%d].", i)
		errs = append(errs, urls.problems(j, at)...)
		def, err := jobToDB(j, uuid.Nil)
		if err != nil {
			return nil, err
		}
		if !allows(ctx, def.Group) {
			errs.add(at+"group", "is not one of the key's groups", def.Group)
		}
		errs = append(errs, upstreamProblems(ctx, def, at)...)
		classErrs, err := h.guard.classProblems(ctx, def.RateLimitClass, at+"rate_limit_class")
		if err != nil {
			return nil, err
		}
		errs = append(errs, classErrs...)
		key := axtype.JobKey{Group: def.Group, Name: def.Name}
		if first, dup := seen[key]; dup {
			errs.add(at+"name", fmt.Sprintf("is declared twice in group %q (also jobs[%d])", def.Group, first), def.Name)
		}
		seen[key] = i
		d.Jobs[i] = def
	}
	if len(errs) > 0 {
		return nil, huma.Error422UnprocessableEntity("the declaration has invalid jobs", errs...)
	}
	return d, nil
}

// declarationError turns the service's refusals into problems naming the
// field: body.version for an older version, body.jobs[i] for a job.
func declarationError(err error, in *Declaration) error {
	var conflict *queue.DeclarationConflictError
	var jobErr *queue.DeclarationJobError
	var forbidden *queue.DeclarationForbiddenError
	switch {
	case errors.As(err, &forbidden):
		return huma.Error403Forbidden(forbidden.Error(),
			&huma.ErrorDetail{Location: "body.managed_by", Message: "belongs to other job groups", Value: in.ManagedBy})
	case errors.As(err, &conflict) && conflict.Older:
		return huma.Error409Conflict(conflict.Error()+": declare a newer version, or force it",
			&huma.ErrorDetail{Location: "body.version", Message: "is older than the set's version " +
				quoteVersion(conflict.SetVersion), Value: in.Version})
	case errors.As(err, &conflict):
		details := make([]error, len(conflict.Jobs))
		for i, j := range conflict.Jobs {
			msg := "is managed by " + j.Old.ManagedBy + ": " + j.Reason + "; force takes it over"
			if j.Old.ManagedBy == "" {
				msg = "is not managed by any declaration set: " + j.Reason + "; adopt takes it over"
			}
			details[i] = &huma.ErrorDetail{Location: fmt.Sprintf("body.jobs[%d].name", j.Index), Message: msg, Value: j.Old.Name}
		}
		return huma.Error409Conflict(conflict.Error(), details...)
	case errors.As(err, &jobErr) && jobErr.Index >= 0 && jobErr.Index < len(in.Jobs):
		return jobErrorAt(jobErr.Err, &in.Jobs[jobErr.Index], fmt.Sprintf("body.jobs[%d].", jobErr.Index))
	}
	return err
}

func quoteVersion(v string) string {
	if v == "" {
		return "(none)"
	}
	return fmt.Sprintf("%q", v)
}

func declarationReport(res *queue.DeclarationResult) (*DeclarationReport, error) {
	out := &DeclarationReport{ManagedBy: res.ManagedBy, Version: res.Version, DryRun: res.DryRun,
		Changed: res.Changed(), Jobs: make([]DeclaredJobOutcome, 0, len(res.Jobs)), Counts: map[string]int{}}
	for _, j := range res.Jobs {
		o := DeclaredJobOutcome{Index: j.Index, ID: j.New.ID.String(), Group: j.New.Group, Name: j.New.Name,
			Action: string(j.Action), Reason: j.Reason}
		if j.Action == queue.DeclarationUpdated || j.Action == queue.DeclarationPaused {
			changes, err := jobChanges(j.Old, j.New)
			if err != nil {
				return nil, err
			}
			o.Changes = changes
		}
		out.Counts[o.Action]++
		out.Jobs = append(out.Jobs, o)
	}
	return out, nil
}

func (h *declarationHandlers) list(ctx context.Context, _ *struct{}) (*declarationSetsOutput, error) {
	sets, err := h.decls.Sets(ctx, keyGroups(ctx))
	if err != nil {
		return nil, err
	}
	out := &declarationSetsOutput{}
	out.Body.Sets = make([]DeclarationSetSummary, len(sets))
	for i, s := range sets {
		out.Body.Sets[i] = declarationSetFromDB(s)
	}
	return out, nil
}

func declarationSetFromDB(s *axtype.DeclarationSet) DeclarationSetSummary {
	out := DeclarationSetSummary{ManagedBy: s.ManagedBy, Version: s.Version, Source: s.Source, Jobs: s.Jobs,
		AppliedAt: s.AppliedAt}
	if c := s.Conflict; c != nil {
		out.Conflict = &DeclarationConflict{Version: c.Version, Source: c.Source, Reason: c.Reason, At: c.At}
	}
	return out
}

// jobChanges lists what differs between two states of a job, field by
// field in the API's terms: its definition, and whether it is paused.
func jobChanges(old, new *axtype.Job) ([]string, error) {
	a, err := definitionFields(old)
	if err != nil {
		return nil, err
	}
	b, err := definitionFields(new)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, k := range slices.Sorted(maps.Keys(mergeKeys(a, b))) {
		va, inA := a[k]
		vb, inB := b[k]
		switch {
		case !inA:
			out = append(out, "+ "+k+": "+vb)
		case !inB:
			out = append(out, "- "+k+": "+va)
		case va != vb:
			out = append(out, k+": "+va+" → "+vb)
		}
	}
	return append(out, writeOnlyChanges(old, new)...), nil
}

// writeOnlyChanges names the write-only values that changed where the
// redacted diff shows none, without showing them.
func writeOnlyChanges(old, new *axtype.Job) []string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(new.Executor.Headers)) {
		if ov, ok := old.Executor.Headers[k]; ok && ov != new.Executor.Headers[k] {
			out = append(out, "executor.headers."+k+": "+queue.Redacted+" changed")
		}
	}
	for field, urls := range map[string][2]string{"executor.url": {old.Executor.URL, new.Executor.URL},
		"callback.url": {old.CallbackURL, new.CallbackURL}} {
		if urls[0] != urls[1] && queue.RedactURL(urls[0]) == queue.RedactURL(urls[1]) {
			out = append(out, field+": a write-only query value changed")
		}
	}
	slices.Sort(out)
	return out
}

func mergeKeys(a, b map[string]string) map[string]struct{} {
	out := make(map[string]struct{}, len(a)+len(b))
	for k := range a {
		out[k] = struct{}{}
	}
	for k := range b {
		out[k] = struct{}{}
	}
	return out
}

// readOnlyJobFields are the Job fields a declaration does not set, which
// a diff leaves out; paused stays in, as a declaration pauses and resumes.
var readOnlyJobFields = func() map[string]bool {
	out := map[string]bool{}
	t := reflect.TypeFor[Job]()
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if f.Tag.Get("readOnly") == "true" && name != "paused" {
			out[name] = true
		}
	}
	return out
}()

// definitionFields flattens a job's definition to path → JSON value.
func definitionFields(j *axtype.Job) (map[string]string, error) {
	api, err := jobFromDB(j)
	if err != nil {
		return nil, err
	}
	raw, err := json.Marshal(api)
	if err != nil {
		return nil, fmt.Errorf("error encoding job %s: %w", j.ID, err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var doc map[string]any
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("error decoding job %s: %w", j.ID, err)
	}
	for k := range doc {
		if readOnlyJobFields[k] {
			delete(doc, k)
		}
	}
	out := map[string]string{}
	flatten("", doc, out)
	return out, nil
}

// flatten writes the leaves of v under prefix: objects by key, arrays
// and scalars whole (shards.params: [...] reads better than one line per
// shard).
func flatten(prefix string, v any, out map[string]string) {
	if m, ok := v.(map[string]any); ok && len(m) > 0 {
		for k, sub := range m {
			path := k
			if prefix != "" {
				path = prefix + "." + k
			}
			flatten(path, sub, out)
		}
		return
	}
	b, _ := json.Marshal(v)
	if string(b) == "{}" || string(b) == "null" || string(b) == `""` {
		return // absent and empty read the same
	}
	out[prefix] = string(b)
}
