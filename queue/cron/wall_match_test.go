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

// randomDateFields returns random day-of-month, month and day-of-week
// fields, specials included.
func randomDateFields(r *rand.Rand) (dom, mon, dow string) {
	pick := func(opts ...string) string { return opts[r.IntN(len(opts))] }
	d, n, w := 1+r.IntN(31), 1+r.IntN(12), r.IntN(8)
	dom = pick("*", "?", fmt.Sprint(d), fmt.Sprintf("%d-%d", d, d+r.IntN(32-d)), fmt.Sprintf("*/%d", 1+r.IntN(15)),
		fmt.Sprintf("%d/%d", d, 1+r.IntN(10)), "L", fmt.Sprintf("%dW", d), fmt.Sprintf("%d,L", d), fmt.Sprintf("%d,%dW", d, 1+r.IntN(31)))
	mon = pick("*", "*", fmt.Sprint(n), fmt.Sprintf("%d-%d", n, n+r.IntN(13-n)), fmt.Sprintf("*/%d", 1+r.IntN(6)), "FEB", "JAN,JUL", "feb-apr")
	dow = pick("*", "?", fmt.Sprint(w), fmt.Sprintf("%d-%d", w, w+r.IntN(8-w)), fmt.Sprintf("*/%d", 1+r.IntN(4)),
		fmt.Sprintf("%dL", w), fmt.Sprintf("%d#%d", w, 1+r.IntN(5)), "MON-FRI", "SAT,SUN", "FRI-SUN", fmt.Sprintf("%d,%d#%d", w, r.IntN(8), 1+r.IntN(5)))
	return dom, mon, dow
}

// TestNextWallMatchesScan checks the wall-time search (gronx started after
// skipClock) against a day-by-day scan with gronx's per-instant check.
func TestNextWallMatchesScan(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(5, 6))
	checked := 0
	for checked < 200 {
		dom, mon, dow := randomDateFields(r)
		expr := strings.Join([]string{fmt.Sprint(r.IntN(60)), randomClockField(r, 59), randomClockField(r, 23), dom, mon, dow}, " ")
		e, err := compile(expr)
		if err != nil {
			continue // ? in both day fields, or never fires
		}
		ref := time.Date(2020+r.IntN(10), time.Month(1+r.IntN(12)), 1+r.IntN(28), r.IntN(24), r.IntN(60), r.IntN(60), 0, time.UTC)
		want, found := scanWall(t, e, ref, 2*366)
		if !found {
			continue // a rare date: scanning years is slow under -race
		}
		got, ok := e.nextWall(ref)
		require.True(t, ok, "%q after %s", expr, ref)
		require.Equal(t, want, got, "%q after %s", expr, ref)
		checked++
	}
}

// scanWall finds the first match after ref within days by trying, day by
// day, the first time of day the clock fields allow.
func scanWall(t *testing.T, e expression, ref time.Time, days int) (time.Time, bool) {
	day := startOfDay(ref)
	for i := 0; i < days; i++ {
		var at time.Time
		if clock, ok := e.nextClock(0, 0, 0); i > 0 || !ok {
			at = day.Add(clock)
		} else {
			h, m, s := ref.Clock()
			c, ok := e.nextClock(h, m, s+1)
			if !ok {
				day = day.AddDate(0, 0, 1)
				continue
			}
			at = day.Add(c)
		}
		due, err := gronx.New().IsDue(e.gronx, at)
		require.NoError(t, err)
		if due {
			return at, true
		}
		day = day.AddDate(0, 0, 1)
	}
	return time.Time{}, false
}

// TestEveryDayNextWallMatchesGronx: when the date fields are * (or ?),
// nextWall answers from the clock fields alone; gronx's own search, from
// ref itself, must agree.
func TestEveryDayNextWallMatchesGronx(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(7, 8))
	for range 300 {
		anyDay := func() string { return []string{"*", "?"}[r.IntN(2)] }
		expr := strings.Join([]string{randomClockField(r, 59), randomClockField(r, 59), randomClockField(r, 23), anyDay(), "*", anyDay()}, " ")
		e, err := compile(expr)
		if err != nil {
			continue // ? in both day fields
		}
		require.True(t, e.everyDay, expr)
		ref := time.Date(2020+r.IntN(10), time.Month(1+r.IntN(12)), 1+r.IntN(31), r.IntN(24), r.IntN(60), r.IntN(60), r.IntN(1e9), time.UTC)
		want, err := gronx.NextTickAfter(e.gronx, ref, false)
		require.NoError(t, err, "%q after %s", expr, ref)
		got, ok := e.nextWall(ref)
		require.True(t, ok, "%q after %s", expr, ref)
		require.Equal(t, want, got, "%q after %s", expr, ref)
	}
	for _, expr := range []string{"0 0 1 * *", "0 0 * 1 *", "0 0 * * 1", "0 0 L * *", "0 0 ? * MON-FRI"} {
		e, err := compile(expr)
		require.NoError(t, err)
		require.False(t, e.everyDay, "%q goes through gronx", expr)
	}
}
