package delivery

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/ax-scheduler/ax/queue/axtype"
)

// CallbackPayload is the JSON body of a callback: what ended, how, and
// each shard's outcome. The body is the same on every attempt of a
// delivery; webhook-id (the execution id) is the receiver's key to
// deduplicate on.
type CallbackPayload struct {
	Type        string `json:"type"` // "execution.ended"
	ExecutionID string `json:"execution_id"`
	JobID       string `json:"job_id"`
	JobName     string `json:"job_name"`
	JobGroup    string `json:"job_group"`
	// Sequence numbers the callback among its job's: 1, 2, 3… without
	// gaps, in the order the runs ended (0 for a callback a redelivery
	// made for a run that ended while its job had no callback URL).
	Sequence int64  `json:"sequence"`
	Cause    string `json:"cause"`
	// RerunOf is the run this one re-runs (cause rerun).
	RerunOf      string          `json:"rerun_of,omitempty"`
	ScheduledFor time.Time       `json:"scheduled_for"`
	Misfired     bool            `json:"misfired"`
	State        string          `json:"state"`
	Timings      CallbackTimings `json:"timings"`
	Params       json.RawMessage `json:"params"`
	Shards       CallbackShards  `json:"shards"`
	// Result is the one shard's result for a single-shard execution (each
	// shard's is under shards.items otherwise).
	Result json.RawMessage `json:"result"`
	// Error is why the execution did not succeed: its own error or cancel
	// reason, else the first failed shard's error.
	Error string `json:"error,omitempty"`
	// ErrorCode is the error code of the first listed shard that ended
	// without succeeding and has one (exit_3, http_503…).
	ErrorCode string `json:"error_code,omitempty"`
}

// CallbackTimings are an execution's times.
type CallbackTimings struct {
	FiredAt    time.Time  `json:"fired_at"`
	StartedAt  *time.Time `json:"started_at,omitempty"`
	FinishedAt *time.Time `json:"finished_at,omitempty"`
	DurationMS *int64     `json:"duration_ms,omitempty"` // from started_at to finished_at
}

// CallbackShards summarizes the shards: counts by state, and the first
// MaxShards of them, as many as MaxShardBytes holds (CallbackConfig).
type CallbackShards struct {
	Total   int            `json:"total"`
	ByState map[string]int `json:"by_state"`
	// ByErrorCode counts all shards that ended without succeeding by their
	// error code; shards without one are not counted.
	ByErrorCode map[string]int  `json:"by_error_code"`
	Items       json.RawMessage `json:"items"` // []CallbackShard
	Truncated   bool            `json:"truncated"`
}

// CallbackShard is one shard's outcome, as payloads list it.
type CallbackShard struct {
	Index    int    `json:"index"`
	Param    string `json:"param"`
	State    string `json:"state"`
	Attempts int    `json:"attempts"`
	// IdempotencyKey is the task's key: the one its Go handler's
	// Task.IdempotencyKey returns and its HTTP request's Idempotency-Key.
	IdempotencyKey string          `json:"idempotency_key"`
	Result         json.RawMessage `json:"result,omitempty"`
	Error          string          `json:"error,omitempty"`
	ErrorCode      string          `json:"error_code,omitempty"`
	StartedAt      *time.Time      `json:"started_at,omitempty"`
	FinishedAt     *time.Time      `json:"finished_at,omitempty"`
}

// callbackPayload builds the body of d's callback, listing the shards d
// holds (CallbackConfig's MaxShards and MaxShardBytes).
func callbackPayload(d *axtype.CallbackDelivery) ([]byte, error) {
	p := &CallbackPayload{Type: "execution.ended", ExecutionID: d.ExecutionID.String(), JobID: d.JobID.String(),
		JobName: d.JobName, JobGroup: d.JobGroup, Sequence: d.Sequence, Cause: string(d.Cause), RerunOf: d.RerunOf, ScheduledFor: d.ScheduledFor, Misfired: d.Misfired,
		State: string(d.ExecutionState), Params: d.Params, Error: d.Error, Result: json.RawMessage("null"),
		Timings: CallbackTimings{FiredAt: d.FiredAt, StartedAt: d.StartedAt, FinishedAt: d.FinishedAt},
		Shards:  CallbackShards{ByState: d.ShardCounts, ByErrorCode: d.ShardErrorCodes, Items: d.Shards}}
	if p.Shards.ByErrorCode == nil {
		p.Shards.ByErrorCode = map[string]int{}
	}
	if d.StartedAt != nil && d.FinishedAt != nil {
		ms := d.FinishedAt.Sub(*d.StartedAt).Milliseconds()
		p.Timings.DurationMS = &ms
	}
	for _, n := range d.ShardCounts {
		p.Shards.Total += n
	}
	if err := summarizeShards(p); err != nil {
		return nil, fmt.Errorf("error reading shards of execution %s: %w", d.ExecutionID, err)
	}
	body, err := json.Marshal(p)
	if err != nil {
		return nil, fmt.Errorf("error encoding callback of execution %s: %w", d.ExecutionID, err)
	}
	return body, nil
}

// summarizeShards fills the payload's result (a single shard's), error
// (the first failed shard's, when the execution has none of its own) and
// error code (the first failed shard's that has one).
func summarizeShards(p *CallbackPayload) error {
	var shards []CallbackShard
	if err := json.Unmarshal(p.Shards.Items, &shards); err != nil {
		return err
	}
	for _, s := range shards {
		if s.State == string(axtype.TaskSucceeded) {
			continue
		}
		if p.Error == "" && s.Error != "" {
			p.Error = fmt.Sprintf("shard %d: %s", s.Index, s.Error)
		}
		if p.ErrorCode == "" {
			p.ErrorCode = s.ErrorCode
		}
	}
	if p.Shards.Total == 1 && len(shards) == 1 && len(shards[0].Result) > 0 {
		p.Result = shards[0].Result
	}
	p.Shards.Truncated = p.Shards.Total > len(shards)
	return nil
}
