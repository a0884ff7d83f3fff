package dispatch_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/queue/axtype"
	"github.com/ax-scheduler/ax/queue/dispatch"
)

// londonDay lists the from of each hourly window of a local day and the
// day's end, as a person reading a Europe/London clock writes them.
func londonDay(date string, offsets func(hour int) string) []string {
	out := make([]string, 24)
	for h := range out {
		out[h] = fmt.Sprintf("%sT%02d:00:00%s", date, h, offsets(h))
	}
	return out
}

func TestGeneratedShardParamsTimeWindow(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		end           string // the fire's scheduled time
		window, count int
		froms         []string // from of each window; each to is the next from, the last one end
		to            string
		total         time.Duration // the windows' absolute span together
	}{
		// A day across the spring-forward (01:00 GMT → 02:00 BST) has 23
		// hours: the window of the skipped local hour 01:00-02:00 is empty.
		"London spring-forward day": {
			end: "2026-03-30T00:00:00+01:00", window: 86400, count: 24,
			froms: func() []string {
				f := londonDay("2026-03-29", func(h int) string { return map[bool]string{true: "+00:00", false: "+01:00"}[h < 1] })
				f[1] = "2026-03-29T02:00:00+01:00" // 01:00 does not exist: the gap's end
				return f
			}(),
			to: "2026-03-30T00:00:00+01:00", total: 23 * time.Hour,
		},
		// A day across the fall-back (02:00 BST → 01:00 GMT) has 25 hours:
		// the window of the repeated hour 01:00-02:00 holds both passes.
		"London fall-back day": {
			end: "2026-10-26T00:00:00+00:00", window: 86400, count: 24,
			froms: londonDay("2026-10-25", func(h int) string { return map[bool]string{true: "+01:00", false: "+00:00"}[h < 2] }),
			to:    "2026-10-26T00:00:00+00:00", total: 25 * time.Hour,
		},
		"London ordinary day": {
			end: "2026-07-02T00:00:00+01:00", window: 86400, count: 24,
			froms: londonDay("2026-07-01", func(int) string { return "+01:00" }),
			to:    "2026-07-02T00:00:00+01:00", total: 24 * time.Hour,
		},
		// Not whole days: absolute spans. The last hour before 01:00 GMT
		// is the second pass of the repeated hour.
		"London last hour at the fall-back": {
			end: "2026-10-25T01:00:00+00:00", window: 3600, count: 2,
			froms: []string{"2026-10-25T01:00:00+01:00", "2026-10-25T01:30:00+01:00"},
			to:    "2026-10-25T01:00:00+00:00", total: time.Hour,
		},
		"London 90 minutes over the spring-forward": {
			end: "2026-03-29T02:30:00+01:00", window: 5400, count: 3,
			froms: []string{"2026-03-29T00:00:00+00:00", "2026-03-29T00:30:00+00:00", "2026-03-29T02:00:00+01:00"},
			to:    "2026-03-29T02:30:00+01:00", total: 90 * time.Minute,
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			end, err := time.Parse(time.RFC3339, tc.end)
			require.NoError(t, err)
			params, err := dispatch.GeneratedShardParams(&axtype.ShardFire{
				Generator: axtype.ShardGenerator{Kind: axtype.ShardTimeWindow, WindowSeconds: tc.window},
				Timezone:  "Europe/London", Count: tc.count, ScheduledFor: end})
			require.NoError(t, err)
			require.Len(t, params, tc.count)
			var total time.Duration
			for i, p := range params {
				to := tc.to
				if i+1 < len(tc.froms) {
					to = tc.froms[i+1]
				}
				require.JSONEq(t, fmt.Sprintf(`{"from":%q,"to":%q}`, tc.froms[i], to), p, "shard %d", i)
				from, _ := time.Parse(time.RFC3339, tc.froms[i])
				until, _ := time.Parse(time.RFC3339, to)
				total += until.Sub(from)
			}
			require.Equal(t, tc.total, total)
		})
	}
}

// Hourly fires of the last hour tile the timeline across a fall-back:
// no instant is in two windows or in none.
func TestTimeWindowsOfHourlyFiresTile(t *testing.T) {
	t.Parallel()
	london, err := time.LoadLocation("Europe/London")
	require.NoError(t, err)
	start := time.Date(2026, 10, 24, 20, 0, 0, 0, time.UTC)
	prevEnd := start
	for h := 1; h <= 12; h++ {
		end := start.Add(time.Duration(h) * time.Hour)
		b, err := dispatch.WindowBounds(end, 3600, 4, london)
		require.NoError(t, err)
		require.Equal(t, prevEnd, b[0], "fire at %s starts where the previous ended", end)
		for i := 1; i < len(b); i++ {
			require.Equal(t, 15*time.Minute, b[i].Sub(b[i-1]))
		}
		prevEnd = b[len(b)-1]
	}
}

func TestGeneratedShardParamsMod(t *testing.T) {
	t.Parallel()
	params, err := dispatch.GeneratedShardParams(&axtype.ShardFire{Generator: axtype.ShardGenerator{Kind: axtype.ShardMod}, Count: 5})
	require.NoError(t, err)
	require.Len(t, params, 5)
	for i, p := range params {
		require.JSONEq(t, fmt.Sprintf(`{"modulus":5,"residue":%d}`, i), p)
	}
}

func TestWindowBoundsRefusesUnevenSplits(t *testing.T) {
	t.Parallel()
	_, err := dispatch.WindowBounds(time.Now(), 86400, 7, time.UTC)
	require.ErrorContains(t, err, "whole-second")
	_, err = dispatch.GeneratedShardParams(&axtype.ShardFire{Generator: axtype.ShardGenerator{Kind: axtype.ShardTimeWindow, WindowSeconds: 60},
		Timezone: "Mars/Olympus", Count: 1})
	require.ErrorContains(t, err, "timezone")
}
