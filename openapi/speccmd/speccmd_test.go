package speccmd_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/openapi"
	"github.com/ax-scheduler/ax/openapi/speccmd"
)

// TestCommandWritesTheCommittedSpecs: the command make generate runs (as
// openapi/specgen) writes the committed documents byte for byte, and
// --print prints openapi.yaml's bytes (cmd/ax's TestOpenAPIIsSpeccmd ties
// `ax openapi` to this command).
func TestCommandWritesTheCommittedSpecs(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var out bytes.Buffer
	cmd := speccmd.Command()
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"--dir", dir})
	require.NoError(t, cmd.Execute())
	for _, name := range []string{openapi.SpecFile31, openapi.SpecFile30} {
		require.Contains(t, out.String(), "wrote "+filepath.Join(dir, name))
		requireSameFile(t, filepath.Join("..", name), filepath.Join(dir, name))
	}

	out.Reset()
	cmd = speccmd.Command()
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"--print"})
	require.NoError(t, cmd.Execute())
	committed, err := os.ReadFile(filepath.Join("..", openapi.SpecFile31))
	require.NoError(t, err)
	require.True(t, bytes.Equal(committed, out.Bytes()), "--print prints %s's bytes", openapi.SpecFile31)
}

func requireSameFile(t *testing.T, want, got string) {
	t.Helper()
	w, err := os.ReadFile(want)
	require.NoError(t, err)
	g, err := os.ReadFile(got)
	require.NoError(t, err)
	require.True(t, bytes.Equal(w, g), "%s differs from the committed %s (run make generate)", got, want)
}
