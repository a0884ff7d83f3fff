package console

import (
	"html/template"
	"net/http"
	"time"
)

// homeView is the home page: four charts, drawn on the server.
type homeView struct {
	Since, Until                   time.Time
	Runs, Durations, Queue, Agents template.HTML
}

// home draws the last 24 hours' runs per minute by state and run times
// per job, the queue by class and priority, and the agents' load. The
// aggregates come from the engine (queue.OverviewService), limited to the
// session key's groups as the API limits its lists; the agents not
// offline from the API.
func (c *Console) home(w http.ResponseWriter, r *http.Request, s *session) {
	o, err := c.cfg.Overview.Overview(r.Context(), s.key.Groups, nil)
	if err != nil {
		c.fail(w, r, s, err)
		return
	}
	agents, err := c.presentAgents(r.Context(), s)
	if err != nil {
		c.fail(w, r, s, err)
		return
	}
	c.render(w, r, s, http.StatusOK, "home", "Overview", homeView{Since: o.Since, Until: o.Until,
		Runs: runsChart(o), Durations: durationsChart(o), Queue: queueChart(o), Agents: agentsChart(agents)})
}
