package openapi

import (
	"context"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/ax-scheduler/ax/queue"
)

// History is the server's retention of ended runs and what maintenance
// removed lately.
type History struct {
	RetentionSeconds       int64         `json:"retention_seconds" doc:"How long succeeded and cancelled runs are kept after they end, unless their job says otherwise (ax serve --history-retention; default 7 days)"`
	FailedRetentionSeconds int64         `json:"failed_retention_seconds" doc:"How long failed and timed-out runs are kept after they end, unless their job says otherwise (ax serve --history-failed-retention; default 30 days)"`
	PartitionWidthSeconds  int64         `json:"partition_width_seconds" doc:"Time range of one history partition: a run is removed within this long after its retention has passed"`
	PartitionsUntil        time.Time     `json:"partitions_until" doc:"Upper bound of the history partitions made ahead"`
	Drops                  []HistoryDrop `json:"drops" doc:"The latest partitions dropped, newest first"`
}

// HistoryDrop is one dropped history partition.
type HistoryDrop struct {
	Table     string    `json:"table" enum:"execution_history,task_history,task_event,callback,callback_attempt,skipped_fire" doc:"The partitioned table: the history tables by retain_until, events, callbacks and attempts by execution id (a UUIDv7, so a range of fire times), skip records by recorded_at"`
	From      time.Time `json:"from" doc:"Start of the partition's range: of retain_until, of the fire times of its execution ids, or of recorded_at (1970-01-01 for the partition below all others)"`
	To        time.Time `json:"to" doc:"End of that range: every row in it was past its retention, or no run of its ids remained"`
	Rows      int64     `json:"rows" doc:"Rows removed"`
	DroppedAt time.Time `json:"dropped_at"`
}

type historyHandlers struct {
	history *queue.HistoryService
}

type historyInput struct {
	Drops int `query:"drops" minimum:"0" maximum:"1000" default:"20" doc:"How many of the latest drops to show"`
}

type historyOutput struct {
	Body *History
}

func (h *historyHandlers) register(api huma.API) {
	register(api, requireScope(huma.Operation{
		OperationID: "get-history", Method: http.MethodGet, Path: "/v1/history", Tags: []string{"Executions"},
		Summary: "Show the history retention in force and the latest partitions dropped",
		Description: "Ended runs move to history tables partitioned by when they may be removed; maintenance drops " +
			"whole partitions past their range (never deletes row by row). A job's history.retention_seconds and " +
			"history.failed_retention_seconds override the server's. GET /v1/executions/{id} of a removed run answers 410.",
	}, ScopeRead), h.get)
}

func (h *historyHandlers) get(ctx context.Context, in *historyInput) (*historyOutput, error) {
	st, err := h.history.Status(ctx, in.Drops)
	if err != nil {
		return nil, err
	}
	s := st.Setting
	out := &History{RetentionSeconds: int64(s.Retention.Seconds()), FailedRetentionSeconds: int64(s.FailedRetention.Seconds()),
		PartitionWidthSeconds: int64(s.PartitionWidth.Seconds()), PartitionsUntil: s.MadeUntil,
		Drops: make([]HistoryDrop, 0, len(st.Drops))}
	for _, d := range st.Drops {
		out.Drops = append(out.Drops, HistoryDrop{Table: d.Table, From: d.RangeFrom, To: d.RangeTo, Rows: d.Rows,
			DroppedAt: d.DroppedAt})
	}
	return &historyOutput{Body: out}, nil
}
