package cron

import (
	"testing"
	"time"
)

// fuzzZones are zones with transitions of several shapes, indexed by the
// fuzzer so it spends its effort on expressions.
var fuzzZones = []string{"", "America/New_York", "Europe/London", "Australia/Sydney", "Australia/Lord_Howe", "America/Santiago", "Asia/Kolkata"}

// fuzzRefs straddle 2026 transitions and a Feb 29.
var fuzzRefs = []time.Time{
	time.Date(2026, 3, 8, 6, 0, 0, 0, time.UTC),
	time.Date(2026, 11, 1, 5, 30, 0, 0, time.UTC),
	time.Date(2026, 10, 3, 15, 0, 0, 0, time.UTC),
	time.Date(2028, 2, 28, 23, 59, 59, 500, time.UTC),
}

func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		"* * * * *", "0 30 2 * * *", "0 */15 * * * *", "0 0 8 * * ?", "@daily", "@every5m",
		"0 0 29 2 *", "0 0 30 2 *", "0 0 L * *", "0 0 15W * *", "0 0 * * 5L", "0 0 * * MON#2",
		"0 0 * * FRI-SUN", "? ? ? ? ?", "0 0 * * * 2026", "1-59/7 1,2,3 */2 * JAN-MAR/2 1-5",
		"*/0 * * * *", "0 0 ? 2 1#5", "", "0 0 * * 7", "5-1 * * * *", "0 0 31 4 *",
	} {
		f.Add(seed, uint8(1))
	}
	f.Fuzz(func(t *testing.T, expr string, zone uint8) {
		s, err := Parse(expr, fuzzZones[int(zone)%len(fuzzZones)])
		if err != nil {
			if _, ok := err.(*FieldError); !ok {
				t.Fatalf("Parse(%q) returned %T, want *FieldError", expr, err)
			}
			return
		}
		for _, ref := range fuzzRefs {
			prev := ref
			for _, next := range s.NextN(ref, 8) {
				if !next.After(prev) {
					t.Fatalf("%q in %s: %s is not after %s", expr, s.Location(), next, prev)
				}
				prev = next
			}
		}
	})
}
