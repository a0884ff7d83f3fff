package cron

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/adhocore/gronx"
	"github.com/stretchr/testify/require"
)

// randomClockField returns a random second, minute or hour field using
// every form the dialect allows there.
func randomClockField(r *rand.Rand, hi int) string {
	items := make([]string, 1+r.IntN(3))
	for i := range items {
		a := r.IntN(hi + 1)
		b := a + r.IntN(hi+1-a)
		step := 1 + r.IntN(hi/2+1)
		items[i] = [...]string{
			"*", fmt.Sprint(a), fmt.Sprintf("%d-%d", a, b), fmt.Sprintf("*/%d", step),
			fmt.Sprintf("%d/%d", a, step), fmt.Sprintf("%d-%d/%d", a, b, step),
		}[r.IntN(6)]
	}
	return strings.Join(items, ",")
}

// TestClockMasksMatchGronx guards skipClock: its value sets must agree with
// gronx on every value of the second, minute and hour fields.
func TestClockMasksMatchGronx(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	for range 300 {
		for pos, f := range fields[:3] {
			text := randomClockField(r, f.hi)
			canon, mask, err := f.parse(text)
			require.NoError(t, err, text)
			for v := f.lo; v <= f.hi; v++ {
				c := &gronx.SegmentChecker{}
				c.SetRef(time.Date(2026, 1, 1, v*boolInt(pos == 2), v*boolInt(pos == 1), v*boolInt(pos == 0), 0, time.UTC))
				due, err := c.CheckDue(canon, pos)
				require.NoError(t, err)
				require.Equal(t, due, has(mask, v), "%s %q value %d", f.name, text, v)
			}
		}
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestSkipClock compares skipClock with a second-by-second scan.
func TestSkipClock(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(3, 4))
	for range 200 {
		expr := strings.Join([]string{randomClockField(r, 59), randomClockField(r, 59), randomClockField(r, 23), "*", "*", "*"}, " ")
		e, err := compile(expr)
		require.NoError(t, err)
		ref := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(r.IntN(86400)) * time.Second)
		want := ref.Add(time.Second)
		for !clockAllows(e, want) {
			want = want.Add(time.Second)
		}
		require.Equal(t, want.Add(-time.Second), e.skipClock(ref), "%q after %s", expr, ref)
	}
}

func clockAllows(e expression, t time.Time) bool {
	h, m, s := t.Clock()
	return has(e.clock[2], h) && has(e.clock[1], m) && has(e.clock[0], s)
}
