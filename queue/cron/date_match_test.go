package cron

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestDayVerdictsMatchDayDue: the search's verdicts, remembered by month
// shape (dayVerdicts), agree with dayDue on every date of 30 years, for
// random date fields with last-day forms among them (the expressions the
// day-by-day search serves).
func TestDayVerdictsMatchDayDue(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(7, 8))
	lastForms := []string{"LW", "L-1", "L-3W", "L-15", "L-27", "L-30W", "L-0"}
	checked := 0
	for checked < 60 {
		dom, _, dow := randomDateFields(r)
		dom = lastForms[r.IntN(len(lastForms))] + "," + strings.TrimPrefix(strings.TrimPrefix(dom, "?"), "*")
		dom = strings.TrimSuffix(dom, ",")
		e, err := compile(fmt.Sprintf("0 0 0 %s * %s", dom, dow))
		if err != nil {
			continue
		}
		checked++
		var days dayVerdicts
		for day := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC); day.Year() < 2050; day = day.AddDate(0, 0, 1) {
			require.Equal(t, e.dayDue(day), days.due(e, day), "%s %s on %s", dom, dow, day.Format(time.DateOnly))
		}
	}
}
