package console

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/ax-scheduler/ax/openapi/client"
)

// live streams a run's new log lines and state changes to its page as
// server-sent events, reading the API's logs after the last event sent
// every LogPoll while the run goes on: events "log" (a logLine),
// "execution" (its state when it changes) and "end" (its final state,
// then the stream closes). A stream lasts at most LiveFor; the browser's
// EventSource then reconnects with Last-Event-ID and goes on from there.
func (c *Console) live(w http.ResponseWriter, r *http.Request, s *session) {
	id, ok := c.pathID(w, r, s)
	if !ok {
		return
	}
	after, err := lastEventID(r)
	if err != nil {
		c.problem(w, r, s, http.StatusUnprocessableEntity, "invalid position", err.Error())
		return
	}
	ctx := r.Context()
	// The agents behind the lines are named as they come (names: by id;
	// "" when the API knows no such agent).
	agents := map[string]string{}
	// The lines' times are shown in the job's timezone, as on the page.
	loc := time.UTC
	if exec, err := c.api.GetExecutionWithResponse(ctx, id, &client.GetExecutionParams{}, s.auth); answer(exec, err) == nil {
		if refs, err := c.jobRefs(ctx, s, []client.Execution{*exec.JSON200}); err == nil {
			loc = zoneOf(refs[exec.JSON200.JobId].Zone)
		}
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	deadline := time.NewTimer(c.cfg.LiveFor)
	defer deadline.Stop()
	state := ""
	for {
		logs, err := c.api.GetExecutionLogsWithResponse(ctx, id,
			&client.GetExecutionLogsParams{After: &after, Limit: ptr(int64(500))}, s.auth)
		if err := answer(logs, err); err != nil {
			sendEvent(w, "failure", 0, err.Error())
			return
		}
		c.nameAgents(ctx, s, agents, list(logs.JSON200.Events))
		for _, ev := range list(logs.JSON200.Events) {
			sendEvent(w, "log", ev.Id, toLine(ev, agents, loc))
		}
		after = logs.JSON200.NextAfter
		if logs.JSON200.More {
			continue
		}
		exec, err := c.api.GetExecutionWithResponse(ctx, id, &client.GetExecutionParams{}, s.auth)
		if err := answer(exec, err); err != nil {
			sendEvent(w, "failure", 0, err.Error())
			return
		}
		if now := string(exec.JSON200.State); now != state {
			state = now
			sendEvent(w, "execution", 0, map[string]string{"state": state})
		}
		if ended(state) {
			// The last output is stored before the run ends: read once
			// more so none is missed, then close.
			if final, err := c.api.GetExecutionLogsWithResponse(ctx, id,
				&client.GetExecutionLogsParams{After: &after, Limit: ptr(int64(500))}, s.auth); answer(final, err) == nil {
				c.nameAgents(ctx, s, agents, list(final.JSON200.Events))
				for _, ev := range list(final.JSON200.Events) {
					sendEvent(w, "log", ev.Id, toLine(ev, agents, loc))
				}
			}
			sendEvent(w, "end", 0, map[string]string{"state": state})
			_ = rc.Flush()
			return
		}
		if err := rc.Flush(); err != nil {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-deadline.C:
			return
		case <-time.After(c.cfg.LogPoll):
		}
	}
}

// nameAgents adds to names the agents behind events it has no entry for
// yet. One that cannot be read is named by its host or id (toLine).
func (c *Console) nameAgents(ctx context.Context, s *session, names map[string]string, events []client.TaskEvent) {
	var missing []uuid.UUID
	for _, ev := range events {
		id := val(ev.AgentId)
		if _, known := names[id]; !known && id != "" {
			names[id] = ""
			if u, err := uuid.Parse(id); err == nil {
				missing = append(missing, u)
			}
		}
	}
	if len(missing) == 0 {
		return
	}
	found, err := c.agentNames(ctx, s, missing)
	if err != nil {
		return
	}
	maps.Copy(names, found)
}

// lastEventID is where a stream starts: after the Last-Event-ID the
// browser sends when it reconnects, else ?after= from the page.
func lastEventID(r *http.Request) (int64, error) {
	raw := r.Header.Get("Last-Event-ID")
	if raw == "" {
		raw = r.URL.Query().Get("after")
	}
	if raw == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("after: a whole number of at least 0")
	}
	return n, nil
}

// sendEvent writes one server-sent event; data is JSON on one line, so
// output with newlines cannot end the event early.
func sendEvent(w io.Writer, name string, id int64, data any) {
	b, _ := json.Marshal(data)
	if id > 0 {
		fmt.Fprintf(w, "id: %d\n", id)
	}
	fmt.Fprintf(w, "event: %s\ndata: %s\n\n", name, b)
}
