package pglocal

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestHaltAndStart takes a started cluster down and brings it back on the
// same URL with its data, as the e2e tests of a database restart need.
func TestHaltAndStart(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	srv := find(t, Options{SkipEnv: true, SkipLocal: true})
	execSQL(t, srv.URL, "CREATE TABLE ax_probe (id bigint PRIMARY KEY); INSERT INTO ax_probe VALUES (7)")

	require.NoError(t, srv.Halt())
	require.False(t, answers(t, srv.URL), "port still answers after Halt")
	require.DirExists(t, srv.Dir, "Halt keeps the cluster")
	require.NoError(t, srv.Halt(), "second Halt")

	require.NoError(t, srv.Start(ctx))
	require.NoError(t, srv.Start(ctx), "Start of a running server")
	var id int
	require.NoError(t, connect(t, srv.URL).QueryRow(ctx, "SELECT id FROM ax_probe").Scan(&id))
	require.Equal(t, 7, id, "committed data survives the restart")

	require.NoError(t, srv.Halt())
	require.NoError(t, srv.Stop(), "Stop after Halt")
	require.NoDirExists(t, srv.Dir)
	require.ErrorIs(t, srv.Start(ctx), ErrNotStarted, "a stopped server stays stopped")
	require.ErrorIs(t, srv.Halt(), ErrNotStarted)
}

func TestHaltAndStartNeedAStartedCluster(t *testing.T) {
	t.Parallel()
	srv := &Server{URL: localURL, Source: SourceLocal}
	require.ErrorIs(t, srv.Halt(), ErrNotStarted, "never halt a server this package did not start")
	require.ErrorIs(t, srv.Start(t.Context()), ErrNotStarted)
}
