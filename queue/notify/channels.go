// Package notify turns PostgreSQL notifications into wake-ups: one LISTEN
// connection per process, fanned out to subscribers, and the names of every
// channel ax uses.
package notify

// The NOTIFY channels of ax, in one place: the database's triggers
// (migrations) and the engine send on them, a Notifier fans them out.

// TaskReadyChannel is NOTIFYed when new tasks are pending, so waiting
// lease requests wake at once.
const TaskReadyChannel = "ax_task_ready"

// KeyFreedChannel is NOTIFYed by the database (migration 00063) when a
// concurrency key's place frees, or a task is parked that must be looked
// at again: the next lease unparks what the keys have room for. Sent
// before the TaskReadyChannel notification of the same transaction.
const KeyFreedChannel = "ax_key_freed"

// ExecutionEndedChannel is NOTIFYed by the database (trigger
// execution_ended) in every transaction that ends executions, with their
// ids comma-separated: long polls of GET /v1/executions/{id}?wait= wake on
// it.
const ExecutionEndedChannel = "ax_execution_ended"

// JobChangedChannel is the NOTIFY channel that tells trigger loops a job
// was created, changed, paused, resumed or deleted, so they can recompute
// how long to sleep.
const JobChangedChannel = "ax_job_changed"

// RunScheduledChannel is NOTIFYed when delayed runs are stored that come
// due soon (within RunScheduledNotifyWithin), so trigger loops do not
// sleep past them. Runs due later are found by the loops' own sleep.
const RunScheduledChannel = "ax_run_scheduled"

// APIKeyRevokedChannel is NOTIFYed by the database (trigger
// api_key_revoked_notify) whenever API keys are revoked: the API's key
// caches forget what they hold.
const APIKeyRevokedChannel = "ax_api_key_revoked"

// ServeChannels are the channels an ax serve replica listens on: its one
// Notifier subscribes to all of them.
func ServeChannels() []string {
	return []string{JobChangedChannel, TaskReadyChannel, KeyFreedChannel, ExecutionEndedChannel, APIKeyRevokedChannel, RunScheduledChannel,
		BackfillChannel, AfterReadyChannel}
}

// BackfillChannel is NOTIFYed when a backfill is created, so backfill
// releasers start it at once rather than at their next fallback wake-up.
const BackfillChannel = "ax_backfill"

// AfterReadyChannel is NOTIFYed by the database (function
// ax.after_upstream_ended) when a downstream job's wait for a logical time
// is ready to fire, so after firers make its run at once.
const AfterReadyChannel = "ax_after_ready"
