package cron

import (
	"encoding/json"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/adhocore/gronx"
	"github.com/stretchr/testify/require"
)

// referencePath holds expected fire times across real transitions,
// computed by an independent implementation (a copy of the team's shared
// reference data, kept in the repo so a clone tests on its own).
const referencePath = "testdata/cron-dst-cases.json"

type referenceCase struct {
	Expr     string      `json:"expr"`
	Timezone string      `json:"timezone"`
	After    time.Time   `json:"after"`
	Next     []time.Time `json:"next"`
}

func loadReferenceCases(t *testing.T) []referenceCase {
	t.Helper()
	data, err := os.ReadFile(referencePath)
	if err != nil {
		t.Fatalf("the DST reference cases are required (%s): %v", referencePath, err)
	}
	var cases []referenceCase
	require.NoError(t, json.Unmarshal(data, &cases))
	require.NotEmpty(t, cases, "no cases in %s", referencePath)
	return cases
}

func TestDSTReferenceCases(t *testing.T) {
	t.Parallel()
	for _, tc := range loadReferenceCases(t) {
		t.Run(tc.Timezone+" "+tc.Expr+" after "+tc.After.Format(time.RFC3339), func(t *testing.T) {
			t.Parallel()
			s, err := Parse(tc.Expr, tc.Timezone)
			require.NoError(t, err)
			require.Equal(t, utc(tc.Next), s.NextN(tc.After, 4))
		})
	}
}

func utc(ts []time.Time) []time.Time {
	out := make([]time.Time, len(ts))
	for i, t := range ts {
		out[i] = t.UTC()
	}
	return out
}

// TestStrictlyIncreasing walks a year of fires in zones with transitions.
func TestStrictlyIncreasing(t *testing.T) {
	t.Parallel()
	exprs := []string{"0 30 2 * * *", "0 0 1-3 * * *", "0 */20 2 * * *", "30 1 * * SUN", "@hourly", "@daily"}
	for _, tz := range []string{"America/New_York", "Europe/London", "Australia/Sydney"} {
		for _, expr := range exprs {
			t.Run(tz+" "+expr, func(t *testing.T) {
				t.Parallel()
				s, err := Parse(expr, tz)
				require.NoError(t, err)
				prev := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
				for end := prev.AddDate(1, 0, 0); prev.Before(end); {
					next := s.Next(prev)
					require.True(t, next.After(prev), "Next(%s) = %s", prev, next)
					prev = next
				}
			})
		}
	}
}

// TestOncePerLocalDate checks "0 30 2 * * *" in New York over 2026: one
// fire per local date, at 02:30 except in the spring-forward gap.
func TestOncePerLocalDate(t *testing.T) {
	t.Parallel()
	s, err := Parse("0 30 2 * * *", "America/New_York")
	require.NoError(t, err)
	fires := s.NextN(time.Date(2026, 1, 1, 5, 0, 0, 0, time.UTC), 365)
	require.Len(t, fires, 365)
	day := time.Date(2026, 1, 1, 0, 0, 0, 0, s.Location())
	for i, f := range fires {
		local := f.In(s.Location())
		require.Equal(t, day.AddDate(0, 0, i).Format(time.DateOnly), local.Format(time.DateOnly))
		switch local.Format(time.DateOnly) {
		case "2026-03-08":
			require.Equal(t, "2026-03-08T07:00:00Z", f.Format(time.RFC3339), "02:30 is skipped: fire at the gap's end, 03:00 EDT")
		case "2026-11-01":
			require.Equal(t, "2026-11-01T07:30:00Z", f.Format(time.RFC3339))
		default:
			require.Equal(t, "02:30:00", local.Format(time.TimeOnly))
		}
	}
}

// TestNextFromInsideTransitions starts from every minute around each 2026
// New York transition, including inside the repeated hour.
func TestNextFromInsideTransitions(t *testing.T) {
	t.Parallel()
	for _, expr := range []string{"0 30 2 * * *", "0 30 1 * * *", "0 */15 * * * *", "0 */20 1-2 * * *", "*/30 * 1 * * *"} {
		t.Run(expr, func(t *testing.T) {
			t.Parallel()
			s, err := Parse(expr, "America/New_York")
			require.NoError(t, err)
			for _, tr := range []string{"2026-03-08T07:00:00Z", "2026-11-01T06:00:00Z"} {
				at := ts(t, tr)
				for after := at.Add(-3 * time.Hour); after.Before(at.Add(3 * time.Hour)); after = after.Add(time.Minute) {
					fires := s.NextN(after, 3)
					require.Len(t, fires, 3)
					require.True(t, fires[0].After(after))
					require.True(t, fires[1].After(fires[0]) && fires[2].After(fires[1]), "after %s: %v", after, fires)
				}
			}
		})
	}
}

// oracleExprs are dense (daily or more) expressions with second 0, for
// the minute-by-minute oracle.
var oracleExprs = []string{
	"0 30 2 * * *", "0 0 2 * * *", "0 */20 2 * * *", "0 0 * * * *", "0 */15 * * * *",
	"0 30 1 * * *", "0 0 1-3 * * *", "0 0 0 * * *", "0 45 23 * * *", "0 */7 0-3 * * *",
	"0 0,30 * * * *", "0 59 1 * * *", "0 0 */2 * * *", "0 15 0,1,2,3 * * *", "0 * 2 * * *",
	"0 0 12 * * *", "0 10/25 0-2,22-23 * * *", "0 5 1,3 * * *", "0 0 0-23 * * *", "0 40 */1 * * *",
}

// oracleZones have transitions of various shapes: 1 hour, 30 minutes
// (Lord Howe), at midnight (Santiago, Havana), 2 hours (Troll), a skipped
// day (Apia 2011) and a permanent change (Moscow 2014).
var oracleZones = []struct {
	tz       string
	from, to time.Time
}{
	{"America/New_York", date(2026, 1), date(2027, 1)},
	{"Europe/London", date(2026, 1), date(2027, 1)},
	{"Australia/Sydney", date(2026, 1), date(2027, 1)},
	{"Australia/Lord_Howe", date(2026, 1), date(2027, 1)},
	{"America/Santiago", date(2026, 1), date(2027, 1)},
	{"America/Havana", date(2026, 1), date(2027, 1)},
	{"Antarctica/Troll", date(2026, 1), date(2027, 1)},
	{"Pacific/Apia", date(2011, 6), date(2012, 6)},
	{"Europe/Moscow", date(2014, 6), date(2015, 1)},
}

func date(y int, m time.Month) time.Time { return time.Date(y, m, 1, 0, 0, 0, 0, time.UTC) }

// TestAgainstOracle compares Next with a restatement of the DST rules that
// walks the timeline minute by minute, around every transition.
func TestAgainstOracle(t *testing.T) {
	t.Parallel()
	days := make(map[string][]bool, len(oracleExprs))
	for _, expr := range oracleExprs {
		days[expr] = matchingMinutes(t, expr)
	}
	for _, z := range oracleZones {
		t.Run(z.tz, func(t *testing.T) {
			t.Parallel()
			transitions := zoneTransitions(t, z.tz, z.from, z.to)
			require.NotEmpty(t, transitions)
			for _, expr := range oracleExprs {
				s, err := Parse(expr, z.tz)
				require.NoError(t, err)
				for _, tr := range transitions {
					o := newOracle(s, days[expr], tr.Add(-6*time.Hour), tr.Add(30*time.Hour))
					for after := tr.Add(-4 * time.Hour); after.Before(tr.Add(4 * time.Hour)); after = after.Add(7 * time.Minute) {
						want, ok := o.next(after)
						require.True(t, ok, "oracle window too short after %s", after)
						require.Equal(t, want, s.Next(after), "%s %q after %s", z.tz, expr, after)
					}
				}
			}
		})
	}
}

// matchingMinutes asks gronx which minutes of a day match expr, whose
// second is 0 and whose date fields are * (so every day is alike).
func matchingMinutes(t *testing.T, expr string) []bool {
	e, err := compile(expr)
	require.NoError(t, err)
	require.Regexp(t, `^0 \S+ \S+ \* \* \* \*$`, e.gronx, "oracle expressions have second 0 and date fields *")
	// IsDue, less its parsing of the expression at every call.
	segs, err := gronx.Segments(e.gronx)
	require.NoError(t, err)
	g := gronx.New()
	day := make([]bool, 24*60)
	for m := range day {
		g.C.SetRef(date(2026, 1).Add(time.Duration(m) * time.Minute))
		due, err := g.SegmentsDue(segs)
		require.NoError(t, err)
		day[m] = due
	}
	return day
}

func zoneTransitions(t *testing.T, tz string, from, to time.Time) []time.Time {
	loc, err := time.LoadLocation(tz)
	require.NoError(t, err)
	var out []time.Time
	for at := from.In(loc); ; {
		_, end := at.ZoneBounds()
		if end.IsZero() || !end.Before(to) {
			return out
		}
		out, at = append(out, end.UTC()), end
	}
}

// oracleLead is how far back the oracle looks for an earlier occurrence of
// a wall time; no transition moves clocks by more than 3 hours.
const oracleLead = 180

// oracle knows which minutes of a window fire.
type oracle struct {
	from  time.Time
	fires []bool // by minute since from
}

func newOracle(s *Schedule, day []bool, from, to time.Time) *oracle {
	n := int(to.Sub(from) / time.Minute)
	walls := make([]time.Time, oracleLead+n) // walls[i] is the wall time of minute i-oracleLead
	for i := range walls {
		walls[i] = s.wallOf(from.Add(time.Duration(i-oracleLead) * time.Minute))
	}
	due := func(w time.Time) bool { return day[w.Hour()*60+w.Minute()] }
	o := &oracle{from: from, fires: make([]bool, n)}
	for i := range o.fires {
		o.fires[i] = firesAt(s.expr.timeline, walls[i:i+oracleLead+1], due)
	}
	return o
}

func (o *oracle) next(after time.Time) (time.Time, bool) {
	start := int(after.Sub(o.from)/time.Minute) + 1
	for i := start; i < len(o.fires); i++ {
		if o.fires[i] {
			return o.from.Add(time.Duration(i) * time.Minute), true
		}
	}
	return time.Time{}, false
}

// firesAt states the rules for the last minute of walls (the wall times of
// the preceding minutes come before it): with every hour matching, an
// instant fires when its wall time matches; otherwise when its wall time
// matches for the first time, or when it ends a gap that skipped a matching
// wall time.
func firesAt(timeline bool, walls []time.Time, due func(time.Time) bool) bool {
	w, prev := walls[len(walls)-1], walls[len(walls)-2]
	if timeline {
		return due(w)
	}
	if due(w) && !slices.ContainsFunc(walls[:len(walls)-1], w.Equal) {
		return true
	}
	for g := prev.Add(time.Minute); g.Before(w); g = g.Add(time.Minute) {
		if due(g) {
			return true
		}
	}
	return false
}

// TestLeapYearEndPastTZTable covers the last day of 2040, a leap year past
// the zone tables, where time.ZoneBounds reports a zone end at or before the
// time asked about. Next must neither hang nor skip.
func TestLeapYearEndPastTZTable(t *testing.T) {
	t.Parallel()
	for _, tz := range []string{"America/New_York", "Australia/Sydney", "Europe/London"} {
		s, err := Parse("0 0 * * * *", tz)
		require.NoError(t, err)
		done := make(chan []time.Time, 1)
		after := time.Date(2040, 12, 30, 0, 0, 0, 0, time.UTC)
		go func() { done <- s.NextN(after, 96) }()
		select {
		case fires := <-done:
			for i, f := range fires {
				require.Equal(t, after.Add(time.Duration(i+1)*time.Hour), f, tz)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: Next does not return around 2040-12-31", tz)
		}
	}
}
