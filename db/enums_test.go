package db

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/db/internal/dbsqlc"
)

// TestEnumsMatchSchema: each enum type of this package has a constant for
// every value of its enum in the migrations (as sqlc reads them), and no
// other.
func TestEnumsMatchSchema(t *testing.T) {
	t.Parallel()
	for name, c := range map[string]struct{ ours, schema []string }{
		"execution_state": {strs(ExecutionPending, ExecutionRunning, ExecutionSucceeded, ExecutionFailed,
			ExecutionTimedOut, ExecutionCancelled), strs(dbsqlc.AllAxExecutionStateValues()...)},
		"task_state": {strs(TaskPending, TaskLeased, TaskRunning, TaskSucceeded, TaskFailed, TaskTimedOut,
			TaskCancelled), strs(dbsqlc.AllAxTaskStateValues()...)},
		"execution_cause": {strs(CauseSchedule, CauseCatchUp, CauseManual, CauseDelayed, CauseRerun, CauseBackfill), strs(dbsqlc.AllAxExecutionCauseValues()...)},
		"trigger_kind": {strs(TriggerCron, TriggerInterval, TriggerDelay, TriggerManual),
			strs(dbsqlc.AllAxTriggerKindValues()...)},
		"executor_kind": {strs(ExecutorShell, ExecutorHTTP, ExecutorHandler), strs(dbsqlc.AllAxExecutorKindValues()...)},
		"route_strategy": {strs(RouteRoundRobin, RouteRandom, RouteWeighted, RouteLeastActive, RouteConsistentHash,
			RouteLoadAware, RouteBroadcast, RouteFailover), strs(dbsqlc.AllAxRouteStrategyValues()...)},
		"concurrency_policy": {strs(ConcurrencyAllow, ConcurrencyForbid, ConcurrencyReplace),
			strs(dbsqlc.AllAxConcurrencyPolicyValues()...)},
		"misfire_policy": {strs(MisfireFireOnce, MisfireSkip, MisfireFireAll), strs(dbsqlc.AllAxMisfirePolicyValues()...)},
		"degrade_action": {strs(DegradeWait, DegradeSkip), strs(dbsqlc.AllAxDegradeActionValues()...)},
		"timeout_mode":   {strs(TimeoutFixed, TimeoutAdaptive), strs(dbsqlc.AllAxTimeoutModeValues()...)},
		"skip_reason":    {strs(SkipMisfire, SkipOverlap, SkipPaused, SkipDSTGap), strs(dbsqlc.AllAxSkipReasonValues()...)},
		"agent_state": {strs(AgentActive, AgentDraining, AgentOffline, AgentQuarantined),
			strs(dbsqlc.AllAxAgentStateValues()...)},
		"callback_state": {strs(CallbackPending, CallbackDelivered, CallbackFailed),
			strs(dbsqlc.AllAxCallbackStateValues()...)},
		"breaker_state":   {strs(BreakerClosed, BreakerOpen, BreakerHalfOpen), strs(dbsqlc.AllAxBreakerStateValues()...)},
		"task_event_kind": {strs(TaskEventState, TaskEventLog), strs(dbsqlc.AllAxTaskEventKindValues()...)},
	} {
		require.ElementsMatch(t, c.schema, c.ours, "ax.%s", name)
	}
}

func strs[T ~string](values ...T) []string {
	out := make([]string, len(values))
	for i, v := range values {
		out[i] = string(v)
	}
	return out
}
