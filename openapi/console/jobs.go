package console

import (
	"context"
	"encoding/json"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/google/uuid"

	"github.com/ax-scheduler/ax/openapi/client"

	"github.com/ax-scheduler/ax/queue/axtype"
)

// Bounds of the jobs list: it filters by name and label itself, over at
// most maxScan jobs, and shows at most maxRows.
const (
	maxScan      = 2000
	maxRows      = 100
	maxFilterLen = 200
	// recentRuns is how many of a job's latest runs its success rate is of.
	recentRuns = 20
	// maxParams bounds the params of a run triggered from the console.
	maxParams = 64 << 10
)

// jobsFilter is the jobs list's query: q (part of the name), group and
// owner (exact), state (active, paused), label (key=value of its target
// labels), last (the state of its last run).
type jobsFilter struct {
	Q, Group, Owner, State, Label, Last string
}

var jobStates = []string{"active", "paused"}

// runStates are the states of an execution, for filters, and "scheduled"
// for the delayed runs that have not come due.
var runStates = []string{"scheduled", string(axtype.ExecutionPending), string(axtype.ExecutionRunning),
	string(axtype.ExecutionSucceeded), string(axtype.ExecutionFailed), string(axtype.ExecutionTimedOut),
	string(axtype.ExecutionCancelled)}

func readJobsFilter(q url.Values) (jobsFilter, error) {
	f := jobsFilter{Q: q.Get("q"), Group: q.Get("group"), Owner: q.Get("owner"), State: q.Get("state"),
		Label: q.Get("label"), Last: q.Get("last")}
	for name, v := range map[string]string{"q": f.Q, "group": f.Group, "owner": f.Owner, "label": f.Label} {
		if len(v) > maxFilterLen {
			return f, fmt.Errorf("%s: at most %d characters", name, maxFilterLen)
		}
	}
	if f.State != "" && !slices.Contains(jobStates, f.State) {
		return f, fmt.Errorf("state: one of %s", strings.Join(jobStates, ", "))
	}
	if f.Last != "" && !slices.Contains(runStates, f.Last) {
		return f, fmt.Errorf("last: one of %s", strings.Join(runStates, ", "))
	}
	if f.Label != "" && !strings.Contains(f.Label, "=") {
		return f, fmt.Errorf("label: key=value")
	}
	return f, nil
}

// matches applies the filters the API has not.
func (f jobsFilter) matches(j client.Job) bool {
	if f.Q != "" && !strings.Contains(strings.ToLower(j.Name), strings.ToLower(f.Q)) {
		return false
	}
	if f.Last != "" && val(j.LastState) != f.Last {
		return false
	}
	if f.Label != "" {
		k, v, _ := strings.Cut(f.Label, "=")
		if j.Target == nil || j.Target.Labels == nil || (*j.Target.Labels)[k] != v {
			return false
		}
	}
	return true
}

// jobRow is a job as the console shows it: its trigger in words, its next
// fires, and how its latest runs went.
type jobRow struct {
	Job         client.Job
	Trigger     string
	Timezone    string
	Fires       []client.CronFire
	SuccessRate string
}

type jobsView struct {
	Filter    jobsFilter
	Rows      []jobRow
	Truncated bool
	JobStates []string
	RunStates []string
}

func (c *Console) jobs(w http.ResponseWriter, r *http.Request, s *session) {
	f, err := readJobsFilter(r.URL.Query())
	if err != nil {
		c.problem(w, r, s, http.StatusUnprocessableEntity, "invalid filter", err.Error())
		return
	}
	found, truncated, err := c.findJobs(r.Context(), s, f)
	if err != nil {
		c.fail(w, r, s, err)
		return
	}
	v := jobsView{Filter: f, Truncated: truncated, JobStates: jobStates, RunStates: runStates}
	for _, j := range found {
		row, err := c.describe(r.Context(), s, j, 5)
		if err != nil {
			c.fail(w, r, s, err)
			return
		}
		v.Rows = append(v.Rows, row)
	}
	c.render(w, r, s, http.StatusOK, "jobs", "Jobs", v)
}

// findJobs pages through the API's job list with the filters it takes and
// applies the others.
func (c *Console) findJobs(ctx context.Context, s *session, f jobsFilter) ([]client.Job, bool, error) {
	p := &client.ListJobsParams{Limit: ptr(int64(500))}
	if f.Group != "" {
		p.Group = &f.Group
	}
	if f.Owner != "" {
		p.Owner = &f.Owner
	}
	if f.State != "" {
		paused := client.ListJobsParamsPaused(strconv.FormatBool(f.State == "paused"))
		p.Paused = &paused
	}
	var out []client.Job
	for scanned := 0; scanned < maxScan; {
		res, err := c.api.ListJobsWithResponse(ctx, p, s.auth)
		if err := answer(res, err); err != nil {
			return nil, false, err
		}
		for _, j := range list(res.JSON200.Jobs) {
			if f.matches(j) {
				if len(out) == maxRows {
					return out, true, nil
				}
				out = append(out, j)
			}
		}
		page := len(list(res.JSON200.Jobs))
		scanned += page
		if res.JSON200.NextCursor == nil || page == 0 {
			return out, false, nil
		}
		p.Cursor = res.JSON200.NextCursor
	}
	return out, true, nil
}

// describe puts a job's trigger in words, lists its next fires (cron:
// from the API's cron preview, in its timezone and UTC) and its success
// rate over its latest runs.
func (c *Console) describe(ctx context.Context, s *session, j client.Job, fires int64) (jobRow, error) {
	row := jobRow{Job: j, Timezone: jobZone(j)}
	if j.Triggers != nil && len(*j.Triggers) > 0 {
		if err := c.describeTriggers(ctx, s, &row, *j.Triggers, fires); err != nil {
			return row, err
		}
	} else if t := j.Trigger; t != nil {
		switch t.Kind {
		case "cron":
			row.Trigger = fmt.Sprintf("cron %s in %s", val(t.Cron), row.Timezone)
			if words, ok := cronWords(val(t.Cron), row.Timezone); ok {
				row.Trigger = fmt.Sprintf("%s (cron %s)", words, val(t.Cron))
			}
			tz := row.Timezone
			res, err := c.api.PreviewCronWithResponse(ctx, client.CronPreviewRequest{Cron: t.Cron, Timezone: &tz,
				Count: &fires}, s.auth)
			if err := answer(res, err); err != nil {
				return row, err
			}
			row.Fires = list(res.JSON200.Fires)
		case "interval":
			row.Trigger = intervalWords(val(t.IntervalSeconds))
		case "delay":
			row.Trigger = "once at " + formatTime(t.RunAt)
		default:
			row.Trigger = "only when triggered"
		}
	}
	if j.Paused != nil && *j.Paused {
		row.Trigger += " (paused)"
	}
	res, err := c.api.ListJobExecutionsWithResponse(ctx, *j.Id, &client.ListJobExecutionsParams{Limit: ptr(int64(recentRuns))}, s.auth)
	if err := answer(res, err); err != nil {
		return row, err
	}
	row.SuccessRate = successRate(list(res.JSON200.Executions))
	return row, nil
}

// successRate is the share of ended runs that succeeded; cancelled runs
// and runs still going do not count.
func successRate(execs []client.Execution) string {
	var ok, ended int
	for _, e := range execs {
		switch axtype.ExecutionState(e.State) {
		case axtype.ExecutionSucceeded:
			ok++
			ended++
		case axtype.ExecutionFailed, axtype.ExecutionTimedOut:
			ended++
		}
	}
	if ended == 0 {
		return "—"
	}
	return fmt.Sprintf("%.0f%% of %d", 100*float64(ok)/float64(ended), ended)
}

type jobView struct {
	Row        jobRow
	Executions []client.Execution
	Skipped    []client.SkippedFire
	ExplainAt  string
	Explain    *client.TickExplanation
	ExplainErr string
	Definition string
	// Graph pictures the jobs it runs after and those that run after it
	// ("" when none).
	Graph template.HTML
}

func (c *Console) job(w http.ResponseWriter, r *http.Request, s *session) {
	id, ok := c.pathID(w, r, s)
	if !ok {
		return
	}
	ctx := r.Context()
	res, err := c.api.GetJobWithResponse(ctx, id, s.auth)
	if err := answer(res, err); err != nil {
		c.fail(w, r, s, err)
		return
	}
	row, err := c.describe(ctx, s, *res.JSON200, 5)
	if err != nil {
		c.fail(w, r, s, err)
		return
	}
	v := jobView{Row: row, Definition: indentRaw(res.Body)}
	execs, err := c.api.ListJobExecutionsWithResponse(ctx, id, &client.ListJobExecutionsParams{Limit: ptr(int64(recentRuns))}, s.auth)
	if err := answer(execs, err); err != nil {
		c.fail(w, r, s, err)
		return
	}
	v.Executions = list(execs.JSON200.Executions)
	skipped, err := c.api.ListSkippedFiresWithResponse(ctx, id, &client.ListSkippedFiresParams{Limit: ptr(int64(20))}, s.auth)
	if err := answer(skipped, err); err != nil {
		c.fail(w, r, s, err)
		return
	}
	v.Skipped = list(skipped.JSON200.Skipped)
	graph, err := c.api.GetJobGraphWithResponse(ctx, id, s.auth)
	if err := answer(graph, err); err != nil {
		c.fail(w, r, s, err)
		return
	}
	v.Graph = jobGraph(*graph.JSON200)
	if at := r.URL.Query().Get("explain"); at != "" {
		v.ExplainAt = at
		v.Explain, v.ExplainErr = c.explain(ctx, s, id, at)
	}
	c.render(w, r, s, http.StatusOK, "job", row.Job.Name, v)
}

// explain asks why the job did or did not run at a time; a time the API
// cannot read is shown as the API's reason, not as an error page.
func (c *Console) explain(ctx context.Context, s *session, id uuid.UUID, at string) (*client.TickExplanation, string) {
	if len(at) > 64 {
		return nil, "at most 64 characters: a time such as 2026-03-29T03:00:00"
	}
	res, err := c.api.ExplainTickWithResponse(ctx, id, &client.ExplainTickParams{At: at}, s.auth)
	if err := answer(res, err); err != nil {
		if p, ok := err.(*apiProblem); ok && p.Status < 500 {
			return nil, strings.Join(append([]string{p.Detail}, p.Errors...), "; ")
		}
		return nil, "cannot explain right now"
	}
	return res.JSON200, ""
}

func (c *Console) pauseJob(_ http.ResponseWriter, r *http.Request, s *session) (string, error) {
	id, err := formID(r)
	if err != nil {
		return "", err
	}
	res, err := c.api.PauseJobWithResponse(r.Context(), id, s.auth)
	return jobURL(id, "paused"), answer(res, err)
}

func (c *Console) resumeJob(_ http.ResponseWriter, r *http.Request, s *session) (string, error) {
	id, err := formID(r)
	if err != nil {
		return "", err
	}
	res, err := c.api.ResumeJobWithResponse(r.Context(), id, s.auth)
	return jobURL(id, "resumed"), answer(res, err)
}

// triggerJob runs the job now, with the params of the form (a JSON
// object laid over the job's), and goes to the new execution.
func (c *Console) triggerJob(_ http.ResponseWriter, r *http.Request, s *session) (string, error) {
	id, err := formID(r)
	if err != nil {
		return "", err
	}
	var req client.TriggerRequest
	if raw := strings.TrimSpace(r.PostForm.Get("params")); raw != "" {
		// Numbers stay as written (json.Number): the API keeps params
		// exactly, so the console must not round them on the way.
		params := map[string]any{}
		dec := json.NewDecoder(strings.NewReader(raw))
		dec.UseNumber()
		if len(raw) > maxParams || dec.Decode(&params) != nil || dec.More() {
			return "", &apiProblem{Status: http.StatusUnprocessableEntity, Title: "invalid params",
				Detail: "params: a JSON object of at most 64 KiB", Errors: []string{"form.params is not a JSON object"}}
		}
		req.Params = &params
	}
	res, err := c.api.TriggerJobWithResponse(r.Context(), id, &client.TriggerJobParams{}, req, s.auth)
	if err := answer(res, err); err != nil {
		return "", err
	}
	return Prefix + "/executions/" + res.JSON202.Id.String() + "?done=triggered", nil
}

// deleteJob deletes the job once the form repeats its name; a job
// managed by a declaration set needs force too (its next declaration
// creates it again).
func (c *Console) deleteJob(_ http.ResponseWriter, r *http.Request, s *session) (string, error) {
	id, err := formID(r)
	if err != nil {
		return "", err
	}
	got, err := c.api.GetJobWithResponse(r.Context(), id, s.auth)
	if err := answer(got, err); err != nil {
		return "", err
	}
	if r.PostForm.Get("confirm") != got.JSON200.Name {
		return "", &apiProblem{Status: http.StatusUnprocessableEntity, Title: "not confirmed",
			Detail: "type the job's name to delete it", Errors: []string{"form.confirm is not the job's name"}}
	}
	force := r.PostForm.Get("force") == "on"
	res, err := c.api.DeleteJobWithResponse(r.Context(), id, &client.DeleteJobParams{Force: &force}, s.auth)
	return Prefix + "/jobs?done=deleted", answer(res, err)
}

// editJob replaces the job's definition with the form's JSON, as PUT
// /v1/jobs/{id} takes it (read-only fields are ignored; the API validates
// and names the fields at fault). A job managed by a declaration set is
// refused by the API (409): its code or file is where it changes.
func (c *Console) editJob(_ http.ResponseWriter, r *http.Request, s *session) (string, error) {
	id, err := formID(r)
	if err != nil {
		return "", err
	}
	def := strings.TrimSpace(r.PostForm.Get("definition"))
	if !strings.HasPrefix(def, "{") || !json.Valid([]byte(def)) {
		return "", &apiProblem{Status: http.StatusUnprocessableEntity, Title: "invalid definition",
			Detail: "the definition is a JSON object, as shown", Errors: []string{"form.definition is not a JSON object"}}
	}
	res, err := c.api.UpdateJobWithBodyWithResponse(r.Context(), id, &client.UpdateJobParams{}, "application/json",
		strings.NewReader(def), s.auth)
	return jobURL(id, "updated"), answer(res, err)
}

func jobURL(id uuid.UUID, done string) string {
	return Prefix + "/jobs/" + id.String() + "?done=" + done
}

// describeTriggers puts a job's several triggers in words and lists their
// merged next fires (the cron preview of the list), shown in the first
// trigger's timezone.
func (c *Console) describeTriggers(ctx context.Context, s *session, row *jobRow, ts []client.JobTrigger, fires int64) error {
	var parts []string
	for i, t := range ts {
		switch t.Kind {
		case "cron":
			tz := val(t.Timezone)
			if tz == "" {
				tz = "UTC"
			}
			words, ok := cronWords(val(t.Cron), tz)
			if !ok {
				words = "cron " + val(t.Cron) + " in " + tz
			}
			parts = append(parts, fmt.Sprintf("[%d] %s", i, words))
		default:
			parts = append(parts, fmt.Sprintf("[%d] %s", i, intervalWords(val(t.IntervalSeconds))))
		}
	}
	row.Trigger = strings.Join(parts, "; ")
	res, err := c.api.PreviewCronWithResponse(ctx, client.CronPreviewRequest{Triggers: &ts, Count: &fires}, s.auth)
	if err := answer(res, err); err != nil {
		return err
	}
	row.Timezone = res.JSON200.Timezone
	row.Fires = list(res.JSON200.Fires)
	return nil
}
