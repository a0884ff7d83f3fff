package queue

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/google/uuid"

	"github.com/ax-scheduler/ax/db"
	"github.com/ax-scheduler/ax/queue/axtype"
	"github.com/ax-scheduler/ax/queue/jobtemplate"
)

// VerdictWaiting: a job of trigger kind after waits on upstream runs for
// the logical time asked about.
const VerdictWaiting = "waiting"

// JobGraph is a job with the jobs it runs after and those that run after it.
type JobGraph struct {
	Job         *axtype.Job
	Upstreams   []axtype.AfterUpstream
	Mode        axtype.AfterMode // "" unless the job is of trigger kind after
	Downstreams []axtype.AfterLink
}

// Graph returns job id's place in the job graph: its direct upstreams and
// downstreams.
func (s *JobService) Graph(ctx context.Context, id uuid.UUID) (*JobGraph, error) {
	job, err := db.JobGetByID(ctx, s.pool, id)
	if err != nil {
		return nil, err
	}
	down, err := db.AfterDownstreams(ctx, s.pool, id)
	if err != nil {
		return nil, err
	}
	return &JobGraph{Job: job, Upstreams: job.AfterUpstream, Mode: job.AfterMode, Downstreams: down}, nil
}

// CausedBy returns the upstream runs that made run exec (of a job of
// trigger kind after): those recorded for its logical time that met their
// condition. None for other runs.
func (s *ExecutionService) CausedBy(ctx context.Context, exec *axtype.Execution) ([]axtype.AfterRun, error) {
	if exec.Cause != axtype.CauseAfter && exec.Cause != axtype.CauseRerun {
		return nil, nil
	}
	w, err := db.AfterWaitGet(ctx, s.pool, exec.JobID, exec.ScheduledFor)
	if err != nil || w == nil {
		return nil, err
	}
	var ids []uuid.UUID
	for _, a := range w.Arrived {
		if a.Met {
			ids = append(ids, a.ExecutionID)
		}
	}
	if len(ids) == 0 {
		return nil, nil
	}
	runs, err := db.AfterUpstreamRuns(ctx, s.pool, ids)
	if err != nil {
		return nil, err
	}
	sort.Slice(runs, func(i, j int) bool { return runs[i].ID.String() < runs[j].ID.String() })
	return runs, nil
}

// explainAfter says what job (trigger kind after) is waiting on for
// logical time out.At, when neither a run nor a skip is recorded for it.
func (s *ExecutionService) explainAfter(ctx context.Context, job *axtype.Job, out *Explanation) error {
	w, err := db.AfterWaitGet(ctx, s.pool, job.ID, out.At)
	if err != nil {
		return err
	}
	if w == nil {
		// The cleanup deletes waits past the history horizon (with the
		// runs they name): no record says what happened then.
		horizon, err := db.HistoryHorizon(ctx, s.pool)
		if err != nil {
			return err
		}
		if out.At.Before(horizon) {
			out.Verdict = VerdictNoRecord
			out.Reason = "neither a run, a skip nor a wait is recorded for this logical time: it is older than " +
				"the longest history retention, whose records are removed with its runs"
			return nil
		}
	}
	var waiting, arrived []string
	for _, u := range job.AfterUpstream {
		a, ok := axtype.AfterArrival{}, false
		if w != nil {
			a, ok = w.Arrived[u.JobID]
		}
		if ok {
			arrived = append(arrived, fmt.Sprintf("%s (run %s, %s)", u.Job, a.ExecutionID, a.State))
		} else {
			waiting = append(waiting, u.Job+" ("+string(u.On)+")")
		}
	}
	out.Verdict = VerdictWaiting
	switch {
	case w != nil && w.State == axtype.AfterReady:
		out.Reason = "its upstreams ended as it needs: its run is being made"
	case len(waiting) == 0:
		out.Reason = "every upstream ended for this logical time; no run is recorded"
	default:
		out.Reason = fmt.Sprintf("waiting on %s (mode %s) for this logical time", strings.Join(waiting, ", "), job.AfterMode)
	}
	if len(arrived) > 0 {
		out.Reason += "; ended already: " + strings.Join(arrived, ", ")
	}
	return nil
}

// CheckAfterParams parses the templates among the string values of params
// (a JSON object) of a job of trigger kind after, as its fires render
// them. It returns where the first bad one is (".a.b[2]") and why.
func CheckAfterParams(params json.RawMessage) (string, error) {
	if !strings.Contains(string(params), "{{") {
		return "", nil
	}
	var doc any
	if err := json.Unmarshal(params, &doc); err != nil {
		return "", fmt.Errorf("is not valid JSON: %w", err)
	}
	return checkParamTemplates(doc, "")
}

func checkParamTemplates(v any, at string) (string, error) {
	switch x := v.(type) {
	case string:
		if strings.Contains(x, "{{") {
			if _, err := jobtemplate.Param.Parse(x); err != nil {
				return at, err
			}
		}
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if where, err := checkParamTemplates(x[k], at+"."+k); err != nil {
				return where, err
			}
		}
	case []any:
		for i, e := range x {
			if where, err := checkParamTemplates(e, fmt.Sprintf("%s[%d]", at, i)); err != nil {
				return where, err
			}
		}
	}
	return "", nil
}
