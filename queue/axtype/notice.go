package axtype

import (
	"time"

	"github.com/google/uuid"
)

// NoticeEvent is what a failure notice tells, ax.notice_event.
type NoticeEvent string

// Notice events.
const (
	NoticeFailed         NoticeEvent = "failed"          // a run failed for good: an incident opens
	NoticeRecovered      NoticeEvent = "recovered"       // the first success after failures
	NoticeSetAside       NoticeEvent = "set_aside"       // the job's trigger was quarantined
	NoticeCallbackFailed NoticeEvent = "callback_failed" // a callback was given up
)

// NoticeEvents are all events, in the order the API lists them.
var NoticeEvents = []NoticeEvent{NoticeFailed, NoticeRecovered, NoticeSetAside, NoticeCallbackFailed}

// NoticeKind is how a target is told, ax.notice_kind.
type NoticeKind string

// Notice kinds.
const (
	NoticeSlack   NoticeKind = "slack"   // POST {"text": ...} to an incoming webhook
	NoticeWebhook NoticeKind = "webhook" // JSON signed per Standard Webhooks
)

// NoticeState is the delivery state of a notice, ax.notice_state.
type NoticeState string

// Notice states.
const (
	NoticePending     NoticeState = "pending"
	NoticeDelivered   NoticeState = "delivered"
	NoticeGivenUp     NoticeState = "notice_failed"
	NoticeRateLimited NoticeState = "rate_limited"
)

// MaxNoticeTargets bounds the targets of one job (a check constraint holds
// the same bound).
const MaxNoticeTargets = 10

// NoticeTarget is where a job's notices go. Events empty means all.
type NoticeTarget struct {
	Kind   NoticeKind
	URL    string
	Events []NoticeEvent
	// The incident, as last moved by a run (read only).
	IncidentOpen  bool
	IncidentSince *time.Time
	FailedRuns    int
}

// Notice is one notice and its delivery.
type Notice struct {
	ID            int64
	Event         NoticeEvent
	ExecutionID   *uuid.UUID
	Detail        string
	FailedRuns    int
	Coalesced     int
	State         NoticeState
	Attempts      int
	LastStatus    int
	LastError     string
	NextAttemptAt *time.Time
	DeliveredAt   *time.Time
	FailedAt      *time.Time
	CreatedAt     time.Time
	TargetKind    NoticeKind
	TargetURL     string
}

// NoticeDelivery is what one delivery attempt of a notice needs.
type NoticeDelivery struct {
	ID            int64
	JobID         uuid.UUID
	JobName       string
	JobGroup      string
	Event         NoticeEvent
	ExecutionID   *uuid.UUID
	Detail        string
	FailedRuns    int
	Coalesced     int
	State         NoticeState
	Attempts      int
	CreatedAt     time.Time
	IncidentSince *time.Time
	Kind          NoticeKind
	URL           string
	Secrets       []string
}
