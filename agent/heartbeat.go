package agent

import (
	"context"
	"time"

	"github.com/ax-scheduler/ax/queue/axtype"
)

// heartbeatLoop heartbeats every interval, and at once when asked (the
// agent became ready), until ctx ends. The interval runs from when a
// heartbeat was sent: a slow answer does not push the next one back.
func (a *Agent) heartbeatLoop(ctx context.Context) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		case <-a.beatNow:
		}
		sent := time.Now()
		a.heartbeat(ctx)
		timer.Reset(max(a.heartbeatInterval()-time.Since(sent), 0))
	}
}

// heartbeat renews every lease the agent holds, reports its load and acts
// on the answer. Leases that ran out without renewal (the server was away
// too long) are given up first: the server has handed those tasks, or soon
// will, to another agent.
func (a *Agent) heartbeat(ctx context.Context) {
	for _, t := range a.running.expire() {
		a.taskLogger(t).WarnContext(ctx, "lease expired without renewal: stopping the task, its result will not be reported")
	}
	cpu, load1, mem := a.load.sample()
	hb := Heartbeat{Tasks: a.running.refs(), Running: a.running.executingCount(),
		CPU: cpu, Load1: load1, Memory: mem, Ready: a.ready.Load()}
	if free, ok := diskFree(a.cfg.DiskPath); ok {
		hb.DiskFreeBytes = &free
	}
	ctx, cancel := context.WithTimeout(ctx, a.heartbeatTimeout())
	defer cancel()
	// Renewed leases run from when the heartbeat was sent, not from when
	// its answer arrived: the server renewed them in between, so an answer
	// that arrives late (slow network, GC pause, the process stopped) must
	// not make the agent believe it holds a lease past its real expiry.
	sent := time.Now()
	var reply HeartbeatReply
	err := a.call(ctx, "heartbeat", func(ctx context.Context, s Session) error {
		var err error
		reply, err = a.server.Heartbeat(ctx, s, hb)
		return err
	})
	if err != nil {
		a.log.WarnContext(ctx, "heartbeat failed", "error", err, "tasks", len(hb.Tasks))
		return
	}
	a.applyHeartbeat(ctx, reply, sent)
}

// applyHeartbeat acts on the server's answer to a heartbeat sent at at:
// renewed leases last another lease length from then; lost ones are
// stopped and never reported; cancelled ones are stopped and reported as
// cancelled.
func (a *Agent) applyHeartbeat(ctx context.Context, reply HeartbeatReply, at time.Time) {
	a.running.renew(reply.Renewed, at.Add(a.leaseDuration()))
	for _, t := range a.running.lose(reply.Lost, errLeaseLost) {
		a.taskLogger(t).WarnContext(ctx, "lease lost: stopping the task, its result will not be reported")
	}
	for _, t := range a.running.cancel(reply.Cancel) {
		a.taskLogger(t).InfoContext(ctx, "server cancelled the task: stopping it")
	}
	a.setServerState(ctx, reply.State)
}

// setServerState pauses leasing while the server holds the agent draining
// (an operator drained it): it would hand out nothing. A quarantined agent
// goes on asking: the server hands it a probe task now and then, and
// restores it once its probes succeed, which an agent that stopped asking
// would never be.
func (a *Agent) setServerState(ctx context.Context, state string) {
	paused := state == string(axtype.AgentDraining)
	if a.leasePaused.Swap(paused) != paused {
		a.log.InfoContext(ctx, "server changed the agent's state", "state", state, "leasing", !paused)
		signal(a.wake)
	}
}
