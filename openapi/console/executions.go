package console

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/ax-scheduler/ax/openapi/client"

	"github.com/ax-scheduler/ax/queue/axtype"
)

// pageSize is how many runs a list shows at once.
const pageSize = 50

// maxLogEvents is how many log and state events an execution page shows;
// the API's logs endpoint pages through the rest.
const maxLogEvents = 1000

// executionsFilter is the runs list's query: job (an id), state, from and
// to (scheduled time, UTC), cursor (the API's, for the next page).
type executionsFilter struct {
	Job, State, From, To, Cursor string
}

// timeInput is how a datetime-local field sends a time (read as UTC).
const timeInput = "2006-01-02T15:04"

func readExecutionsFilter(q url.Values) (executionsFilter, *client.ListExecutionsParams, error) {
	f := executionsFilter{Job: q.Get("job"), State: q.Get("state"), From: q.Get("from"), To: q.Get("to"), Cursor: q.Get("cursor")}
	p := &client.ListExecutionsParams{Limit: ptr(int64(pageSize))}
	if len(f.Job) > maxFilterLen {
		return f, nil, fmt.Errorf("job: at most %d characters", maxFilterLen)
	}
	if id, err := uuid.Parse(f.Job); err == nil {
		p.JobId = &id
	}
	if f.State != "" {
		if !slices.Contains(runStates, f.State) {
			return f, nil, fmt.Errorf("state: one of %v", runStates)
		}
		p.State = ptr(client.ListExecutionsParamsState(f.State))
	}
	for name, field := range map[string]struct {
		in  string
		out **time.Time
	}{"from": {f.From, &p.From}, "to": {f.To, &p.To}} {
		if field.in == "" {
			continue
		}
		t, err := time.Parse(timeInput, field.in)
		if err != nil {
			return f, nil, fmt.Errorf("%s: a time such as 2026-03-29T03:00 (UTC)", name)
		}
		*field.out = &t
	}
	if len(f.Cursor) > maxFilterLen {
		return f, nil, fmt.Errorf("cursor: at most %d characters", maxFilterLen)
	}
	if f.Cursor != "" {
		p.Cursor = &f.Cursor
	}
	return f, p, nil
}

type executionsView struct {
	Filter     executionsFilter
	Executions []client.Execution
	Jobs       map[uuid.UUID]jobRef
	Next       string
	RunStates  []string
}

func (c *Console) executions(w http.ResponseWriter, r *http.Request, s *session) {
	f, p, err := readExecutionsFilter(r.URL.Query())
	if err != nil {
		c.problem(w, r, s, http.StatusUnprocessableEntity, "invalid filter", err.Error())
		return
	}
	if f.Job != "" && p.JobId == nil {
		id, err := c.jobByName(r.Context(), s, f.Job)
		if err != nil {
			c.problem(w, r, s, http.StatusUnprocessableEntity, "invalid filter", err.Error())
			return
		}
		p.JobId = &id
	}
	res, err := c.api.ListExecutionsWithResponse(r.Context(), p, s.auth)
	if err := answer(res, err); err != nil {
		c.fail(w, r, s, err)
		return
	}
	v := executionsView{Filter: f, Executions: list(res.JSON200.Executions), RunStates: runStates}
	if v.Jobs, err = c.jobRefs(r.Context(), s, v.Executions); err != nil {
		c.fail(w, r, s, err)
		return
	}
	if next := res.JSON200.NextCursor; next != nil {
		q := r.URL.Query()
		q.Set("cursor", *next)
		v.Next = Prefix + "/executions?" + q.Encode()
	}
	c.render(w, r, s, http.StatusOK, "executions", "Executions", v)
}

// jobByName finds the job named GROUP/NAME, or NAME when one group alone
// has a job of that name, as the CLI does.
func (c *Console) jobByName(ctx context.Context, s *session, ref string) (uuid.UUID, error) {
	params := &client.ListJobsParams{Limit: ptr(int64(2))}
	name := ref
	if group, rest, ok := strings.Cut(ref, "/"); ok {
		params.Group, name = &group, rest
	}
	params.Name = &name
	res, err := c.api.ListJobsWithResponse(ctx, params, s.auth)
	if err := answer(res, err); err != nil {
		return uuid.Nil, err
	}
	jobs := list(res.JSON200.Jobs)
	switch len(jobs) {
	case 0:
		return uuid.Nil, fmt.Errorf("job: no job %q", ref)
	case 1:
		return val(jobs[0].Id), nil
	}
	return uuid.Nil, fmt.Errorf("job: more than one group has a job named %q: write GROUP/NAME", ref)
}

// jobRef is a run's job as its run's page shows it: its name and the
// timezone its times are shown in.
type jobRef struct {
	Name, Zone string
}

// jobRefs names the jobs of a page of runs (at most pageSize lookups).
func (c *Console) jobRefs(ctx context.Context, s *session, execs []client.Execution) (map[uuid.UUID]jobRef, error) {
	refs := map[uuid.UUID]jobRef{}
	for _, e := range execs {
		if _, ok := refs[e.JobId]; ok {
			continue
		}
		res, err := c.api.GetJobWithResponse(ctx, e.JobId, s.auth)
		if err := answer(res, err); err != nil {
			return nil, err
		}
		refs[e.JobId] = jobRef{Name: val(res.JSON200.Group) + "/" + res.JSON200.Name, Zone: jobZone(*res.JSON200)}
	}
	return refs, nil
}

// jobZone is the timezone a job's times are shown in: its trigger's, or
// UTC.
func jobZone(j client.Job) string {
	switch {
	case j.Trigger != nil:
		return cmp.Or(val(j.Trigger.Timezone), "UTC")
	case j.Triggers != nil && len(*j.Triggers) > 0: // shown in the first's, as the API's preview of the list
		return cmp.Or(val((*j.Triggers)[0].Timezone), "UTC")
	}
	return "UTC"
}

// shardRow is one task of a run: its state and where it ran.
type shardRow struct {
	Task     client.Task
	Agent    string
	Duration string
}

type executionView struct {
	Execution client.Execution
	// Params are the run's params as the API sent them: the generated
	// types hold numbers as float64, which would round large ones.
	Params string
	Job    jobRef
	// RequestKey makes the re-run button's post once per page: a second
	// click posts the same key and gets the same re-run.
	RequestKey string
	Shards     []shardRow
	Logs       []logLine
	LastEvent  int64
	More       bool
	Ended      bool
}

// logLine is one line of output, or a state change, as the page shows it,
// with its time in the job's timezone (At) and in UTC (AtUTC).
type logLine struct {
	ID     int64  `json:"id"`
	At     string `json:"at"`
	AtUTC  string `json:"at_utc"`
	Shard  int64  `json:"shard"`
	Kind   string `json:"kind"`
	State  string `json:"state,omitempty"`
	Stream string `json:"stream,omitempty"`
	Text   string `json:"text"`
	Agent  string `json:"agent,omitempty"`
	TaskID string `json:"task_id"`
}

func toLine(e client.TaskEvent, agents map[string]string, loc *time.Location) logLine {
	l := logLine{ID: e.Id, At: e.At.In(loc).Format("15:04:05.000"), AtUTC: e.At.UTC().Format("2006-01-02 15:04:05.000Z"), Shard: e.ShardIndex, Kind: string(e.Kind), State: val(e.State), Stream: val(e.Stream),
		Text: val(e.Message), TaskID: e.TaskId.String()}
	if id := val(e.AgentId); id != "" {
		l.Agent = cmp.Or(agents[id], val(e.WorkerHost), id)
	}
	return l
}

// ended reports whether a run's state is final.
func ended(state string) bool { return axtype.TaskState(state).Ended() }

func (c *Console) execution(w http.ResponseWriter, r *http.Request, s *session) {
	id, ok := c.pathID(w, r, s)
	if !ok {
		return
	}
	ctx := r.Context()
	res, err := c.api.GetExecutionWithResponse(ctx, id, &client.GetExecutionParams{}, s.auth)
	if err := answer(res, err); err != nil {
		c.fail(w, r, s, err)
		return
	}
	e := *res.JSON200
	v := executionView{Execution: e, Ended: ended(string(e.State)), Params: rawField(res.Body, "params"),
		RequestKey: uuid.NewString(), Job: jobRef{Zone: "UTC"}}
	if refs, err := c.jobRefs(ctx, s, []client.Execution{e}); err == nil {
		v.Job = refs[e.JobId]
	}
	loc := zoneOf(v.Job.Zone)
	logs, err := c.api.GetExecutionLogsWithResponse(ctx, id, &client.GetExecutionLogsParams{Limit: ptr(int64(maxLogEvents))}, s.auth)
	if err := answer(logs, err); err != nil {
		c.fail(w, r, s, err)
		return
	}
	agents, err := c.agentNames(ctx, s, agentIDs(list(e.Tasks), list(logs.JSON200.Events)))
	if err != nil {
		c.fail(w, r, s, err)
		return
	}
	ran := map[uuid.UUID]string{} // the agent of each task's latest state event
	leased, ends := map[uuid.UUID]time.Time{}, map[uuid.UUID]time.Time{}
	for _, ev := range list(logs.JSON200.Events) {
		line := toLine(ev, agents, loc)
		if line.Agent != "" {
			ran[ev.TaskId] = line.Agent
		}
		switch {
		case line.Kind == string(axtype.TaskEventState) && line.State == string(axtype.TaskLeased):
			leased[ev.TaskId] = ev.At
		case line.Kind == string(axtype.TaskEventState) && ended(line.State):
			ends[ev.TaskId] = ev.At
		}
		v.Logs = append(v.Logs, line)
	}
	v.LastEvent, v.More = logs.JSON200.NextAfter, logs.JSON200.More
	for _, t := range list(e.Tasks) {
		row := shardRow{Task: t, Agent: ran[t.Id], Duration: duration(t.StartedAt, t.FinishedAt)}
		// Its latest attempt's duration, from its lease to its result, as
		// its state events tell.
		if start, ok := leased[t.Id]; ok {
			var endAt *time.Time
			if end, done := ends[t.Id]; done && !end.Before(start) {
				endAt = &end
			}
			row.Duration = duration(&start, endAt)
		}
		v.Shards = append(v.Shards, row)
	}
	c.render(w, r, s, http.StatusOK, "execution", "Execution "+shortID(id.String()), v)
}

// agentIDs returns the agents that hold, or last held, tasks' leases and
// those behind events, each once.
func agentIDs(tasks []client.Task, events []client.TaskEvent) []uuid.UUID {
	seen := map[uuid.UUID]bool{}
	var ids []uuid.UUID
	add := func(id uuid.UUID) {
		if !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	for _, t := range tasks {
		if t.AgentId != nil {
			add(*t.AgentId)
		}
	}
	for _, ev := range events {
		if id, err := uuid.Parse(val(ev.AgentId)); err == nil {
			add(id)
		}
	}
	return ids
}

func (c *Console) cancelExecution(_ http.ResponseWriter, r *http.Request, s *session) (string, error) {
	id, err := formID(r)
	if err != nil {
		return "", err
	}
	res, err := c.api.CancelExecutionWithResponse(r.Context(), id, s.auth)
	return executionURL(id, "cancelled"), answer(res, err)
}

func (c *Console) redeliverCallback(_ http.ResponseWriter, r *http.Request, s *session) (string, error) {
	id, err := formID(r)
	if err != nil {
		return "", err
	}
	res, err := c.api.RedeliverCallbackWithResponse(r.Context(), id, s.auth)
	return executionURL(id, "redelivered"), answer(res, err)
}

// rerunExecution re-runs an ended run (POST /v1/executions/{id}/rerun:
// its params and logical time, linked by rerun_of) and goes to the new
// run. The form's request key makes a double post one re-run.
func (c *Console) rerunExecution(_ http.ResponseWriter, r *http.Request, s *session) (string, error) {
	id, err := formID(r)
	if err != nil {
		return "", err
	}
	var req client.RerunRequest
	if key := r.PostForm.Get("request_key"); key != "" {
		if len(key) > 64 {
			return "", &apiProblem{Status: http.StatusUnprocessableEntity, Title: "invalid request key",
				Detail: "request_key: at most 64 characters", Errors: []string{"form.request_key is too long"}}
		}
		req.RequestKey = &key
	}
	res, err := c.api.RerunExecutionWithResponse(r.Context(), id, &client.RerunExecutionParams{}, req, s.auth)
	if err := answer(res, err); err != nil {
		return "", err
	}
	return executionURL(res.JSON202.Id, "rerun"), nil
}

func executionURL(id uuid.UUID, done string) string {
	return Prefix + "/executions/" + id.String() + "?done=" + done
}
