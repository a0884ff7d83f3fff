package delivery

import (
	"bytes"
	"context"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"
)

// River gets a logger that passes warnings and errors only, with the
// attributes and groups it adds kept.
func TestRiverLogsWarningsOnly(t *testing.T) {
	var out bytes.Buffer
	logger := slog.New(minLevel{Handler: slog.NewTextHandler(&out, &slog.HandlerOptions{Level: slog.LevelDebug}),
		min: slog.LevelWarn}).With("component", "river")
	logger.Info("producer job counts")
	logger.Debug("elected leader")
	require.Empty(t, out.String())
	logger.WithGroup("queue").Warn("job failed to complete", "id", 7)
	require.Contains(t, out.String(), "component=river")
	require.Contains(t, out.String(), "queue.id=7")
	require.False(t, logger.Enabled(context.Background(), slog.LevelInfo))
	require.True(t, logger.Enabled(context.Background(), slog.LevelError))
}
