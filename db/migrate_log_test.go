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

// Migrating logs one line per migration applied, naming it (not one per
// statement, as goose's verbose mode did: hundreds on a first start), and
// nothing when the schema is current.
func TestMigrateLogsOneLinePerMigration(t *testing.T) {
	t.Parallel()
	pool := emptyDatabase(t)
	var out bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&out, nil))
	require.NoError(t, db.Migrate(context.Background(), pool, logger))

	files, err := fs.Glob(migrations.FS(), "*.sql")
	require.NoError(t, err)
	want := len(files) + len(migrations.GoMigrations())
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.Len(t, lines, want, out.String())
	sources := map[string]bool{}
	for _, line := range lines {
		var rec struct {
			Msg     string `json:"msg"`
			Version int64  `json:"version"`
			Source  string `json:"source"`
		}
		require.NoError(t, json.Unmarshal([]byte(line), &rec))
		require.Equal(t, "migration applied", rec.Msg)
		require.Positive(t, rec.Version)
		sources[rec.Source] = true
	}
	for _, f := range files {
		require.True(t, sources[f], "%s is logged", f)
	}

	out.Reset()
	require.NoError(t, db.Migrate(context.Background(), pool, logger))
	require.Empty(t, out.String(), "a current schema logs nothing")
}
