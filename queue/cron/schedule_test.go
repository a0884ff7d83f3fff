package cron

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func ts(t *testing.T, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339, s)
	require.NoError(t, err)
	return v
}

func TestParseAndNext(t *testing.T) {
	t.Parallel()
	const jan1 = "2026-01-01T00:00:00Z" // a Thursday
	tests := []struct {
		name, expr, tz, after string
		want                  []string // successive fires, UTC
		wantField, wantReason string   // for invalid input
	}{
		// Time zones.
		{name: "Quartz ? in Shanghai", expr: "0 0 8 * * ?", tz: "Asia/Shanghai", after: "2026-11-30T03:00:00Z", want: []string{"2026-12-01T00:00:00Z", "2026-12-02T00:00:00Z"}},
		{name: "empty tz is UTC", expr: "*/5 * * * *", after: jan1, want: []string{"2026-01-01T00:05:00Z", "2026-01-01T00:10:00Z"}},
		{name: "UTC by name", expr: "0 12 * * *", tz: "UTC", after: jan1, want: []string{"2026-01-01T12:00:00Z"}},
		{name: "Sydney summer", expr: "0 0 8 * * *", tz: "Australia/Sydney", after: jan1, want: []string{"2026-01-01T21:00:00Z"}},
		{name: "Los Angeles summer", expr: "0 0 8 * * *", tz: "America/Los_Angeles", after: "2026-07-01T00:00:00Z", want: []string{"2026-07-01T15:00:00Z"}},
		{name: "Kolkata half hour", expr: "0 0 9 * * *", tz: "Asia/Kolkata", after: jan1, want: []string{"2026-01-01T03:30:00Z"}},
		{name: "Kathmandu 45 minutes", expr: "0 9 * * *", tz: "Asia/Kathmandu", after: jan1, want: []string{"2026-01-01T03:15:00Z"}},
		{name: "Etc zone", expr: "0 12 * * *", tz: "Etc/GMT+5", after: jan1, want: []string{"2026-01-01T17:00:00Z"}},
		{name: "Paris weekdays", expr: "0 9 * * MON-FRI", tz: "Europe/Paris", after: "2026-01-02T12:00:00Z", want: []string{"2026-01-05T08:00:00Z", "2026-01-06T08:00:00Z"}},
		{name: "gap on a single date", expr: "0 30 2 8 3 *", tz: "America/New_York", after: "2026-03-01T00:00:00Z", want: []string{"2026-03-08T07:00:00Z", "2027-03-08T07:30:00Z"}},
		{name: "Berlin monthly in summer time", expr: "@monthly", tz: "Europe/Berlin", after: "2026-03-15T00:00:00Z", want: []string{"2026-03-31T22:00:00Z", "2026-04-30T22:00:00Z"}},

		// Macros.
		{name: "@yearly", expr: "@yearly", after: "2026-03-01T00:00:00Z", want: []string{"2027-01-01T00:00:00Z"}},
		{name: "@annually New York", expr: "@annually", tz: "America/New_York", after: "2026-03-01T00:00:00Z", want: []string{"2027-01-01T05:00:00Z"}},
		{name: "@weekly is Sunday", expr: "@weekly", after: jan1, want: []string{"2026-01-04T00:00:00Z", "2026-01-11T00:00:00Z"}},
		{name: "@daily Tokyo", expr: "@daily", tz: "Asia/Tokyo", after: jan1, want: []string{"2026-01-01T15:00:00Z"}},
		{name: "@midnight", expr: "@midnight", after: jan1, want: []string{"2026-01-02T00:00:00Z"}},
		{name: "@hourly", expr: "@hourly", after: "2026-01-01T00:30:00Z", want: []string{"2026-01-01T01:00:00Z", "2026-01-01T02:00:00Z"}},
		{name: "macro case-insensitive", expr: "@DAILY", after: jan1, want: []string{"2026-01-02T00:00:00Z"}},

		// Day of week: Sunday is 0 and 7, Monday is 1.
		{name: "1 is Monday", expr: "0 0 12 * * 1", after: jan1, want: []string{"2026-01-05T12:00:00Z", "2026-01-12T12:00:00Z"}},
		{name: "0 is Sunday", expr: "0 0 * * 0", after: jan1, want: []string{"2026-01-04T00:00:00Z"}},
		{name: "7 is Sunday", expr: "0 0 0 * * 7", after: jan1, want: []string{"2026-01-04T00:00:00Z"}},
		{name: "SUN lower case", expr: "0 0 * * sun", after: jan1, want: []string{"2026-01-04T00:00:00Z"}},
		{name: "range ending on SUN", expr: "0 0 * * FRI-SUN", after: jan1, want: []string{"2026-01-02T00:00:00Z", "2026-01-03T00:00:00Z", "2026-01-04T00:00:00Z", "2026-01-09T00:00:00Z"}},
		{name: "range 1-7", expr: "0 0 * * 1-7", after: jan1, want: []string{"2026-01-02T00:00:00Z", "2026-01-03T00:00:00Z"}},
		{name: "? in day of month", expr: "0 0 12 ? * MON", after: jan1, want: []string{"2026-01-05T12:00:00Z"}},
		{name: "dom and dow restricted is a union", expr: "0 0 1 * MON", after: jan1, want: []string{"2026-01-05T00:00:00Z", "2026-01-12T00:00:00Z", "2026-01-19T00:00:00Z", "2026-01-26T00:00:00Z", "2026-02-01T00:00:00Z"}},
		{name: "dom starting with * is an intersection", expr: "0 0 */2 * MON", after: jan1, want: []string{"2026-01-05T00:00:00Z", "2026-01-19T00:00:00Z"}},

		// L, W, #.
		{name: "L last day", expr: "0 0 L * *", after: "2026-02-01T00:00:00Z", want: []string{"2026-02-28T00:00:00Z", "2026-03-31T00:00:00Z"}},
		{name: "L in February of a leap year", expr: "0 0 L 2 *", after: "2027-03-01T00:00:00Z", want: []string{"2028-02-29T00:00:00Z"}},
		{name: "Feb 29 is valid", expr: "0 0 29 2 *", after: jan1, want: []string{"2028-02-29T00:00:00Z", "2032-02-29T00:00:00Z"}},
		{name: "15W on a Sunday", expr: "0 0 15W * *", after: "2026-02-01T00:00:00Z", want: []string{"2026-02-16T00:00:00Z"}},
		{name: "1W stays in the month", expr: "0 0 1W * *", after: "2026-02-01T00:00:00Z", want: []string{"2026-02-02T00:00:00Z"}},
		{name: "LW last weekday", expr: "0 0 LW * *", after: jan1, want: []string{"2026-01-30T00:00:00Z", "2026-02-27T00:00:00Z"}},
		{name: "L-3 lower case", expr: "0 0 l-3 * *", after: jan1, want: []string{"2026-01-28T00:00:00Z", "2026-02-25T00:00:00Z"}},
		{name: "5L last Friday", expr: "0 0 * * 5L", after: jan1, want: []string{"2026-01-30T00:00:00Z"}},
		{name: "MON#2", expr: "0 0 * * MON#2", after: jan1, want: []string{"2026-01-12T00:00:00Z", "2026-02-09T00:00:00Z"}},
		{name: "7#1 first Sunday", expr: "0 0 * * 7#1", after: jan1, want: []string{"2026-01-04T00:00:00Z"}},
		{name: "hourly on a fifth Monday of February, past 2040", expr: "0 0 * ? 2 1#5", tz: "America/New_York", after: jan1, want: []string{"2044-02-29T05:00:00Z", "2044-02-29T06:00:00Z"}},
		{name: "fifth Monday of February", expr: "0 0 ? 2 1#5", after: jan1, want: []string{"2044-02-29T00:00:00Z"}},

		// Seconds, names, lists, ranges, steps.
		{name: "seconds field", expr: "30 * * * * *", after: jan1, want: []string{"2026-01-01T00:00:30Z", "2026-01-01T00:01:30Z"}},
		{name: "seconds step", expr: "*/10 * * * * *", after: jan1, want: []string{"2026-01-01T00:00:10Z", "2026-01-01T00:00:20Z"}},
		{name: "6-field yearly", expr: "0 0 0 1 1 *", after: jan1, want: []string{"2027-01-01T00:00:00Z"}},
		{name: "month name", expr: "0 0 1 JAN *", after: jan1, want: []string{"2027-01-01T00:00:00Z"}},
		{name: "month names range with step", expr: "0 0 1 jan-mar/2 *", after: jan1, want: []string{"2026-03-01T00:00:00Z", "2027-01-01T00:00:00Z"}},
		{name: "list", expr: "0 0 1,15 * *", after: jan1, want: []string{"2026-01-15T00:00:00Z", "2026-02-01T00:00:00Z"}},
		{name: "range with step", expr: "5-10/5 * * * *", after: jan1, want: []string{"2026-01-01T00:05:00Z", "2026-01-01T00:10:00Z", "2026-01-01T01:05:00Z"}},
		{name: "value with step", expr: "10/20 * * * *", after: jan1, want: []string{"2026-01-01T00:10:00Z", "2026-01-01T00:30:00Z", "2026-01-01T00:50:00Z"}},
		{name: "leading zeros and tabs", expr: "00\t08 * * *", after: jan1, want: []string{"2026-01-01T08:00:00Z"}},
		{name: "sub-second after", expr: "* * * * * *", after: "2026-01-01T00:00:00.5Z", want: []string{"2026-01-01T00:00:01Z"}},

		// Invalid expressions.
		{name: "empty", expr: "", wantField: "expr", wantReason: "expression is empty"},
		{name: "blank", expr: "  \t", wantField: "expr", wantReason: "expression is empty"},
		{name: "4 fields", expr: "* * * *", wantField: "expr", wantReason: "expected 5 fields"},
		{name: "8 fields", expr: "* * * * * * * *", wantField: "expr", wantReason: "got 8"},
		{name: "7 fields", expr: "0 0 0 1 1 * 2027", wantField: "expr", wantReason: "7 fields (with a year) are not supported"},
		{name: "year as 6th field", expr: "0 0 * * * 2026", wantField: "expr", wantReason: "field 6 (day of week): value 2026 out of range 0-7"},
		{name: "all ?", expr: "? ? ? ? ?", wantField: "expr", wantReason: "field 1 (minute): ? is only allowed in day of month or day of week"},
		{name: "? in seconds", expr: "? 0 0 * * *", wantField: "expr", wantReason: "field 1 (second): ? is only allowed"},
		{name: "? in month", expr: "0 0 * ? *", wantField: "expr", wantReason: "field 4 (month): ? is only allowed"},
		{name: "? in both days", expr: "0 0 ? * ?", wantField: "expr", wantReason: "not both"},
		{name: "? in a list", expr: "0 0 1,? * *", wantField: "expr", wantReason: "? must be the whole field"},
		{name: "February 30th", expr: "0 0 30 2 *", wantField: "expr", wantReason: "expression never fires: no matching date within 50 years"},
		{name: "April 31st", expr: "0 0 31 4 *", wantField: "expr", wantReason: "never fires"},
		{name: "31st of short months", expr: "0 0 31 APR,JUN,SEP,NOV *", wantField: "expr", wantReason: "never fires"},
		{name: "day 32", expr: "0 0 32 * *", wantField: "expr", wantReason: "field 3 (day of month): value 32 out of range 1-31"},
		{name: "minute 60", expr: "60 * * * *", wantField: "expr", wantReason: "field 1 (minute): value 60 out of range 0-59"},
		{name: "hour 24", expr: "0 24 * * *", wantField: "expr", wantReason: "field 2 (hour): value 24 out of range 0-23"},
		{name: "second 61", expr: "61 0 0 * * *", wantField: "expr", wantReason: "field 1 (second): value 61 out of range 0-59"},
		{name: "month 13", expr: "0 0 0 * 13 *", wantField: "expr", wantReason: "field 5 (month): value 13 out of range 1-12"},
		{name: "weekday 8", expr: "0 0 * * 8", wantField: "expr", wantReason: "field 5 (day of week): value 8 out of range 0-7"},
		{name: "day 0", expr: "0 0 0 * *", wantField: "expr", wantReason: "value 0 out of range 1-31"},
		{name: "unknown month name", expr: "0 0 * FOO *", wantField: "expr", wantReason: `field 4 (month): unknown name "FOO"`},
		{name: "month name in day of week", expr: "0 0 * * JAN", wantField: "expr", wantReason: `unknown name "JAN"`},
		{name: "name in hour", expr: "0 MON * * *", wantField: "expr", wantReason: `field 2 (hour): invalid value "MON"`},
		{name: "garbage", expr: "hello world foo bar baz", wantField: "expr", wantReason: `field 1 (minute): invalid value "hello"`},
		{name: "negative", expr: "-1 * * * *", wantField: "expr", wantReason: "missing value"},
		{name: "plus sign", expr: "+5 * * * *", wantField: "expr", wantReason: `invalid value "+5"`},
		{name: "step 0", expr: "*/0 * * * *", wantField: "expr", wantReason: `step "0" out of range 1-60`},
		{name: "reversed range", expr: "5-1 * * * *", wantField: "expr", wantReason: "range 5-1 is reversed"},
		{name: "empty list element", expr: "1,,2 * * * *", wantField: "expr", wantReason: "empty element in list"},
		{name: "L-31", expr: "0 0 L-31 * *", wantField: "expr", wantReason: `field 3 (day of month): invalid value "L-31"`},
		{name: "bare L in day of week", expr: "0 0 * * L", wantField: "expr", wantReason: `field 5 (day of week): L alone in day of week`},
		{name: "sixth Monday", expr: "0 0 * * MON#6", wantField: "expr", wantReason: `occurrence "6" after # must be 1-5`},
		{name: "gronx @everysecond", expr: "@everysecond", wantField: "expr", wantReason: `unknown macro "@everysecond"`},
		{name: "@every interval", expr: "@every 5m", wantField: "expr", wantReason: "unknown macro"},
		{name: "@reboot", expr: "@reboot", wantField: "expr", wantReason: "unknown macro"},

		// Invalid time zones.
		{name: "unknown zone", expr: "* * * * *", tz: "Mars/Olympus_Mons", wantField: "timezone", wantReason: `unknown time zone "Mars/Olympus_Mons"`},
		{name: "Local", expr: "* * * * *", tz: "Local", wantField: "timezone", wantReason: `"Local" is not allowed`},
		{name: "path", expr: "* * * * *", tz: "../../etc/passwd", wantField: "timezone", wantReason: "unknown time zone"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, err := Parse(tc.expr, tc.tz)
			if tc.wantField != "" {
				var fe *FieldError
				require.True(t, errors.As(err, &fe), "want *FieldError, got %v", err)
				require.Equal(t, tc.wantField, fe.Field)
				require.Contains(t, fe.Reason, tc.wantReason)
				return
			}
			require.NoError(t, err)
			want := make([]time.Time, len(tc.want))
			for i, w := range tc.want {
				want[i] = ts(t, w)
			}
			after, err := time.Parse(time.RFC3339Nano, tc.after)
			require.NoError(t, err)
			require.Equal(t, want, s.NextN(after, len(want)))
		})
	}
}

func TestFieldErrorMessage(t *testing.T) {
	t.Parallel()
	_, err := Parse("0 0 32 * *", "")
	require.EqualError(t, err, "invalid expr: field 3 (day of month): value 32 out of range 1-31")
}

func TestScheduleAccessors(t *testing.T) {
	t.Parallel()
	s, err := Parse("@daily", "Europe/London")
	require.NoError(t, err)
	require.Equal(t, "@daily", s.Expr())
	require.Equal(t, "Europe/London", s.Location().String())

	s, err = Parse("@daily", "")
	require.NoError(t, err)
	require.Equal(t, time.UTC, s.Location())
}

func TestNextN(t *testing.T) {
	t.Parallel()
	s, err := Parse("@hourly", "")
	require.NoError(t, err)
	after := ts(t, "2026-01-01T00:00:00Z")
	require.Empty(t, s.NextN(after, 0))
	require.Empty(t, s.NextN(after, -1))
	require.Len(t, s.NextN(after, 3), 3)
}

func TestNextReturnsUTC(t *testing.T) {
	t.Parallel()
	s, err := Parse("0 9 * * *", "Europe/Paris")
	require.NoError(t, err)
	paris, err := time.LoadLocation("Europe/Paris")
	require.NoError(t, err)
	next := s.Next(time.Date(2026, 6, 1, 12, 0, 0, 0, paris))
	require.Equal(t, time.UTC, next.Location())
	require.Equal(t, ts(t, "2026-06-02T07:00:00Z"), next)
}

// BenchmarkNext chains Next as the scheduler does, from the previous fire.
func BenchmarkNext(b *testing.B) {
	for _, bc := range []struct{ expr, tz string }{
		{"0 0 8 * * ?", "Asia/Shanghai"},
		{"0 */15 * * * *", "America/New_York"},
		{"0 30 2 * * *", "America/New_York"},
		{"*/10 * * * * *", "Europe/London"},
		{"@daily", "Australia/Sydney"},
		{"0 9 * * MON-FRI", "Europe/Paris"},
		{"0 0 L * *", "UTC"},
		{"0 0 12 LW * ?", "America/New_York"},
		{"0 0 12 L-3W * ?", "UTC"},
	} {
		b.Run(bc.expr+" "+bc.tz, func(b *testing.B) {
			s, err := Parse(bc.expr, bc.tz)
			require.NoError(b, err)
			at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			for b.Loop() {
				at = s.Next(at)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1e3, "µs/next")
		})
	}
}

func BenchmarkParse(b *testing.B) {
	for b.Loop() {
		_, err := Parse("0 30 2 * * MON-FRI", "America/New_York")
		require.NoError(b, err)
	}
}

// BenchmarkParseLastDayFormNeverFires is the worst case of the date-by-date
// search: an expression refused after scanning the whole horizon, with
// one last-day form and with a list of 36 (the longest the 200 characters
// of an expression allow).
func BenchmarkParseLastDayFormNeverFires(b *testing.B) {
	for name, expr := range map[string]string{
		"one":  "0 0 L-30 2 *",
		"many": "0 0 " + strings.TrimSuffix(strings.Repeat("L-30,", 36), ",") + " 2,4,6,9,11 *",
	} {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				_, err := Parse(expr, "")
				require.Error(b, err)
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "µs/parse")
		})
	}
}

func TestParseCanonicalZone(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"Europe//./Paris": "Europe/Paris", "/Europe/Paris/": "Europe/Paris", "./Asia//Kolkata": "Asia/Kolkata",
		"": "UTC", "UTC": "UTC", "Etc/GMT+5": "Etc/GMT+5",
	} {
		s, err := Parse("0 0 * * *", in)
		require.NoError(t, err, in)
		require.Equal(t, want, s.Location().String(), in)
	}
	for _, bad := range []string{"Local", "localtime", "posixrules", "Europe/../Europe/Paris", "posix/Europe/Paris",
		"right/UTC", "zone.tab", "utc", "Europe\\Paris", "Europe/Paris\x00", "1/2"} {
		_, err := Parse("0 0 * * *", bad)
		var fe *FieldError
		require.ErrorAs(t, err, &fe, bad)
		require.Equal(t, "timezone", fe.Field, bad)
	}
}
