package openapi_test

import (
	"bytes"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/openapi"
)

// TestSpecIsCurrent fails when the committed specs differ from what the
// code generates: run `make generate` and commit.
func TestSpecIsCurrent(t *testing.T) {
	t.Parallel()
	v31, v30, err := openapi.Spec()
	require.NoError(t, err)
	for file, want := range map[string][]byte{"openapi.yaml": v31, "openapi-3.0.yaml": v30} {
		got, err := os.ReadFile(file)
		require.NoError(t, err)
		if string(want) != string(got) {
			t.Errorf("%s is stale: run `make generate` (first difference at line %d)", file, firstDiffLine(want, got))
		}
	}
}

func firstDiffLine(a, b []byte) int {
	la, lb := bytes.Split(a, []byte("\n")), bytes.Split(b, []byte("\n"))
	for i := range min(len(la), len(lb)) {
		if !bytes.Equal(la[i], lb[i]) {
			return i + 1
		}
	}
	return min(len(la), len(lb)) + 1
}
