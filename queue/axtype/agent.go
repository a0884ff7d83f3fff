package axtype

import (
	"time"

	"github.com/google/uuid"
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

// DefaultExecutors are the task kinds an agent accepts when it does not
// say: shell runs only where an agent enables it.
var DefaultExecutors = []string{string(ExecutorHandler), string(ExecutorHTTP)}

// AgentRecordSample is how many of an agent's newest state events within
// the record window AgentList counts at most.
const AgentRecordSample = 1000

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

// AgentCount is how many agents share a state, readiness and pool label.
type AgentCount struct {
	State  AgentState
	Ready  bool
	Pool   string
	Agents int64
}
