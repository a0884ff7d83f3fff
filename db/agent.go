package db

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/ax-scheduler/ax/db/internal/dbsqlc"
)

// Agent is a worker machine's agent as the server knows it.
type Agent struct {
	ID              uuid.UUID
	Name            string
	Labels          map[string]string
	Capacity        int
	Version         string
	State           string
	Ready           bool
	APIKeyID        uuid.UUID
	Running         int // as reported by heartbeat
	Leased          int // tasks leased or running on it now (AgentList only)
	CPU, Load1, Mem float64
	RegisteredAt    time.Time
	LastHeartbeatAt time.Time
}

// AgentInsert registers an agent; it starts not ready until its first
// heartbeat says otherwise.
func AgentInsert(ctx context.Context, e Executor, a *Agent) (*Agent, error) {
	labels, err := json.Marshal(nonNilMap(a.Labels))
	if err != nil {
		return nil, fmt.Errorf("error encoding agent labels: %w", err)
	}
	r, err := queries.AgentInsert(ctx, e, dbsqlc.AgentInsertParams{
		ID: a.ID, Name: a.Name, Labels: labels, Capacity: int32(a.Capacity), Version: a.Version, ApiKeyID: a.APIKeyID,
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
	Ready           *bool
}

// AgentHeartbeat records that an agent is alive and its load; it returns
// the agent's state.
func AgentHeartbeat(ctx context.Context, e Executor, id uuid.UUID, l *AgentLoad) (string, error) {
	st, err := queries.AgentHeartbeat(ctx, e, dbsqlc.AgentHeartbeatParams{
		ID: id, Running: int32(l.Running), Cpu: l.CPU, Load1: l.Load1, Memory: l.Mem, Ready: l.Ready,
	})
	if err != nil {
		return "", fmt.Errorf("error recording heartbeat of agent %s: %w", id, mapErr(err))
	}
	return string(st), nil
}

// AgentSetState sets an agent's state (draining, offline…).
func AgentSetState(ctx context.Context, e Executor, id uuid.UUID, state string) error {
	if err := queries.AgentSetState(ctx, e, dbsqlc.AgentSetStateParams{ID: id, State: dbsqlc.AxAgentState(state)}); err != nil {
		return fmt.Errorf("error setting state of agent %s: %w", id, mapErr(err))
	}
	return nil
}

// AgentList returns every agent with its current lease count.
func AgentList(ctx context.Context, e Executor) ([]*Agent, error) {
	rows, err := queries.AgentList(ctx, e)
	if err != nil {
		return nil, fmt.Errorf("error listing agents: %w", mapErr(err))
	}
	out := make([]*Agent, 0, len(rows))
	for _, r := range rows {
		a, err := agentFromRow(dbsqlc.AxAgent{ID: r.ID, Name: r.Name, Labels: r.Labels, Capacity: r.Capacity,
			Version: r.Version, State: r.State, Ready: r.Ready, ApiKeyID: r.ApiKeyID, Running: r.Running,
			Cpu: r.Cpu, Load1: r.Load1, Memory: r.Memory, RegisteredAt: r.RegisteredAt,
			LastHeartbeatAt: r.LastHeartbeatAt}, int(r.Leased))
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, nil
}

// AgentMarkOffline marks agents silent for longer than silent offline.
func AgentMarkOffline(ctx context.Context, e Executor, silent time.Duration) ([]uuid.UUID, error) {
	ids, err := queries.AgentMarkOffline(ctx, e, silent.Seconds())
	if err != nil {
		return nil, fmt.Errorf("error marking silent agents offline: %w", mapErr(err))
	}
	return ids, nil
}

func agentFromRow(r dbsqlc.AxAgent, leased int) (*Agent, error) {
	a := &Agent{ID: r.ID, Name: r.Name, Capacity: int(r.Capacity), Version: r.Version, State: string(r.State),
		Ready: r.Ready, APIKeyID: r.ApiKeyID, Running: int(r.Running), Leased: leased, CPU: r.Cpu,
		Load1: r.Load1, Mem: r.Memory, RegisteredAt: r.RegisteredAt.UTC(), LastHeartbeatAt: r.LastHeartbeatAt.UTC()}
	if err := json.Unmarshal(r.Labels, &a.Labels); err != nil {
		return nil, fmt.Errorf("error decoding labels of agent %s: %w", r.ID, err)
	}
	return a, nil
}
