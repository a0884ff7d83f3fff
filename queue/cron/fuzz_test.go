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

// FuzzParseZone fuzzes the zone name with the expression: no panic, errors
// are *FieldErrors, an accepted zone is canonical (its name cleans to
// itself, the form Postgres accepts in AT TIME ZONE) and fire times
// strictly increase.
func FuzzParseZone(f *testing.F) {
	for _, seed := range []struct{ expr, zone string }{
		{"0 30 2 * * *", "Europe//./Paris"}, {"* * * * *", "Europe/Paris"}, {"0 0 8 * * ?", "/America/New_York/"},
		{"0 */15 * * * *", "./Australia/Lord_Howe"}, {"@daily", "Europe/../Paris"}, {"@hourly", "Local"},
		{"0 0 * * *", "localtime"}, {"0 0 * * *", "posix/Europe/Paris"}, {"0 0 * * *", "right/UTC"},
		{"0 0 * * *", "Etc/GMT+5"}, {"0 0 * * *", "EST5EDT"}, {"0 0 * * *", "utc"}, {"0 0 * * *", ""},
		{"0 0 * * *", "zone.tab"}, {"0 0 * * *", "Europe/Paris\x00"}, {"0 0 * * *", "America/Argentina/Buenos_Aires"},
		{"0 0 * * *", "Asia//Kolkata"}, {"0 0 * * *", "posixrules"}, {"0 0 * * *", "Factory"}, {"0 0 * * *", "\\Europe\\Paris"},
	} {
		f.Add(seed.expr, seed.zone)
	}
	f.Fuzz(func(t *testing.T, expr, zone string) {
		s, err := Parse(expr, zone)
		if err != nil {
			if _, ok := err.(*FieldError); !ok {
				t.Fatalf("Parse(%q, %q) returned %T, want *FieldError", expr, zone, err)
			}
			return
		}
		name := s.Location().String()
		if canon, err := cleanZone(name); err != nil || canon != name {
			t.Fatalf("zone %q became %q, which is not canonical (%q, %v)", zone, name, canon, err)
		}
		if again, err := CanonicalZone(name); err != nil || again != name {
			t.Fatalf("CanonicalZone(%q) = %q, %v: the canonical form must be stable", name, again, err)
		}
		if CachedZoneCount() > MaxCachedZones {
			t.Fatalf("zone cache holds %d entries, more than %d", CachedZoneCount(), MaxCachedZones)
		}
		for _, ref := range fuzzRefs {
			prev := ref
			for _, next := range s.NextN(ref, 4) {
				if !next.After(prev) {
					t.Fatalf("%q in %s: %s is not after %s", expr, name, next, prev)
				}
				prev = next
			}
		}
	})
}
