package main

import (
	"bytes"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestOpenAPIIsSpeccmd: `ax openapi --print` prints the committed
// openapi.yaml, the bytes make generate writes with openapi/specgen (the
// same command, package speccmd).
func TestOpenAPIIsSpeccmd(t *testing.T) {
	t.Parallel()
	root := newRootCommand()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetArgs([]string{"openapi", "--print"})
	require.NoError(t, root.Execute())
	committed, err := os.ReadFile("../../openapi/openapi.yaml")
	require.NoError(t, err)
	require.True(t, bytes.Equal(committed, out.Bytes()), "ax openapi --print prints openapi/openapi.yaml's bytes")
}
