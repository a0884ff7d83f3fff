package db

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/db/internal/dbsqlc"
	"github.com/ax-scheduler/ax/queue/axtype"
)

// TestEnumsMatchSchema: each enum type of this package has a constant for
// every value of its enum in the migrations (as sqlc reads them), and no
// other.
func TestEnumsMatchSchema(t *testing.T) {
	t.Parallel()
	for name, c := range map[string]struct{ ours, schema []string }{
		"execution_state": {strs(axtype.ExecutionPending, axtype.ExecutionRunning, axtype.ExecutionSucceeded, axtype.ExecutionFailed,
			axtype.ExecutionTimedOut, axtype.ExecutionCancelled), strs(dbsqlc.AllAxExecutionStateValues()...)},
		"task_state": {strs(axtype.TaskPending, axtype.TaskLeased, axtype.TaskRunning, axtype.TaskSucceeded, axtype.TaskFailed, axtype.TaskTimedOut,
			axtype.TaskCancelled), strs(dbsqlc.AllAxTaskStateValues()...)},
		"execution_cause": {strs(axtype.CauseSchedule, axtype.CauseCatchUp, axtype.CauseManual, axtype.CauseDelayed, axtype.CauseRerun, axtype.CauseBackfill, axtype.CauseAfter), strs(dbsqlc.AllAxExecutionCauseValues()...)},
		"trigger_kind": {strs(axtype.TriggerCron, axtype.TriggerInterval, axtype.TriggerDelay, axtype.TriggerManual, axtype.TriggerAfter),
			strs(dbsqlc.AllAxTriggerKindValues()...)},
		"executor_kind": {strs(axtype.ExecutorShell, axtype.ExecutorHTTP, axtype.ExecutorHandler), strs(dbsqlc.AllAxExecutorKindValues()...)},
		"route_strategy": {strs(axtype.RouteRoundRobin, axtype.RouteRandom, axtype.RouteWeighted, axtype.RouteLeastActive, axtype.RouteConsistentHash,
			axtype.RouteLoadAware, axtype.RouteBroadcast, axtype.RouteFailover), strs(dbsqlc.AllAxRouteStrategyValues()...)},
		"concurrency_policy": {strs(axtype.ConcurrencyAllow, axtype.ConcurrencyForbid, axtype.ConcurrencyReplace, axtype.ConcurrencyQueue),
			strs(dbsqlc.AllAxConcurrencyPolicyValues()...)},
		"misfire_policy": {strs(axtype.MisfireFireOnce, axtype.MisfireSkip, axtype.MisfireFireAll), strs(dbsqlc.AllAxMisfirePolicyValues()...)},
		"degrade_action": {strs(axtype.DegradeWait, axtype.DegradeSkip), strs(dbsqlc.AllAxDegradeActionValues()...)},
		"timeout_mode":   {strs(axtype.TimeoutFixed, axtype.TimeoutAdaptive), strs(dbsqlc.AllAxTimeoutModeValues()...)},
		"skip_reason": {strs(axtype.SkipMisfire, axtype.SkipOverlap, axtype.SkipPaused, axtype.SkipDSTGap, axtype.SkipCalendar,
			axtype.SkipOverlapQueueFull, axtype.SkipUpstreamFailed, axtype.SkipCascadeBound), strs(dbsqlc.AllAxSkipReasonValues()...)},
		"agent_state": {strs(axtype.AgentActive, axtype.AgentDraining, axtype.AgentOffline, axtype.AgentQuarantined),
			strs(dbsqlc.AllAxAgentStateValues()...)},
		"callback_state": {strs(axtype.CallbackPending, axtype.CallbackDelivered, axtype.CallbackFailed),
			strs(dbsqlc.AllAxCallbackStateValues()...)},
		"breaker_state":   {strs(axtype.BreakerClosed, axtype.BreakerOpen, axtype.BreakerHalfOpen), strs(dbsqlc.AllAxBreakerStateValues()...)},
		"task_event_kind": {strs(axtype.TaskEventState, axtype.TaskEventLog), strs(dbsqlc.AllAxTaskEventKindValues()...)},
		"notice_event":    {strs(axtype.NoticeEvents...), strs(dbsqlc.AllAxNoticeEventValues()...)},
		"notice_kind":     {strs(axtype.NoticeSlack, axtype.NoticeWebhook), strs(dbsqlc.AllAxNoticeKindValues()...)},
		"notice_state": {strs(axtype.NoticePending, axtype.NoticeDelivered, axtype.NoticeGivenUp, axtype.NoticeRateLimited),
			strs(dbsqlc.AllAxNoticeStateValues()...)},
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
