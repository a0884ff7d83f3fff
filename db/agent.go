package db

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/ax-scheduler/ax/db/internal/dbsqlc"
)

// Agent is a worker machine's agent as the server knows it.
type Agent struct {
	ID       uuid.UUID
	Name     string
	Labels   map[string]string
	Capacity int
	Weight   int // share under the weighted strategy; defaults to 1
	Version  string
	State    AgentState
	Ready    bool
	APIKeyID uuid.UUID
	// RegisteredBy is the key the agent registered with; with Name, its
	// identity across registrations.
	RegisteredBy *uuid.UUID
	// Executors are the task kinds it accepts (shell, http, handler).
	Executors []string
	// DrainedAt is when an operator drained it: the drain holds across
	// registrations until an admin resumes it.
	DrainedAt *time.Time
	// LabelBound: it registered with a key bound to labels, so it serves
	// only jobs targeted at labels it has, never untargeted ones.
	LabelBound      bool
	Running         int // as reported by heartbeat
	Leased          int // tasks leased or running on it now (AgentList only)
	CPU, Load1, Mem float64
	RegisteredAt    time.Time
	LastHeartbeatAt time.Time
	QuarantinedAt   *time.Time
	// Load is the agent's smoothed load: the busiest of running/capacity,
	// CPU and memory use, averaged over the server's smoothing window.
	Load float64
	// DiskFreeBytes is the free space of its work disk at its last
	// heartbeat; nil when it did not say.
	DiskFreeBytes *int64
	// HostName and HostIP are where it runs, as it registered (HostIP ""
	// when unknown).
	HostName, HostIP string
	// Recent is the agent's record over AgentList's window.
	Recent AgentRecord
}

// AgentRecord is what an agent did over a recent window.
type AgentRecord struct {
	Succeeded, Failed int64   // outcomes it reported (failed includes timed out)
	Leases            int64   // tasks it took
	Routed            int64   // of those, tasks routed to it
	AvgSeconds        float64 // mean duration of its last successes
}

// AgentInsert registers an agent; it starts not ready until its first
// heartbeat says otherwise, and draining or quarantined when an agent of
// its identity (RegisteredBy and Name) was drained by an operator or
// quarantined. Executors default to handler and http.
func AgentInsert(ctx context.Context, e Executor, a *Agent) (*Agent, error) {
	labels, err := json.Marshal(nonNilMap(a.Labels))
	if err != nil {
		return nil, fmt.Errorf("error encoding agent labels: %w", err)
	}
	r, err := queries.AgentInsert(ctx, e, dbsqlc.AgentInsertParams{
		ID: a.ID, Name: a.Name, Labels: labels, Capacity: int32(a.Capacity), Weight: int32(max(a.Weight, 1)),
		Version: a.Version, ApiKeyID: a.APIKeyID, RegisteredBy: a.RegisteredBy,
		Executors: cmpSlice(a.Executors, DefaultExecutors), LabelBound: a.LabelBound,
		HostName: a.HostName, HostIp: a.HostIP,
	})
	if err != nil {
		return nil, fmt.Errorf("error inserting agent: %w", mapErr(err))
	}
	return agentFromRow(r, 0)
}

// AgentGetByID returns one agent.
func AgentGetByID(ctx context.Context, e Executor, id uuid.UUID) (*Agent, error) {
	r, err := queries.AgentGetByID(ctx, e, id)
	if err != nil {
		return nil, fmt.Errorf("error getting agent %s: %w", id, mapErr(err))
	}
	return agentFromRow(r, 0)
}

// AgentLoad is what a heartbeat reports.
type AgentLoad struct {
	Running         int
	CPU, Load1, Mem float64
	DiskFreeBytes   *int64 // nil: not reported
	Ready           *bool
	// Smoothing is how long a sample keeps weighing on the agent's smoothed
	// load (the time constant of its exponential moving average); not
	// reported by the agent but set by the server. Defaults to
	// DefaultLoadSmoothing.
	Smoothing time.Duration
}

// DefaultLoadSmoothing is the default AgentLoad.Smoothing: 3 minutes.
const DefaultLoadSmoothing = 3 * time.Minute

// AgentHeartbeat records that an agent is alive and its load; it returns
// the agent's state. now, when set, replaces the database clock (tests).
func AgentHeartbeat(ctx context.Context, e Executor, id uuid.UUID, l *AgentLoad, now *time.Time) (string, error) {
	st, err := queries.AgentHeartbeat(ctx, e, dbsqlc.AgentHeartbeatParams{
		ID: id, Now: now, Running: int32(l.Running), Cpu: l.CPU, Load1: l.Load1, Memory: l.Mem, Ready: l.Ready,
		DiskFreeBytes: l.DiskFreeBytes, SmoothingSeconds: cmp.Or(l.Smoothing, DefaultLoadSmoothing).Seconds(),
	})
	if err != nil {
		return "", fmt.Errorf("error recording heartbeat of agent %s: %w", id, mapErr(err))
	}
	return string(st), nil
}

// AgentSetState sets an agent's state (draining, offline…).
func AgentSetState(ctx context.Context, e Executor, id uuid.UUID, state AgentState) error {
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
		return fmt.Errorf("error draining agent %s: %w", id, ErrNotFound)
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
		return fmt.Errorf("error resuming agent %s: %w", id, ErrNotFound)
	}
	return nil
}

// DefaultExecutors are the task kinds an agent accepts when it does not
// say: shell runs only where an agent enables it.
var DefaultExecutors = []string{string(ExecutorHandler), string(ExecutorHTTP)}

func cmpSlice(s, fallback []string) []string {
	if len(s) == 0 {
		return fallback
	}
	return s
}

// AgentRecordSample is how many of an agent's newest state events within
// the record window AgentList counts at most.
const AgentRecordSample = 1000

// AgentList returns every agent with its current lease count and its
// record over the last window (its newest AgentRecordSample state events
// in it at most).
func AgentList(ctx context.Context, e Executor, window time.Duration) ([]*Agent, error) {
	rows, err := queries.AgentList(ctx, e, dbsqlc.AgentListParams{WindowSeconds: window.Seconds(), Sample: AgentRecordSample})
	if err != nil {
		return nil, fmt.Errorf("error listing agents: %w", mapErr(err))
	}
	out := make([]*Agent, 0, len(rows))
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
		a.Recent = AgentRecord{Succeeded: r.RecentSucceeded, Failed: r.RecentFailed, Leases: r.RecentLeases,
			Routed: r.RecentRouted, AvgSeconds: r.RecentAvgSeconds}
		out = append(out, a)
	}
	return out, nil
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

func agentFromRow(r dbsqlc.AxAgent, leased int) (*Agent, error) {
	a := &Agent{ID: r.ID, Name: r.Name, Capacity: int(r.Capacity), Weight: int(r.Weight), Version: r.Version,
		State: AgentState(r.State), QuarantinedAt: utcPtr(r.QuarantinedAt), DrainedAt: utcPtr(r.DrainedAt),
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

// Candidate is an agent routing may prefer, with its load.
type Candidate struct {
	ID              uuid.UUID
	Labels          map[string]string
	Executors       []string // task kinds it accepts
	LabelBound      bool     // takes no untargeted job
	Capacity        int
	Weight          int
	Healthy         bool    // active and ready (not quarantined)
	Running         int     // the larger of reported and leased
	Load            float64 // smoothed: see Agent.Load
	AvgTaskDuration time.Duration
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
func AgentListCandidates(ctx context.Context, e Executor, q *CandidateQuery) ([]*Candidate, error) {
	rows, err := queries.AgentListCandidates(ctx, e, dbsqlc.AgentListCandidatesParams{LiveSeconds: q.Live.Seconds(), Now: q.Now,
		DurationWindowSeconds: q.DurationWindow.Seconds(), DurationSample: int32(q.DurationSample)})
	if err != nil {
		return nil, fmt.Errorf("error listing routing candidates: %w", mapErr(err))
	}
	out := make([]*Candidate, len(rows))
	for i, r := range rows {
		c := &Candidate{ID: r.ID, Executors: r.Executors, LabelBound: r.LabelBound, Capacity: int(r.Capacity), Weight: int(r.Weight),
			Healthy: r.State == dbsqlc.AxAgentStateActive && r.Ready, Running: int(max(r.Running, r.Leased)),
			Load: r.Load, AvgTaskDuration: time.Duration(r.AvgSeconds * float64(time.Second))}
		if err := json.Unmarshal(r.Labels, &c.Labels); err != nil {
			return nil, fmt.Errorf("error decoding labels of agent %s: %w", r.ID, err)
		}
		out[i] = c
	}
	return out, nil
}

// QuarantinePolicy says when an agent fails too often to be given work.
type QuarantinePolicy struct {
	Window time.Duration // how far back outcomes count
	// Sample is how many of an agent's newest outcomes in Window count,
	// so that a check costs the same however busy the agent was.
	Sample      int
	MinResults  int     // fewer outcomes than this never quarantine
	FailureRate float64 // failed / all at or above this quarantines
	// ErrorShare, when above 0, also quarantines an agent whose failures
	// matching ErrorCodes make up this share of its outcomes or more:
	// codes that say the machine is at fault (a full disk, an OOM kill) warrant a quarantine well before a job's own failures would.
	ErrorShare float64
	// ErrorCodes are the error codes a failure must carry to count
	// toward ErrorShare; empty: every failure counts.
	ErrorCodes []string
}

// QuarantinedAgent is an agent just quarantined, with the numbers why.
type QuarantinedAgent struct {
	ID                uuid.UUID
	Results, Failures int
	Matching          int // failures matching the policy's ErrorCodes
}

// AgentQuarantineFailing quarantines active agents that fail per p.
func AgentQuarantineFailing(ctx context.Context, e Executor, p QuarantinePolicy) ([]QuarantinedAgent, error) {
	rows, err := queries.AgentQuarantineFailing(ctx, e, dbsqlc.AgentQuarantineFailingParams{
		WindowSeconds: p.Window.Seconds(), Sample: int32(p.Sample), MinResults: int32(p.MinResults), FailureRate: p.FailureRate,
		ErrorShare: p.ErrorShare, ErrorCodes: nonNilSlice(p.ErrorCodes)})
	if err != nil {
		return nil, fmt.Errorf("error quarantining failing agents: %w", mapErr(err))
	}
	out := make([]QuarantinedAgent, len(rows))
	for i, r := range rows {
		out[i] = QuarantinedAgent{ID: r.ID, Results: int(r.Results), Failures: int(r.Failures), Matching: int(r.Matching)}
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

// AgentCount is how many agents share a state, readiness and pool label.
type AgentCount struct {
	State  AgentState
	Ready  bool
	Pool   string
	Agents int64
}

// AgentCountByState counts agents by state, readiness and pool; pools that
// jobs target but no agent serves come with no rows, listed in pools.
func AgentCountByState(ctx context.Context, e Executor) (counts []AgentCount, pools []string, err error) {
	rows, err := queries.AgentCountByState(ctx, e)
	if err != nil {
		return nil, nil, fmt.Errorf("error counting agents: %w", mapErr(err))
	}
	for _, r := range rows {
		counts = append(counts, AgentCount{State: AgentState(r.State), Ready: r.Ready, Pool: r.Pool, Agents: r.Agents})
	}
	if pools, err = queries.JobListTargetedPools(ctx, e); err != nil {
		return nil, nil, fmt.Errorf("error listing targeted pools: %w", mapErr(err))
	}
	return counts, pools, nil
}
