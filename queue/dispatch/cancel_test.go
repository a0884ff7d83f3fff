package dispatch_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/queue/axtype"
	"github.com/ax-scheduler/ax/queue/dispatch"
)

// TestCancelledTaskIsNeverLeasedAgain: once an execution is cancelled, a
// task whose agent lets it go (a release, a failure with attempts left, a
// lease that runs out) must end, not go back to pending for another agent
// to run, and the execution with it.
// (All three put the task back to pending before TaskRelease,
// TaskComplete and TaskReapExpired read cancel_requested_at.)
func TestCancelledTaskIsNeverLeasedAgain(t *testing.T) {
	for name, letGo := range map[string]func(e *env, a *axtype.Agent, ref axtype.TaskRef){
		"released": func(e *env, a *axtype.Agent, ref axtype.TaskRef) {
			_, err := e.broker.Release(context.Background(), a.ID, []axtype.TaskRef{ref})
			require.NoError(e.t, err)
		},
		"failed with attempts left": func(e *env, a *axtype.Agent, ref axtype.TaskRef) {
			_, err := e.broker.Complete(context.Background(), a.ID, []axtype.TaskResult{{TaskRef: ref, State: "failed"}})
			require.NoError(e.t, err)
		},
		"lease ran out": func(e *env, _ *axtype.Agent, ref axtype.TaskRef) {
			reaper := dispatch.NewReaper(e.pool, e.cfg, dispatch.ReaperConfig{})
			e.sweepUntil(reaper, func() bool { return e.task(ref.ID).State != "leased" }, "the lease to be reaped")
		},
	} {
		t.Run(name, func(t *testing.T) {
			e := setup(t, func(c *dispatch.AgentConfig) { c.Lease = 200 * time.Millisecond })
			exec := e.trigger(e.job(func(j *axtype.Job) { j.RetryMaxAttempts = 3 }).ID)
			a, b := e.agent(nil, nil), e.agent(nil, nil)
			leased := e.lease(a, 1)
			require.Len(t, leased, 1)
			_, err := e.execs.Cancel(context.Background(), exec.ID, "stop")
			require.NoError(t, err)

			letGo(e, a, axtype.TaskRef{ID: leased[0].ID, Token: leased[0].LeaseToken})
			require.Empty(t, e.lease(b, 1), "another agent runs the cancelled task")
			// Its final state may say what the agent reported; it is final.
			require.NotContains(t, []string{"pending", "leased", "running"}, e.task(leased[0].ID).State)
			require.NotContains(t, []string{"pending", "running"}, e.execution(exec.ID).State, "the cancelled execution ends")
		})
	}
}
