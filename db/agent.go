package db

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/ax-scheduler/ax/db/internal/dbsqlc"
	"github.com/ax-scheduler/ax/queue/axtype"
)

// AgentInsert registers an agent; it starts not ready until its first
// heartbeat says otherwise, and draining or quarantined when an agent of
// its identity (RegisteredBy and Name) was drained by an operator or
// quarantined. Executors default to handler and http.
func AgentInsert(ctx context.Context, e Executor, a *axtype.Agent) (*axtype.Agent, error) {
	labels, err := json.Marshal(nonNilMap(a.Labels))
	if err != nil {
		return nil, fmt.Errorf("error encoding agent labels: %w", err)
	}
	r, err := queries.AgentInsert(ctx, e, dbsqlc.AgentInsertParams{
		ID: a.ID, Name: a.Name, Labels: labels, Capacity: int32(a.Capacity), Weight: int32(max(a.Weight, 1)),
		Version: a.Version, ApiKeyID: a.APIKeyID, RegisteredBy: a.RegisteredBy,
		Executors: cmpSlice(a.Executors, axtype.DefaultExecutors), LabelBound: a.LabelBound,
		HostName: a.HostName, HostIp: a.HostIP,
	})
	if err != nil {
		return nil, fmt.Errorf("error inserting agent: %w", mapErr(err))
	}
	return agentFromRow(r, 0)
}

// AgentGetByID returns one agent.
func AgentGetByID(ctx context.Context, e Executor, id uuid.UUID) (*axtype.Agent, error) {
	r, err := queries.AgentGetByID(ctx, e, id)
	if err != nil {
		return nil, fmt.Errorf("error getting agent %s: %w", id, mapErr(err))
	}
	return agentFromRow(r, 0)
}

// AgentGetMany returns the agents of ids that exist, by id.
func AgentGetMany(ctx context.Context, e Executor, ids []uuid.UUID) (map[uuid.UUID]*axtype.Agent, error) {
	rows, err := queries.AgentGetMany(ctx, e, ids)
	if err != nil {
		return nil, fmt.Errorf("error getting %d agents: %w", len(ids), mapErr(err))
	}
	out := make(map[uuid.UUID]*axtype.Agent, len(rows))
	for _, r := range rows {
		a, err := agentFromRow(r, 0)
		if err != nil {
			return nil, err
		}
		out[a.ID] = a
	}
	return out, nil
}

// AgentHeartbeat records that an agent is alive and its load; it returns
// the agent's state. now, when set, replaces the database clock (tests).
func AgentHeartbeat(ctx context.Context, e Executor, id uuid.UUID, l *axtype.AgentLoad, now *time.Time) (string, error) {
	st, err := queries.AgentHeartbeat(ctx, e, dbsqlc.AgentHeartbeatParams{
		ID: id, Now: now, Running: int32(l.Running), Cpu: l.CPU, Load1: l.Load1, Memory: l.Mem, Ready: l.Ready,
		DiskFreeBytes: l.DiskFreeBytes, SmoothingSeconds: cmp.Or(l.Smoothing, axtype.DefaultLoadSmoothing).Seconds(),
	})
	if err != nil {
		return "", fmt.Errorf("error recording heartbeat of agent %s: %w", id, mapErr(err))
	}
	return string(st), nil
}

// AgentSetState sets an agent's state (draining, offline…).
func AgentSetState(ctx context.Context, e Executor, id uuid.UUID, state axtype.AgentState) error {
	if err := queries.AgentSetState(ctx, e, dbsqlc.AgentSetStateParams{ID: id, State: dbsqlc.AxAgentState(state)}); err != nil {
		return fmt.Errorf("error setting state of agent %s: %w", id, mapErr(err))
	}
	return nil
}

// AgentDrainHold drains an agent on an operator's word: the drain holds
// across deregistration and registering again, until AgentResume.
func AgentDrainHold(ctx context.Context, e Executor, id uuid.UUID) error {
	n, err := queries.AgentDrainHold(ctx, e, id)
	if err != nil {
		return fmt.Errorf("error draining agent %s: %w", id, mapErr(err))
	}
	if n == 0 {
		return fmt.Errorf("error draining agent %s: %w", id, axtype.ErrNotFound)
	}
	return nil
}

// AgentResume lifts an operator's drain and a quarantine.
func AgentResume(ctx context.Context, e Executor, id uuid.UUID) error {
	n, err := queries.AgentResume(ctx, e, id)
	if err != nil {
		return fmt.Errorf("error resuming agent %s: %w", id, mapErr(err))
	}
	if n == 0 {
		return fmt.Errorf("error resuming agent %s: %w", id, axtype.ErrNotFound)
	}
	return nil
}

func cmpSlice(s, fallback []string) []string {
	if len(s) == 0 {
		return fallback
	}
	return s
}

// AgentListParams says which agents AgentList returns: a page of them
// in (name, id) order.
type AgentListParams struct {
	// State, when set, is the state of the agents listed; nil: the agents
	// not offline, or with IDs, agents in any state.
	State *axtype.AgentState
	// IDs, when set, are the agents listed (those that exist).
	IDs []uuid.UUID
	// After is the last agent of the previous page.
	After *uuid.UUID
	Limit int
	// Window is how far back each agent's record counts.
	Window time.Duration
}

// presentStates are the states of agents not offline; allStates every
// state.
var (
	presentStates = []string{string(axtype.AgentActive), string(axtype.AgentDraining), string(axtype.AgentQuarantined)}
	allStates     = append(slices.Clip(presentStates), string(axtype.AgentOffline))
)

// AgentList returns a page of agents with their current lease counts and
// their records over p.Window (their newest AgentRecordSample state
// events in it at most). An After that names no agent is
// axtype.ErrNotFound.
func AgentList(ctx context.Context, e Executor, p *AgentListParams) ([]*axtype.Agent, error) {
	ids, err := agentPage(ctx, e, p)
	if err != nil {
		return nil, err
	}
	rows, err := queries.AgentList(ctx, e, dbsqlc.AgentListParams{Ids: ids, WindowSeconds: p.Window.Seconds(),
		Sample: axtype.AgentRecordSample})
	if err != nil {
		return nil, fmt.Errorf("error listing agents: %w", mapErr(err))
	}
	out := make([]*axtype.Agent, 0, len(rows))
	for _, r := range rows {
		a, err := agentFromRow(dbsqlc.AxAgent{ID: r.ID, Name: r.Name, Labels: r.Labels, Capacity: r.Capacity,
			Version: r.Version, State: r.State, Ready: r.Ready, ApiKeyID: r.ApiKeyID, Running: r.Running,
			Cpu: r.Cpu, Load1: r.Load1, Memory: r.Memory, RegisteredAt: r.RegisteredAt,
			LastHeartbeatAt: r.LastHeartbeatAt, Weight: r.Weight, QuarantinedAt: r.QuarantinedAt,
			Executors: r.Executors, RegisteredBy: r.RegisteredBy, DrainedAt: r.DrainedAt, LabelBound: r.LabelBound,
			Load: r.Load, DiskFreeBytes: r.DiskFreeBytes, HostName: r.HostName, HostIp: r.HostIp},
			int(r.Leased))
		if err != nil {
			return nil, err
		}
		a.Recent = axtype.AgentRecord{Succeeded: r.RecentSucceeded, Failed: r.RecentFailed, Leases: r.RecentLeases,
			Routed: r.RecentRouted, AvgSeconds: r.RecentAvgSeconds}
		out = append(out, a)
	}
	return out, nil
}

// agentPage returns the ids of p's page, each kind of page through an
// index that yields it without reading the offline agents it leaves out.
func agentPage(ctx context.Context, e Executor, p *AgentListParams) ([]uuid.UUID, error) {
	var afterName string
	var afterID uuid.UUID // the first page: after ("", the nil id), before every agent
	if p.After != nil {
		prev, err := AgentGetByID(ctx, e, *p.After)
		if err != nil {
			return nil, err
		}
		afterName, afterID = prev.Name, prev.ID
	}
	states := presentStates
	switch {
	case p.State != nil:
		states = []string{string(*p.State)}
	case p.IDs != nil:
		states = allStates
	}
	var ids []uuid.UUID
	var err error
	switch {
	case p.IDs != nil:
		ids, err = queries.AgentPageByIDs(ctx, e, dbsqlc.AgentPageByIDsParams{Ids: p.IDs, States: states,
			AfterName: afterName, AfterID: afterID, Max: int32(p.Limit)})
	case p.State != nil && *p.State == axtype.AgentOffline:
		ids, err = queries.AgentPageOffline(ctx, e, dbsqlc.AgentPageOfflineParams{AfterName: afterName,
			AfterID: afterID, Max: int32(p.Limit)})
	default:
		ids, err = queries.AgentPagePresent(ctx, e, dbsqlc.AgentPagePresentParams{States: states,
			AfterName: afterName, AfterID: afterID, Max: int32(p.Limit)})
	}
	if err != nil {
		return nil, fmt.Errorf("error listing agents: %w", mapErr(err))
	}
	return ids, nil
}

// AgentMarkOffline marks agents silent for longer than silent offline;
// now, when set, replaces the database clock (tests).
func AgentMarkOffline(ctx context.Context, e Executor, silent time.Duration, now *time.Time) ([]uuid.UUID, error) {
	ids, err := queries.AgentMarkOffline(ctx, e, dbsqlc.AgentMarkOfflineParams{SilentSeconds: silent.Seconds(), Now: now})
	if err != nil {
		return nil, fmt.Errorf("error marking silent agents offline: %w", mapErr(err))
	}
	return ids, nil
}

func agentFromRow(r dbsqlc.AxAgent, leased int) (*axtype.Agent, error) {
	a := &axtype.Agent{ID: r.ID, Name: r.Name, Capacity: int(r.Capacity), Weight: int(r.Weight), Version: r.Version,
		State: axtype.AgentState(r.State), QuarantinedAt: utcPtr(r.QuarantinedAt), DrainedAt: utcPtr(r.DrainedAt),
		Executors: r.Executors, RegisteredBy: r.RegisteredBy, LabelBound: r.LabelBound,
		Ready: r.Ready, APIKeyID: r.ApiKeyID, Running: int(r.Running), Leased: leased, CPU: r.Cpu,
		Load1: r.Load1, Mem: r.Memory, RegisteredAt: r.RegisteredAt.UTC(), LastHeartbeatAt: r.LastHeartbeatAt.UTC(),
		Load: r.Load, DiskFreeBytes: r.DiskFreeBytes, HostName: r.HostName}
	if r.HostIp != nil {
		a.HostIP = r.HostIp.String()
	}
	if err := json.Unmarshal(r.Labels, &a.Labels); err != nil {
		return nil, fmt.Errorf("error decoding labels of agent %s: %w", r.ID, err)
	}
	return a, nil
}

// CandidateQuery says which agents AgentListCandidates returns and how
// their average task duration is measured.
type CandidateQuery struct {
	// Live is how recently a candidate must have heartbeated.
	Live time.Duration
	// DurationWindow is how far back successes count toward the average
	// task duration, of at most DurationSample of the latest.
	DurationWindow time.Duration
	DurationSample int
	// Now, when set, replaces the database clock (tests).
	Now *time.Time
}

// AgentListCandidates returns the active or quarantined agents heard
// from within q.Live.
func AgentListCandidates(ctx context.Context, e Executor, q *CandidateQuery) ([]*axtype.Candidate, error) {
	rows, err := queries.AgentListCandidates(ctx, e, dbsqlc.AgentListCandidatesParams{LiveSeconds: q.Live.Seconds(), Now: q.Now,
		DurationWindowSeconds: q.DurationWindow.Seconds(), DurationSample: int32(q.DurationSample)})
	if err != nil {
		return nil, fmt.Errorf("error listing routing candidates: %w", mapErr(err))
	}
	out := make([]*axtype.Candidate, len(rows))
	for i, r := range rows {
		c := &axtype.Candidate{ID: r.ID, Executors: r.Executors, LabelBound: r.LabelBound, Capacity: int(r.Capacity), Weight: int(r.Weight),
			Healthy: r.State == dbsqlc.AxAgentStateActive && r.Ready, Running: int(max(r.Running, r.Leased)),
			Load: r.Load, AvgTaskDuration: time.Duration(r.AvgSeconds * float64(time.Second))}
		if err := json.Unmarshal(r.Labels, &c.Labels); err != nil {
			return nil, fmt.Errorf("error decoding labels of agent %s: %w", r.ID, err)
		}
		out[i] = c
	}
	return out, nil
}

// AgentQuarantineFailing quarantines active agents that fail per p.
func AgentQuarantineFailing(ctx context.Context, e Executor, p axtype.QuarantinePolicy) ([]axtype.QuarantinedAgent, error) {
	rows, err := queries.AgentQuarantineFailing(ctx, e, dbsqlc.AgentQuarantineFailingParams{
		WindowSeconds: p.Window.Seconds(), Sample: int32(p.Sample), MinResults: int32(p.MinResults), FailureRate: p.FailureRate,
		ErrorShare: p.ErrorShare, ErrorCodes: nonNilSlice(p.ErrorCodes)})
	if err != nil {
		return nil, fmt.Errorf("error quarantining failing agents: %w", mapErr(err))
	}
	out := make([]axtype.QuarantinedAgent, len(rows))
	for i, r := range rows {
		out[i] = axtype.QuarantinedAgent{ID: r.ID, Results: int(r.Results), Failures: int(r.Failures), Matching: int(r.Matching)}
	}
	return out, nil
}

// AgentRestoreRecovered reactivates quarantined agents whose last
// successes probe outcomes all succeeded.
func AgentRestoreRecovered(ctx context.Context, e Executor, successes int) ([]uuid.UUID, error) {
	ids, err := queries.AgentRestoreRecovered(ctx, e, int32(successes))
	if err != nil {
		return nil, fmt.Errorf("error restoring recovered agents: %w", mapErr(err))
	}
	return ids, nil
}

// AgentTakeProbe reports whether a quarantined agent may take one probe
// task now (its last probe was at least every ago), and records it.
func AgentTakeProbe(ctx context.Context, e Executor, id uuid.UUID, every time.Duration) (bool, error) {
	_, err := queries.AgentTakeProbe(ctx, e, dbsqlc.AgentTakeProbeParams{ID: id, EverySeconds: every.Seconds()})
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("error taking a probe for agent %s: %w", id, mapErr(err))
	}
	return true, nil
}

// AgentCountByState counts agents by state, readiness and pool; pools that
// jobs target but no agent serves come with no rows, listed in pools.
func AgentCountByState(ctx context.Context, e Executor) (counts []axtype.AgentCount, pools []string, err error) {
	rows, err := queries.AgentCountByState(ctx, e)
	if err != nil {
		return nil, nil, fmt.Errorf("error counting agents: %w", mapErr(err))
	}
	for _, r := range rows {
		counts = append(counts, axtype.AgentCount{State: axtype.AgentState(r.State), Ready: r.Ready, Pool: r.Pool, Agents: r.Agents})
	}
	if pools, err = queries.JobListTargetedPools(ctx, e); err != nil {
		return nil, nil, fmt.Errorf("error listing targeted pools: %w", mapErr(err))
	}
	return counts, pools, nil
}

// AgentListGone returns which of ids are gone: offline, or not an agent
// at all.
func AgentListGone(ctx context.Context, e Executor, ids []uuid.UUID) ([]uuid.UUID, error) {
	gone, err := queries.AgentListGone(ctx, e, ids)
	if err != nil {
		return nil, fmt.Errorf("error finding %d agents gone: %w", len(ids), mapErr(err))
	}
	return gone, nil
}
