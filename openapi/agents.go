package openapi

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"

	"github.com/ax-scheduler/ax/queue"
	"github.com/ax-scheduler/ax/queue/axtype"
	"github.com/ax-scheduler/ax/queue/httptask"
)

type agentHandlers struct {
	keys   *queue.KeyService
	agents *queue.LeaseBroker
	owners ownerCache
	// forgetKey drops a key from this replica's key cache.
	forgetKey func(keyID uuid.UUID)
	// publicURL is where targets of HTTP tasks reach the API, for their
	// completion URL ("" when none).
	publicURL string
}

type agentRegisterInput struct {
	Body AgentRegistration
	peer string // the address the request came from
}

// Resolve records the caller's address: the agent's IP when it names
// none.
func (in *agentRegisterInput) Resolve(ctx huma.Context) []error {
	in.peer = ctx.RemoteAddr()
	return checkAgentLabels(in.Body.Labels)
}

// Agent labels are read on every lease and heartbeat of the agent and by
// every replica's router about once a second: unbounded, one registration
// could carry 8 MiB of them. (Keys are not held to the pattern of a job's
// target labels, which only such keys can match: agents that register
// others keep working.)
const (
	maxAgentLabelKey   = 100
	maxAgentLabelValue = queue.MaxLabelValueBytes
)

// checkAgentLabels refuses label keys and values longer than an agent's
// may be (the count is the schema's, maxProperties).
func checkAgentLabels(labels map[string]string) []error {
	var errs []error
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		switch v := labels[k]; {
		case len(k) == 0 || len(k) > maxAgentLabelKey:
			errs = append(errs, &huma.ErrorDetail{Location: "body.labels", Value: truncateForError(k),
				Message: fmt.Sprintf("label keys are 1-%d bytes", maxAgentLabelKey)})
		case len(v) > maxAgentLabelValue:
			errs = append(errs, &huma.ErrorDetail{Location: "body.labels." + k, Value: truncateForError(v),
				Message: fmt.Sprintf("label values are at most %d bytes", maxAgentLabelValue)})
		}
		if len(errs) >= 10 {
			break
		}
	}
	return errs
}

// truncateForError shortens a refused value for its problem: the value
// may be most of an 8 MiB body.
func truncateForError(s string) string {
	const most = 120
	if len(s) <= most {
		return s
	}
	return strings.ToValidUTF8(s[:most], "") + "…"
}

// hostIP is the IP an agent registers with: the one it names, else the
// address its registration came from; "" when neither is an IP.
func (in *agentRegisterInput) hostIP() (string, error) {
	if in.Body.HostIP != "" {
		ip, err := netip.ParseAddr(in.Body.HostIP)
		if err != nil || ip.Zone() != "" {
			return "", huma.Error422UnprocessableEntity("invalid host IP", &huma.ErrorDetail{
				Location: "body.host_ip", Value: in.Body.HostIP, Message: "not an IPv4 or IPv6 address"})
		}
		return ip.Unmap().String(), nil
	}
	if peer, err := netip.ParseAddrPort(in.peer); err == nil {
		return peer.Addr().Unmap().WithZone("").String(), nil
	}
	return "", nil
}

type agentRegisterOutput struct {
	Body AgentCredentials
}

type agentIDInput struct {
	ID string `path:"id" format:"uuid" doc:"Agent id"`
}

type leaseInput struct {
	ID   string `path:"id" format:"uuid" doc:"Agent id"`
	Body LeaseRequest
}

type leaseOutput struct {
	Body Leases
}

type heartbeatInput struct {
	ID   string `path:"id" format:"uuid" doc:"Agent id"`
	Body AgentHeartbeat
}

type heartbeatOutput struct {
	Body HeartbeatReply
}

type completeInput struct {
	ID   string `path:"id" format:"uuid" doc:"Agent id"`
	Body CompleteRequest
}

type completeOutput struct {
	Body CompleteReply
}

type logsInput struct {
	ID   string `path:"id" format:"uuid" doc:"Agent id"`
	Body LogRequest
}

type releaseInput struct {
	ID   string `path:"id" format:"uuid" doc:"Agent id"`
	Body ReleaseRequest
}

// AgentInfo is an agent as operators see it.
type AgentInfo struct {
	ID              string            `json:"id" format:"uuid"`
	Name            string            `json:"name"`
	Labels          map[string]string `json:"labels"`
	State           string            `json:"state" enum:"active,draining,offline,quarantined"`
	Ready           bool              `json:"ready"`
	Capacity        int               `json:"capacity"`
	Weight          int               `json:"weight" doc:"Share under the weighted strategy"`
	Running         int               `json:"running" doc:"Tasks leased to it now"`
	CPU             float64           `json:"cpu"`
	Load1           float64           `json:"load1"`
	Memory          float64           `json:"memory"`
	Load            float64           `json:"load" doc:"Smoothed load routing reads: the busiest of running/capacity, CPU and memory use, averaged over the server's smoothing window (3 minutes by default)"`
	DiskFreeBytes   *int64            `json:"disk_free_bytes,omitempty" doc:"Free bytes on its work disk at its last heartbeat"`
	HostName        string            `json:"host_name,omitempty" doc:"Host it runs on, as it registered"`
	HostIP          string            `json:"host_ip,omitempty" doc:"IP of that host: as it registered, else where its registration came from"`
	Version         string            `json:"version"`
	RegisteredAt    time.Time         `json:"registered_at"`
	LastHeartbeatAt time.Time         `json:"last_heartbeat_at"`
	Executors       []string          `json:"executors" doc:"Task kinds it accepts"`
	QuarantinedAt   *time.Time        `json:"quarantined_at,omitempty" doc:"Set while quarantined; kept while offline, so the quarantine holds when it comes back"`
	DrainedAt       *time.Time        `json:"drained_at,omitempty" doc:"When an operator drained it: the drain holds across deregistration and registering again until resumed"`
	Recent          AgentRecentRecord `json:"recent" doc:"What it did over the server's record window (10 minutes by default), from its newest 1,000 state events in it at most"`
}

// AgentRecentRecord is an agent's recent work: what routing and health
// checks look at.
type AgentRecentRecord struct {
	Succeeded          int64   `json:"succeeded" doc:"Outcomes it reported as succeeded"`
	Failed             int64   `json:"failed" doc:"Outcomes failed or timed out"`
	SuccessRate        float64 `json:"success_rate" doc:"succeeded / (succeeded + failed); 1 when it has no outcomes"`
	Served             int64   `json:"served" doc:"Tasks it leased"`
	Routed             int64   `json:"routed" doc:"Of those, tasks routed to it (preferred or unassigned), not taken over from another agent"`
	AvgDurationSeconds float64 `json:"avg_duration_seconds" doc:"Mean duration, from lease to result, of its last 50 successful tasks"`
}

type agentListInput struct {
	State  string   `query:"state" enum:"active,draining,offline,quarantined" doc:"Only agents in this state; without it, the agents not offline (active, draining, quarantined), or with id, agents in any state"`
	ID     []string `query:"id,explode" format:"uuid" maxItems:"100" doc:"Only the agents of these ids, at most 100 (repeat the parameter: id=…&id=…)"`
	Limit  int      `query:"limit" minimum:"1" maximum:"1000" default:"100" doc:"Page size"`
	Cursor string   `query:"cursor" maxLength:"100" doc:"next_cursor of the previous page"`
}

// AgentList is one page of agents, by name (then id).
type AgentList struct {
	Agents     []AgentInfo `json:"agents"`
	NextCursor string      `json:"next_cursor,omitempty" doc:"Pass as cursor to get the next page; absent on the last page"`
}

type agentListOutput struct {
	Body AgentList
}

// agentBodyLimit bounds an agent's call (results and logs of many tasks).
const agentBodyLimit = 8 << 20

func (h *agentHandlers) register(api huma.API) {
	tags := []string{"Agent protocol"}
	op := func(id, path, summary, desc string, status int) huma.Operation {
		return requireScope(huma.Operation{OperationID: id, Method: http.MethodPost, Path: path, Tags: tags,
			Summary: summary, Description: desc, DefaultStatus: status,
			MaxBodyBytes: agentBodyLimit, BodyReadTimeout: largeBodyReadTimeout,
			Errors: []int{http.StatusNotFound, http.StatusConflict, http.StatusUnprocessableEntity}}, ScopeAgent)
	}
	register(api, showsSecret(op("register-agent", "/v1/agents/register", "Register an agent",
		"Needs a key with scope agent. Returns the agent's id and its own token (shown once), used from then on.",
		http.StatusCreated), "token"), h.registerAgent)
	register(api, notReplayed(op("lease-tasks", "/v1/agents/{id}/lease", "Lease tasks (long poll)",
		"Hands out up to max tasks, highest priority first, waiting up to wait_seconds for some. Each lease has a fencing token and an expiry from the database clock. "+
			"An HTTP task comes with its job's signing secrets and completion URL (http), so the agent sends the request ax serve would (webhook HTTPTask).",
		http.StatusOK)), h.lease)
	register(api, op("heartbeat-agent", "/v1/agents/{id}/heartbeat", "Renew leases and report load",
		"Renews the lease of every listed task the agent still holds; lists the lost ones (stop them, do not report) and those to cancel.",
		http.StatusOK), h.heartbeat)
	register(api, checksOwnValues(op("complete-tasks", "/v1/agents/{id}/complete", "Report task results",
		"Records each result whose lease token is current and held by this agent; a stale token, or another agent's task, is a conflict and changes nothing. 409 when every result was a conflict.",
		http.StatusOK)), h.complete)
	register(api, checksOwnValues(op("append-task-logs", "/v1/agents/{id}/logs", "Append task output",
		"Chunks of tasks whose lease is not current, or is held by another agent, are dropped; 409 when every chunk was.",
		http.StatusNoContent)), h.logs)
	register(api, op("release-tasks", "/v1/agents/{id}/release", "Hand leases back",
		"A draining agent's unfinished tasks: pending again at once, without using up an attempt.",
		http.StatusNoContent), h.release)
	register(api, op("deregister-agent", "/v1/agents/{id}/deregister", "Deregister an agent",
		"The agent is offline from now and its token is revoked (401 from then on: an agent registers again to come back); leases it still holds expire and are reaped.", http.StatusNoContent), h.deregister)
	register(api, requireScope(huma.Operation{OperationID: "drain-agent", Method: http.MethodPost,
		Path: "/v1/agents/{id}/drain", Tags: []string{"Agents"}, Summary: "Drain an agent",
		Description: "It gets no new tasks; running ones finish. An admin or the agent itself (on SIGTERM) may call it. " +
			"An admin's drain holds: deregistering, going offline or registering again under the same name and key " +
			"lifts it not; resume does.",
		DefaultStatus: http.StatusNoContent, Errors: []int{http.StatusNotFound}}, ScopeAgent), h.drain)
	register(api, requireScope(huma.Operation{OperationID: "resume-agent", Method: http.MethodPost,
		Path: "/v1/agents/{id}/resume", Tags: []string{"Agents"}, Summary: "Resume a drained or quarantined agent",
		Description:   "Lifts an admin's drain and a quarantine: the agent gets tasks again (once it is heard from).",
		DefaultStatus: http.StatusNoContent, Errors: []int{http.StatusNotFound}}, ScopeAdmin), h.resume)
	register(api, requireScope(huma.Operation{OperationID: "list-agents", Method: http.MethodGet,
		Path: "/v1/agents", Tags: []string{"Agents"}, Summary: "List agents",
		Description: "Agents with their state (active, draining, offline, quarantined), readiness, labels, " +
			"executors, load, running tasks against capacity and recent success rate, by name, a page at a time (next_cursor). " +
			"Offline agents are listed only when asked for (state=offline, or by id): each registration is a new agent, " +
			"and a restarted one leaves its old registration offline for good."}, ScopeRead), h.list)
}

func (h *agentHandlers) registerAgent(ctx context.Context, in *agentRegisterInput) (*agentRegisterOutput, error) {
	caller, _ := ctx.Value(principalKey{}).(*axtype.APIKey)
	if caller == nil {
		return nil, huma.Error401Unauthorized("no API key")
	}
	if caller.MintedBy != nil {
		return nil, huma.Error403Forbidden("an agent's own token cannot register agents: register with the bootstrap key")
	}
	if err := checkLabelBinding(caller, in.Body.Labels); err != nil {
		return nil, err
	}
	hostIP, err := in.hostIP()
	if err != nil {
		return nil, err
	}
	id, err := uuid.NewV7()
	if err != nil {
		return nil, err
	}
	// The agent's token is minted by the caller's key: revoking that key
	// revokes the token (trigger api_key_revoked).
	token, key, err := h.keys.Create(ctx, "agent:"+in.Body.Name+":"+id.String(), []string{ScopeAgent},
		queue.KeyLimits{MintedBy: &caller.ID})
	if err != nil {
		return nil, err
	}
	agent, err := h.agents.Register(ctx, &axtype.Agent{ID: id, Name: in.Body.Name, Labels: in.Body.Labels,
		Capacity: in.Body.Capacity, Weight: in.Body.Weight, Version: in.Body.Version, APIKeyID: key.ID,
		RegisteredBy: &caller.ID, Executors: in.Body.Executors, LabelBound: caller.Labels != nil,
		HostName: in.Body.HostName, HostIP: hostIP})
	if err != nil {
		return nil, err
	}
	cfg := h.agents.Config()
	return &agentRegisterOutput{Body: AgentCredentials{AgentID: agent.ID.String(), Token: token,
		LeaseSeconds: int(cfg.Lease.Seconds()), HeartbeatIntervalSeconds: int(cfg.HeartbeatInterval.Seconds())}}, nil
}

// checkLabelBinding refuses labels a bound agent key may not give its
// agents: each label must be in the key's binding with one of its values.
// (Fewer labels only narrow what the agent may lease.)
func checkLabelBinding(key *axtype.APIKey, labels map[string]string) error {
	if key.Labels == nil {
		return nil
	}
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		if allowed, ok := key.Labels[k]; !ok || !slices.Contains(allowed, labels[k]) {
			return huma.Error403Forbidden("API key "+key.Name+" may not register agents with this label",
				&huma.ErrorDetail{Location: "body.labels." + k, Value: labels[k],
					Message: "not in the key's label binding: " + bindingText(key.Labels)})
		}
	}
	return nil
}

func bindingText(labels map[string][]string) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		for _, v := range labels[k] {
			parts = append(parts, k+"="+v)
		}
	}
	return strings.Join(parts, ",")
}

// agentFor loads the agent named in the path and checks that the caller
// is that agent (or an admin): one agent cannot act for another.
func (h *agentHandlers) agentFor(ctx context.Context, rawID string) (*axtype.Agent, error) {
	id, err := parseID(rawID)
	if err != nil {
		return nil, err
	}
	agent, err := h.agents.Get(ctx, id)
	if errors.Is(err, axtype.ErrNotFound) {
		return nil, huma.Error404NotFound("agent not found: register again")
	}
	if err != nil {
		return nil, err
	}
	h.owners.put(agent.ID, agent.APIKeyID)
	return agent, checkOwner(ctx, agent.ID, agent.APIKeyID)
}

// ownAgent checks that the caller's key is the agent's (or an admin's)
// without reading the agent row when its owner is known: for calls that
// need nothing else of it.
func (h *agentHandlers) ownAgent(ctx context.Context, rawID string) (uuid.UUID, error) {
	id, err := parseID(rawID)
	if err != nil {
		return uuid.Nil, err
	}
	if owner, ok := h.owners.get(id); ok {
		return id, checkOwner(ctx, id, owner)
	}
	agent, err := h.agentFor(ctx, rawID)
	if err != nil {
		return uuid.Nil, err
	}
	return agent.ID, nil
}

func checkOwner(ctx context.Context, agentID, owner uuid.UUID) error {
	key, _ := ctx.Value(principalKey{}).(*axtype.APIKey)
	if key == nil || (key.ID != owner && !slices.Contains(key.Scopes, ScopeAdmin)) {
		return huma.Error403Forbidden("this key does not belong to agent " + agentID.String())
	}
	return nil
}

func (h *agentHandlers) lease(ctx context.Context, in *leaseInput) (*leaseOutput, error) {
	agent, err := h.agentFor(ctx, in.ID)
	if err != nil {
		return nil, err
	}
	out := &leaseOutput{Body: Leases{Tasks: []LeasedTask{}}}
	tasks, err := h.agents.Lease(ctx, agent, in.Body.Max, time.Duration(in.Body.WaitSeconds)*time.Second)
	if errors.Is(err, queue.ErrAgentNotActive) {
		return out, nil // a draining agent simply gets nothing
	}
	if err != nil {
		return nil, err
	}
	for _, t := range tasks {
		out.Body.Tasks = append(out.Body.Tasks, h.leasedTask(t))
	}
	return out, nil
}

// leasedTask is t as the agent gets it; an HTTP task with what its
// request needs (httptask's contract).
func (h *agentHandlers) leasedTask(t *axtype.LeasedTask) LeasedTask {
	lt := LeasedTask{
		TaskID: t.ID.String(), ExecutionID: t.ExecutionID.String(), JobID: t.JobID.String(),
		ShardIndex: t.ShardIndex, ShardTotal: t.ShardTotal, ShardParam: t.ShardParam, Attempt: t.Attempt,
		MaxAttempts: t.MaxAttempts, LeaseToken: t.LeaseToken.String(), LeaseExpiresAt: t.LeaseExpiresAt,
		TimeoutSeconds: t.TimeoutSeconds, ScheduledFor: t.ScheduledFor, Params: t.Params, TraceParent: t.TraceParent,
		Executor: jobExecutorFromDB(t.ExecutorKind, &t.Executor), JobName: t.JobName, Deadline: t.Deadline,
	}
	if t.ExecutorKind == axtype.ExecutorHTTP {
		lt.HTTP = &LeasedHTTPTask{SigningSecrets: append([]string{}, t.Secrets...),
			CompletionURL: httptask.CompletionURL(h.publicURL, lt.TaskID)}
	}
	return lt
}

func (h *agentHandlers) heartbeat(ctx context.Context, in *heartbeatInput) (*heartbeatOutput, error) {
	agentID, err := h.ownAgent(ctx, in.ID)
	if err != nil {
		return nil, err
	}
	refs, err := taskRefs(in.Body.Tasks, "body.tasks")
	if err != nil {
		return nil, err
	}
	res, err := h.agents.Heartbeat(ctx, agentID, refs, &axtype.AgentLoad{Running: in.Body.Running,
		CPU: in.Body.CPU, Load1: in.Body.Load1, Mem: in.Body.Memory, DiskFreeBytes: in.Body.DiskFreeBytes,
		Ready: in.Body.Ready})
	if err != nil {
		return nil, err
	}
	return &heartbeatOutput{Body: HeartbeatReply{Renewed: idStrings(res.Renewed), Lost: idStrings(res.Lost),
		Cancel: idStrings(res.Cancel), LeaseExpiresAt: res.LeaseExpiresAt, State: res.State}}, nil
}

func (h *agentHandlers) complete(ctx context.Context, in *completeInput) (*completeOutput, error) {
	agentID, err := h.ownAgent(ctx, in.ID)
	if err != nil {
		return nil, err
	}
	results := make([]axtype.TaskResult, len(in.Body.Results))
	for i, r := range in.Body.Results {
		ref, err := taskRef(r.TaskID, r.LeaseToken, fmt.Sprintf("body.results[%d]", i))
		if err != nil {
			return nil, err
		}
		if err := checkErrorCode(fmt.Sprintf("body.results[%d].error_code", i), r.State, r.ErrorCode); err != nil {
			return nil, err
		}
		results[i] = axtype.TaskResult{TaskRef: ref, State: axtype.TaskState(r.State), Result: r.Result, Error: r.Error,
			ErrorCode: r.ErrorCode}
	}
	done, err := h.agents.Complete(ctx, agentID, results)
	if err != nil {
		return nil, err
	}
	accepted := make(map[uuid.UUID]axtype.CompletedTask, len(done))
	for _, d := range done {
		accepted[d.ID] = d
	}
	out := &completeOutput{}
	for _, r := range results {
		o := ResultOutcome{TaskID: r.ID.String(), Status: "conflict"}
		if d, ok := accepted[r.ID]; ok {
			o.Status = "accepted"
			// The server's own verdicts on what was sent: result_too_large
			// carries a reason only when the server gave it.
			if d.ErrorCode == axtype.ErrorCodeBadResult || d.ErrorCode == axtype.ErrorCodeResultTooLarge && d.Error != "" {
				o.ErrorCode, o.Error = d.ErrorCode, d.Error
			}
		}
		out.Body.Results = append(out.Body.Results, o)
	}
	if len(done) == 0 {
		return nil, huma.Error409Conflict("no result was recorded: the lease tokens are not current (lease expired or taken over); drop these tasks")
	}
	return out, nil
}

func (h *agentHandlers) logs(ctx context.Context, in *logsInput) (*struct{}, error) {
	agentID, err := h.ownAgent(ctx, in.ID)
	if err != nil {
		return nil, err
	}
	chunks := make([]axtype.LogChunk, len(in.Body.Chunks))
	for i, c := range in.Body.Chunks {
		ref, err := taskRef(c.TaskID, c.LeaseToken, fmt.Sprintf("body.chunks[%d]", i))
		if err != nil {
			return nil, err
		}
		chunks[i] = axtype.LogChunk{TaskRef: ref, Stream: c.Stream, Data: c.Data}
	}
	matched, err := h.agents.Logs(ctx, agentID, chunks)
	if err == nil && matched == 0 {
		return nil, huma.Error409Conflict("no chunk was stored: the lease tokens are not current or the tasks are not this agent's")
	}
	return nil, err
}

func (h *agentHandlers) release(ctx context.Context, in *releaseInput) (*struct{}, error) {
	agentID, err := h.ownAgent(ctx, in.ID)
	if err != nil {
		return nil, err
	}
	refs, err := taskRefs(in.Body.Tasks, "body.tasks")
	if err != nil {
		return nil, err
	}
	_, err = h.agents.Release(ctx, agentID, refs)
	return nil, err
}

func (h *agentHandlers) deregister(ctx context.Context, in *agentIDInput) (*struct{}, error) {
	agent, err := h.agentFor(ctx, in.ID)
	if err != nil {
		return nil, err
	}
	if err := h.agents.SetState(ctx, agent.ID, axtype.AgentOffline); err != nil {
		return nil, err
	}
	// Offline revoked the agent's token (trigger agent_offline_revokes_token).
	h.forgetKey(agent.APIKeyID)
	return nil, nil
}

func (h *agentHandlers) drain(ctx context.Context, in *agentIDInput) (*struct{}, error) {
	agent, err := h.agentFor(ctx, in.ID)
	if err != nil {
		return nil, err
	}
	if key, _ := ctx.Value(principalKey{}).(*axtype.APIKey); key != nil && key.ID == agent.APIKeyID {
		// The agent drains itself (SIGTERM): its next start is a fresh one.
		return nil, h.agents.SetState(ctx, agent.ID, axtype.AgentDraining)
	}
	return nil, h.agents.DrainHold(ctx, agent.ID)
}

func (h *agentHandlers) resume(ctx context.Context, in *agentIDInput) (*struct{}, error) {
	id, err := parseID(in.ID)
	if err != nil {
		return nil, err
	}
	err = h.agents.Resume(ctx, id)
	if errors.Is(err, axtype.ErrNotFound) {
		return nil, huma.Error404NotFound("agent not found")
	}
	return nil, err
}

func (h *agentHandlers) list(ctx context.Context, in *agentListInput) (*agentListOutput, error) {
	p, err := in.params()
	if err != nil {
		return nil, err
	}
	agents, err := h.agents.List(ctx, p)
	if errors.Is(err, axtype.ErrNotFound) { // the cursor's agent
		return nil, invalidCursor(in.Cursor)
	}
	if err != nil {
		return nil, err
	}
	out := &agentListOutput{Body: AgentList{Agents: make([]AgentInfo, 0, len(agents))}}
	if len(agents) > in.Limit {
		agents = agents[:in.Limit]
		out.Body.NextCursor = encodeCursor(agents[len(agents)-1].ID)
	}
	for _, a := range agents {
		out.Body.Agents = append(out.Body.Agents, agentInfo(a))
	}
	return out, nil
}

// params is the page in asks for, and one agent more: there is a next
// page when it comes.
func (in *agentListInput) params() (*queue.AgentListParams, error) {
	p := &queue.AgentListParams{Limit: in.Limit + 1}
	if in.State != "" {
		s := axtype.AgentState(in.State)
		p.State = &s
	}
	if in.ID != nil {
		p.IDs = make([]uuid.UUID, len(in.ID))
		for i, raw := range in.ID {
			id, err := uuid.Parse(raw)
			if err != nil {
				return nil, huma.Error422UnprocessableEntity("invalid id",
					&huma.ErrorDetail{Location: fmt.Sprintf("query.id[%d]", i), Message: "must be a UUID", Value: raw})
			}
			p.IDs[i] = id
		}
	}
	if in.Cursor != "" {
		after, err := decodeCursor(in.Cursor)
		if err != nil {
			return nil, invalidCursor(in.Cursor)
		}
		p.After = &after
	}
	return p, nil
}

func agentInfo(a *axtype.Agent) AgentInfo {
	return AgentInfo{ID: a.ID.String(), Name: a.Name, Labels: a.Labels,
		State: string(a.State), Ready: a.Ready, Capacity: a.Capacity, Weight: a.Weight, Running: a.Leased, CPU: a.CPU,
		Load1: a.Load1, Memory: a.Mem, Load: a.Load, DiskFreeBytes: a.DiskFreeBytes, HostName: a.HostName,
		HostIP: a.HostIP, Version: a.Version, RegisteredAt: a.RegisteredAt,
		LastHeartbeatAt: a.LastHeartbeatAt, Executors: a.Executors, QuarantinedAt: a.QuarantinedAt,
		DrainedAt: a.DrainedAt, Recent: recentRecord(a.Recent)}
}

func recentRecord(r axtype.AgentRecord) AgentRecentRecord {
	rate := 1.0
	if n := r.Succeeded + r.Failed; n > 0 {
		rate = float64(r.Succeeded) / float64(n)
	}
	return AgentRecentRecord{Succeeded: r.Succeeded, Failed: r.Failed, SuccessRate: rate, Served: r.Leases,
		Routed: r.Routed, AvgDurationSeconds: r.AvgSeconds}
}

func taskRefs(in []TaskRef, at string) ([]axtype.TaskRef, error) {
	out := make([]axtype.TaskRef, len(in))
	for i, r := range in {
		ref, err := taskRef(r.TaskID, r.LeaseToken, fmt.Sprintf("%s[%d]", at, i))
		if err != nil {
			return nil, err
		}
		out[i] = ref
	}
	return out, nil
}

func taskRef(taskID, token, at string) (axtype.TaskRef, error) {
	id, err1 := uuid.Parse(taskID)
	tok, err2 := uuid.Parse(token)
	if err1 != nil || err2 != nil {
		return axtype.TaskRef{}, huma.Error422UnprocessableEntity("invalid task reference",
			&huma.ErrorDetail{Location: at, Message: "task_id and lease_token must be UUIDs"})
	}
	return axtype.TaskRef{ID: id, Token: tok}, nil
}

func idStrings(ids []uuid.UUID) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = id.String()
	}
	return out
}
