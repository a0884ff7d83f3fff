package db_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io/fs"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/db"
	"github.com/ax-scheduler/ax/migrations"
)

// Migrating a new database logs one line at info (how many, from which to
// which) and each migration at debug; an upgrade of a few migrations logs
// one line per migration at info, naming it (never one per statement, as
// goose's verbose mode did: hundreds on a first start); a current schema
// logs nothing.
func TestMigrateLogsOneLinePerMigration(t *testing.T) {
	t.Parallel()
	pool := emptyDatabase(t)
	var out bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&out, &slog.HandlerOptions{Level: slog.LevelDebug}))
	require.NoError(t, db.Migrate(context.Background(), pool, logger))

	files, err := fs.Glob(migrations.FS(), "*.sql")
	require.NoError(t, err)
	want := len(files) + len(migrations.GoMigrations())
	type record struct {
		Level   string `json:"level"`
		Msg     string `json:"msg"`
		Version int64  `json:"version"`
		Source  string `json:"source"`
		Applied int    `json:"applied"`
	}
	records := func() []record {
		var out2 []record
		for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
			var rec record
			require.NoError(t, json.Unmarshal([]byte(line), &rec), line)
			out2 = append(out2, rec)
		}
		return out2
	}
	recs := records()
	require.Len(t, recs, want+1, out.String())
	sources := map[string]bool{}
	for _, rec := range recs[:want] {
		require.Equal(t, "migration applied", rec.Msg)
		require.Equal(t, "DEBUG", rec.Level)
		require.Positive(t, rec.Version)
		sources[rec.Source] = true
	}
	for _, f := range files {
		require.True(t, sources[f], "%s is logged", f)
	}
	require.Equal(t, record{Level: "INFO", Msg: "schema migrated", Applied: want}, recs[want])

	out.Reset()
	require.NoError(t, db.Migrate(context.Background(), pool, logger))
	require.Empty(t, out.String(), "a current schema logs nothing")

	// An upgrade: the newest two again.
	m, err := db.NewMigrator(pool, nil)
	require.NoError(t, err)
	defer m.Close()
	for range 2 {
		_, err := m.Down(context.Background())
		require.NoError(t, err)
	}
	require.NoError(t, db.Migrate(context.Background(), pool, logger))
	recs = records()
	require.Len(t, recs, 2, out.String())
	for i, rec := range recs {
		require.Equal(t, "INFO", rec.Level)
		require.Equal(t, "migration applied", rec.Msg)
		require.Equal(t, files[len(files)-2+i], rec.Source)
	}
}
