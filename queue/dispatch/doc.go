// Package dispatch decides which agent runs which task: the lease broker
// (register, long-poll lease, heartbeat, complete, drain), the task router
// (labels, strategies, route keys), rate classes (admission, priority
// floors, degradation: RateClasses, the one owner of what a class decides)
// and the reaper of expired leases and silent agents. Fencing stays in SQL: a result counts
// only from the lease holder, with the current token.
package dispatch
