package console

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/ax-scheduler/ax/openapi/client"
	"github.com/ax-scheduler/ax/queue/axtype"
)

// agentStates are the states the agents page filters by; none: the
// agents not offline, as the API lists them unless asked.
var agentStates = []string{string(axtype.AgentActive), string(axtype.AgentDraining),
	string(axtype.AgentQuarantined), string(axtype.AgentOffline)}

type agentsView struct {
	Agents      []client.AgentInfo
	State       string
	AgentStates []string
	Next        string
}

// agents lists the agents a page at a time (the API's), by name: those
// not offline, or those of the state asked for (offline ones pile up:
// each registration is a new agent).
func (c *Console) agents(w http.ResponseWriter, r *http.Request, s *session) {
	q := r.URL.Query()
	p := &client.ListAgentsParams{}
	state := q.Get("state")
	if state != "" {
		if !slices.Contains(agentStates, state) {
			c.problem(w, r, s, http.StatusUnprocessableEntity, "invalid filter", fmt.Sprintf("state: one of %v", agentStates))
			return
		}
		p.State = ptr(client.ListAgentsParamsState(state))
	}
	if cursor := q.Get("cursor"); cursor != "" {
		if len(cursor) > maxFilterLen {
			c.problem(w, r, s, http.StatusUnprocessableEntity, "invalid filter",
				fmt.Sprintf("cursor: at most %d characters", maxFilterLen))
			return
		}
		p.Cursor = &cursor
	}
	res, err := c.api.ListAgentsWithResponse(r.Context(), p, s.auth)
	if err := answer(res, err); err != nil {
		c.fail(w, r, s, err)
		return
	}
	v := agentsView{Agents: list(res.JSON200.Agents), State: state, AgentStates: agentStates}
	if next := res.JSON200.NextCursor; next != nil {
		q.Set("cursor", *next)
		v.Next = Prefix + "/agents?" + q.Encode()
	}
	c.render(w, r, s, http.StatusOK, "agents", "Agents", v)
}

// presentAgents returns the agents not offline, by name, up to
// maxChartAgents of them.
func (c *Console) presentAgents(ctx context.Context, s *session) ([]client.AgentInfo, error) {
	p := &client.ListAgentsParams{Limit: ptr(int64(maxChartAgents))}
	res, err := c.api.ListAgentsWithResponse(ctx, p, s.auth)
	if err := answer(res, err); err != nil {
		return nil, err
	}
	return list(res.JSON200.Agents), nil
}

// maxChartAgents is how many agents the home page charts: one page of the
// API's largest.
const maxChartAgents = 1000

// agentNames maps the agents of ids to their names, whatever their state,
// asking the API for at most maxAgentIDs at a time.
func (c *Console) agentNames(ctx context.Context, s *session, ids []uuid.UUID) (map[string]string, error) {
	names := map[string]string{}
	for chunk := range slices.Chunk(ids, maxAgentIDs) {
		p := &client.ListAgentsParams{Id: &chunk, Limit: ptr(int64(maxAgentIDs))}
		res, err := c.api.ListAgentsWithResponse(ctx, p, s.auth)
		if err := answer(res, err); err != nil {
			return nil, err
		}
		for _, a := range list(res.JSON200.Agents) {
			names[a.Id.String()] = a.Name
		}
	}
	return names, nil
}

// maxAgentIDs is how many ids GET /v1/agents takes at once.
const maxAgentIDs = 100

func (c *Console) drainAgent(_ http.ResponseWriter, r *http.Request, s *session) (string, error) {
	id, err := formID(r)
	if err != nil {
		return "", err
	}
	res, err := c.api.DrainAgentWithResponse(r.Context(), id, s.auth)
	return Prefix + "/agents?done=drained", answer(res, err)
}

func (c *Console) resumeAgent(_ http.ResponseWriter, r *http.Request, s *session) (string, error) {
	id, err := formID(r)
	if err != nil {
		return "", err
	}
	res, err := c.api.ResumeAgentWithResponse(r.Context(), id, s.auth)
	return Prefix + "/agents?done=agent-resumed", answer(res, err)
}

type classesView struct {
	Classes []client.RateClass
}

func (c *Console) classes(w http.ResponseWriter, r *http.Request, s *session) {
	res, err := c.api.ListClassesWithResponse(r.Context(), s.auth)
	if err := answer(res, err); err != nil {
		c.fail(w, r, s, err)
		return
	}
	c.render(w, r, s, http.StatusOK, "classes", "Rate classes", classesView{Classes: list(res.JSON200.Classes)})
}

// degradeClass sets the class's priority floor from the form.
func (c *Console) degradeClass(_ http.ResponseWriter, r *http.Request, s *session) (string, error) {
	floor, err := strconv.ParseInt(strings.TrimSpace(r.PostForm.Get("min_priority")), 10, 64)
	if err != nil {
		return "", &apiProblem{Status: http.StatusUnprocessableEntity, Title: "invalid floor",
			Detail: "min_priority: a whole number", Errors: []string{"form.min_priority is not a whole number"}}
	}
	name := r.PathValue("name")
	res, err := c.api.DegradeClassWithResponse(r.Context(), name, client.DegradeRequest{MinPriority: floor}, s.auth)
	return Prefix + "/classes?done=degraded", answer(res, err)
}

func (c *Console) restoreClass(_ http.ResponseWriter, r *http.Request, s *session) (string, error) {
	res, err := c.api.RestoreClassWithResponse(r.Context(), r.PathValue("name"), s.auth)
	return Prefix + "/classes?done=restored", answer(res, err)
}

// cronView is the cron playground: an expression and timezone, and their
// next fires as the API's cron preview lists them.
type cronView struct {
	Cron, Timezone, After string
	Count                 int64
	Preview               *client.CronPreview
	Error                 string
}

func (c *Console) cron(w http.ResponseWriter, r *http.Request, s *session) {
	q := r.URL.Query()
	v := cronView{Cron: q.Get("cron"), Timezone: cmp.Or(q.Get("timezone"), "UTC"), After: q.Get("after"), Count: 10}
	if n, err := strconv.ParseInt(q.Get("count"), 10, 64); err == nil {
		v.Count = n
	}
	if v.Cron != "" {
		req := client.CronPreviewRequest{Cron: &v.Cron, Timezone: &v.Timezone, Count: &v.Count}
		if v.After != "" {
			if t, err := time.Parse(timeInput, v.After); err == nil {
				req.After = &t
			} else {
				v.Error = "after: a time such as 2026-03-29T03:00 (UTC)"
			}
		}
		if v.Error == "" {
			// The API bounds the expression, timezone and count and says
			// which field is wrong.
			res, err := c.api.PreviewCronWithResponse(r.Context(), req, s.auth)
			if err := answer(res, err); err != nil {
				p, ok := err.(*apiProblem)
				if !ok || p.Status >= 500 {
					c.fail(w, r, s, err)
					return
				}
				v.Error = strings.Join(append([]string{p.Detail}, p.Errors...), "; ")
			} else {
				v.Preview = res.JSON200
			}
		}
	}
	c.render(w, r, s, http.StatusOK, "cron", "Cron playground", v)
}
