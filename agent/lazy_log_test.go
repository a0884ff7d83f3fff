package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// countingHandler counts WithAttrs calls, the formatting lazyAttrs defers.
type countingHandler struct {
	slog.Handler
	withAttrs *int
}

func (h countingHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	*h.withAttrs++
	return countingHandler{h.Handler.WithAttrs(attrs), h.withAttrs}
}

func TestTaskLoggerFormatsIDsOnlyWhenItLogs(t *testing.T) {
	var buf bytes.Buffer
	calls := 0
	base := countingHandler{slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}), &calls}
	a := &Agent{log: slog.New(base)}
	log := a.taskLogger(LeasedTask{TaskID: "t1", ExecutionID: "e1", JobID: "j1", ShardIndex: 2})

	log.DebugContext(context.Background(), "below the level")
	require.Zero(t, calls, "nothing logged, nothing formatted")
	require.Empty(t, buf.String())

	log.Info("first")
	log.With("extra", 1).Info("second")
	log.WithGroup("g").Info("third", "k", "v")
	require.Equal(t, 2, calls, "the ids once, then the derived logger's own attrs")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	require.Len(t, lines, 3)
	for _, line := range lines {
		var rec map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &rec))
		require.Equal(t, "e1", rec["execution_id"], line)
		require.Equal(t, "t1", rec["task_id"], line)
		require.Equal(t, "j1", rec["job_id"], line)
		require.EqualValues(t, 2, rec["shard_index"], line)
	}
}
