package axtype_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/queue/axtype"
)

func TestValidErrorCode(t *testing.T) {
	t.Parallel()
	for code, ok := range map[string]bool{
		"exit_3": true, "signal_killed": true, "http_503": true, "quota.exceeded-v2": true, strings.Repeat("a", 64): true,
		"": false, strings.Repeat("a", 65): false, "Exit_3": false, "exit 3": false, "café": false, "a/b": false,
		"exit_3\n": false,
	} {
		require.Equal(t, ok, axtype.ValidErrorCode(code), "%q", code)
	}
}
