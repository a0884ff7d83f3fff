package axtype

import (
	"time"

	"github.com/google/uuid"
)

// DueTrigger is a claimed trigger row with what planning its fires needs.
type DueTrigger struct {
	JobID           uuid.UUID
	TriggerKind     TriggerKind
	CronExpr        string
	Timezone        string
	IntervalSeconds int64
	// Triggers is the job's list when it has several (Job.Triggers).
	Triggers             []TriggerSpec
	ConcurrencyPolicy    ConcurrencyPolicy
	MisfirePolicy        MisfirePolicy
	MisfireWindowSeconds int
	MisfireMaxFires      int
	// ShardCount is the job's shards a run (a broadcast's: 1).
	ShardCount int
	// ActiveFrom and ActiveUntil are the job's active window (Job).
	ActiveFrom, ActiveUntil *time.Time
	NextFireAt              time.Time
	// Now is the database clock the claim ran at (the transaction's start).
	Now time.Time
	// HasUnfinished is set (for forbid and replace jobs only) when an
	// earlier execution has not ended.
	HasUnfinished bool
	// HasWaiting is set (for queue jobs only) when a run of the job waits
	// behind an unfinished one already.
	HasWaiting bool
	// Paused: the job is paused since PausedAt; its passed ticks are
	// recorded as skipped.
	Paused   bool
	PausedAt *time.Time
	// Exclude names the job's calendars; Calendars holds them, resolved
	// by the trigger loop before planning (nil when Exclude is empty).
	Exclude   []string
	Calendars []*Calendar
}

// TriggerAdvance is where one claimed trigger goes after a batch.
type TriggerAdvance struct {
	JobID      uuid.UUID
	NextFireAt *time.Time // nil: no further fire (delay done, cron exhausted)
	// LastExecutionID and LastScheduledFor are set when the batch fired it.
	LastExecutionID  uuid.UUID
	LastScheduledFor time.Time
}

// Overdue is the state of triggers that should have fired.
type Overdue struct {
	Late    int64         // unpaused triggers late by more than the threshold
	Longest time.Duration // how late the latest of all due triggers is
	// SetAside counts the jobs the trigger loop stopped firing because a
	// fire of them failed (not counted as late).
	SetAside int64
}

// MaxTriggers bounds a job's triggers.
const MaxTriggers = 16

// TriggerSpec is one trigger of a job with several: a cron expression in a
// timezone, or an interval. An interval in a list ticks on a fixed grid,
// every IntervalSeconds from the job's active_from (the Unix epoch when it
// has none), not from the previous tick: the previous tick may be another
// trigger's.
type TriggerSpec struct {
	Kind            TriggerKind `json:"kind"`
	CronExpr        string      `json:"cron,omitempty"`
	Timezone        string      `json:"timezone,omitempty"`
	IntervalSeconds int64       `json:"interval_seconds,omitempty"`
}
