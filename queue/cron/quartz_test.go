package cron

import (
	"encoding/json"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/adhocore/gronx"
	"github.com/stretchr/testify/require"
)

// quartzCase is one entry of testdata/quartz-day-forms.json: every fire of
// a Quartz expression in [after, until), as Quartz's CronExpression
// computed them, and the same schedule in ax's dialect (expr).
type quartzCase struct {
	Quartz   string   `json:"quartz"`
	Expr     string   `json:"expr"`
	Timezone string   `json:"timezone"`
	After    string   `json:"after"`
	Until    string   `json:"until"`
	Fires    []string `json:"fires"`
}

// TestQuartzDayForms checks LW, L-n, L-nW, nL and lowercase l and w
// against Quartz's own fire times over 2026-2028 (2028 is a leap year).
func TestQuartzDayForms(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("testdata/quartz-day-forms.json")
	require.NoError(t, err)
	var cases []quartzCase
	require.NoError(t, json.Unmarshal(raw, &cases))
	require.NotEmpty(t, cases)
	for _, tc := range cases {
		t.Run(tc.Quartz+" "+tc.Timezone, func(t *testing.T) {
			t.Parallel()
			s, err := Parse(tc.Expr, tc.Timezone)
			require.NoError(t, err)
			until := ts(t, tc.Until)
			var got []string
			for at := s.Next(ts(t, tc.After)); at.Before(until); at = s.Next(at) {
				require.False(t, at.IsZero())
				got = append(got, at.Format(time.RFC3339))
			}
			require.Equal(t, tc.Fires, got)
		})
	}
}

func TestQuartzDayFormsRefused(t *testing.T) {
	t.Parallel()
	tests := []struct{ expr, reason string }{
		{"0 0 L-31 * *", `invalid value "L-31" (after L use W, -n or -nW with n from 1 to 30`},
		{"0 0 L-0 * *", `invalid value "L-0"`},
		{"0 0 L- * *", `invalid value "L-"`},
		{"0 0 L-3X * *", `invalid value "L-3X"`},
		{"0 0 LL * *", `invalid value "LL"`},
		{"0 0 WL * *", `invalid value "WL"`},
		{"0 0 L-1-2 * *", `invalid value "L-1-2"`},
		{"0 0 * * L", "L alone in day of week (Quartz's Saturday) is not supported: write SAT or 6"},
		{"0 0 * * l", "L alone in day of week"},
		{"0 0 * * L-2", `invalid value "L-2"`},
		{"0 0 L-30 2 *", "expression never fires"}, // February is never 31 days long
	}
	for _, tc := range tests {
		_, err := Parse(tc.expr, "")
		require.ErrorContains(t, err, tc.reason, tc.expr)
	}
}

// TestLastDayFormsDateRules checks the last-day forms in lists, with a
// day-of-week field, in short months and with several times of day.
func TestLastDayFormsDateRules(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, expr, after string
		want              []string
	}{
		{name: "LW or Monday (union)", expr: "0 0 LW * MON", after: "2026-01-25T00:00:00Z", want: []string{"2026-01-26T00:00:00Z", "2026-01-30T00:00:00Z", "2026-02-02T00:00:00Z"}},
		{name: "L-3 in a list with 1", expr: "0 0 1,L-3 * *", after: "2026-02-01T00:00:00Z", want: []string{"2026-02-25T00:00:00Z", "2026-03-01T00:00:00Z", "2026-03-28T00:00:00Z"}},
		{name: "L-1W on a Sunday last day minus one", expr: "0 0 L-1W * *", after: "2026-05-01T00:00:00Z", want: []string{"2026-05-29T00:00:00Z"}},
		{name: "L-30 fires only in 31-day months", expr: "0 0 L-30 * *", after: "2026-01-15T00:00:00Z", want: []string{"2026-03-01T00:00:00Z", "2026-05-01T00:00:00Z"}},
		{name: "seconds within the day", expr: "*/30 0 12 LW * *", after: "2026-01-30T12:00:00Z", want: []string{"2026-01-30T12:00:30Z", "2026-02-27T12:00:00Z"}},
		{name: "hourly on LW", expr: "0 0 * LW 3 *", after: "2026-03-31T03:30:00Z", want: []string{"2026-03-31T04:00:00Z", "2026-03-31T05:00:00Z"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, err := Parse(tc.expr, "")
			require.NoError(t, err)
			got := s.NextN(ts(t, tc.after), len(tc.want))
			var gotText []string
			for _, g := range got {
				gotText = append(gotText, g.Format(time.RFC3339))
			}
			require.Equal(t, tc.want, gotText)
		})
	}
}

// TestDateDueMatchesGronx checks dateDue, which matches dates for the
// last-day forms, against gronx on every expression gronx knows: the day
// fields combine the same way (union, intersection, specials).
func TestDateDueMatchesGronx(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(11, 12))
	checked := 0
	for checked < 3000 {
		dom, mon, dow := randomDateFields(r)
		e, err := compile(strings.Join([]string{"0", "0", "0", dom, mon, dow}, " "))
		if err != nil {
			continue // ? in both day fields, or never fires
		}
		day := time.Date(2024+r.IntN(6), time.Month(1+r.IntN(12)), 1+r.IntN(31), 0, 0, 0, 0, time.UTC)
		want, err := gronx.New().IsDue(e.gronx, day)
		require.NoError(t, err)
		require.Equal(t, want, e.dateDue(day), "%q on %s", e.gronx, day.Format(time.DateOnly))
		checked++
	}
}
