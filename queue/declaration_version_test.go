package queue

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCompareVersions(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		a, b string
		want int
	}{
		{"", "", 0},
		{"", "1", -1},
		{"1", "", 1},
		{"1", "2", -1},
		{"2", "10", -1},
		{"1.9.3", "1.10.0", -1},
		{"v1", "v2", -1},
		{"v1.2", "v1.2", 0},
		{"v1.2", "v1.2.1", -1},
		{"1.2.0", "1.2", 1},
		{"007", "7", 0},
		{"20260228", "20260301", -1},
		{"1.0.0-rc1", "1.0.0-rc2", -1},
		{"abc", "abd", -1},
		{"1a", "1b", -1},
		{"a", "1", 1}, // a number run sorts before text
		{"99999999999999999999999", "100000000000000000000000", -1},
	} {
		require.Equal(t, c.want, CompareVersions(c.a, c.b), "%q vs %q", c.a, c.b)
		require.Equal(t, -c.want, CompareVersions(c.b, c.a), "%q vs %q", c.b, c.a)
	}
}
