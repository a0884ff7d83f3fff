package axtype

import (
	"time"

	"github.com/google/uuid"
)

// HistorySetting is the server-wide retention of finished runs and the
// layout of the history partitions (ax.history_setting).
type HistorySetting struct {
	Retention       time.Duration // succeeded and cancelled runs
	FailedRetention time.Duration // failed and timed-out runs
	PartitionWidth  time.Duration // the time range of one history partition
	MadeUntil       time.Time     // upper bound of the newest partition
}

// HistoryPartition is one partition of a history table.
type HistoryPartition struct {
	Name      string // the partition's table, in schema ax
	Table     string // execution_history, task_history or one of KeyedTables
	RangeFrom time.Time
	RangeTo   time.Time
}

// PartitionRows is what a history partition holds: its row count and
// the lowest and highest id (nil when empty).
type PartitionRows struct {
	Count        int64
	MinID, MaxID *uuid.UUID
}

// HistoryDrop is one dropped history partition.
type HistoryDrop struct {
	Table              string
	RangeFrom, RangeTo time.Time
	Rows               int64
	DroppedAt          time.Time
}
