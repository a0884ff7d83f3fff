package axtype

import (
	"encoding/json"
	"time"

	"github.com/google/uuid"
)

// CallbackRef names one delivery of an execution's callback.
type CallbackRef struct {
	ExecutionID uuid.UUID
	Delivery    int
}

// CallbackDelivery is what one delivery attempt needs.
type CallbackDelivery struct {
	ExecutionID, JobID uuid.UUID
	State              CallbackState // of the callback
	Delivery           int
	Attempts           int // made so far in this delivery
	// Sequence numbers the callback among its job's (gap-free from 1); 0
	// for a callback first made by a redelivery (the run ended while its
	// job had no callback URL).
	Sequence int64
	// WaitingFor is the execution of the earliest callback of the job
	// still pending before this one when the job's callbacks are ordered
	// ("": send now), and when that one's next attempt is due (nil: not
	// known, e.g. its first attempt is under way or its host's breaker
	// holds it).
	WaitingFor         string
	WaitingNextAttempt *time.Time
	URL                string // the job's callback URL now ("" when removed)
	JobName, JobGroup  string
	Secrets            []string // current first; the previous one while a rotation lasts

	Cause          ExecutionCause
	ExecutionState ExecutionState
	ScheduledFor   time.Time
	FiredAt        time.Time
	StartedAt      *time.Time
	FinishedAt     *time.Time
	Error          string // the execution's own error, or its cancel reason
	ShardCount     int
	Misfired       bool
	Params         json.RawMessage
	TraceParent    string // W3C trace context of the run ("" when none)
	// ShardCounts counts all shards by state; Shards lists the first ones
	// as JSON objects (index, param, state, attempts, result, error,
	// error_code, started_at, finished_at).
	ShardCounts map[string]int
	Shards      json.RawMessage
	// ShardErrorCodes counts the shards that ended without succeeding by
	// their error code (shards without a code are not counted).
	ShardErrorCodes map[string]int
}

// CallbackAttemptRecord is one delivery attempt and where the callback
// goes after it.
type CallbackAttemptRecord struct {
	CallbackRef
	Attempt    int
	URL        string
	At         time.Time
	StatusCode int // 0: no answer
	Latency    time.Duration
	Error      string
	// Then is the callback's state afterwards; NextAttemptAt is set when it
	// stays pending.
	Then          CallbackState
	NextAttemptAt *time.Time
}

// Callback is the delivery state of an execution's callback.
type Callback struct {
	ExecutionID   uuid.UUID
	State         CallbackState
	Delivery      int
	Attempts      int
	LastStatus    int
	LastError     string
	NextAttemptAt *time.Time
	DeliveredAt   *time.Time
	FailedAt      *time.Time
	CreatedAt     time.Time
	History       []CallbackAttempt // oldest first
}
