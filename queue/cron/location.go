package cron

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	// Embedded tz data lets schedules work on hosts without /usr/share/zoneinfo.
	_ "time/tzdata"
)

// MaxCachedZones bounds the zone cache. There are about 600 IANA names, so
// every real zone fits; names past the bound are loaded on each use.
const MaxCachedZones = 1024

// locations caches loaded zones by canonical name: the scheduler parses a
// job's schedule at every fire and time.LoadLocation reads and decodes a
// file each time. Only canonical names that loaded are stored, and at most
// MaxCachedZones of them, so no spelling of a name grows it.
var (
	locations     sync.Map // canonical name → *time.Location
	locationCount atomic.Int64
)

// CachedZoneCount is how many zones the cache holds (for metrics and
// tests); it never exceeds MaxCachedZones.
func CachedZoneCount() int { return int(locationCount.Load()) }

// hostZones are names that load from some hosts' zoneinfo but do not name a
// zone: they follow the machine's settings or differ from one host (or one
// Postgres build) to the next.
var hostZones = map[string]bool{"Local": true, "localtime": true, "posixrules": true}

// CanonicalZone returns name in the form it is stored and Postgres accepts
// in AT TIME ZONE: path noise removed ("Europe//./Paris" is
// "Europe/Paris"), "" is "UTC". Names that are not IANA zone names
// (unknown, relative, machine-dependent or with odd characters) are an
// error.
func CanonicalZone(name string) (string, error) {
	loc, err := loadLocation(name)
	if err != nil {
		return "", err
	}
	return loc.String(), nil
}

// LoadLocation resolves an IANA zone name as job timezones are read ("" is
// UTC; see CanonicalZone), from a cache.
func LoadLocation(name string) (*time.Location, error) { return loadLocation(name) }

// loadLocation resolves an IANA zone name; "" means UTC. "Local" is refused
// because it would make a job's schedule depend on the server's settings.
// The location's String() is the canonical name.
func loadLocation(name string) (*time.Location, error) {
	canon, err := cleanZone(name)
	if err != nil {
		return nil, err
	}
	if canon == "UTC" {
		return time.UTC, nil
	}
	if loc, ok := locations.Load(canon); ok {
		return loc.(*time.Location), nil
	}
	loc, err := time.LoadLocation(canon)
	if err != nil {
		return nil, fmt.Errorf("unknown time zone %q: use an IANA name such as \"Europe/Paris\"", name)
	}
	if locationCount.Load() < MaxCachedZones {
		if _, loaded := locations.LoadOrStore(canon, loc); !loaded {
			locationCount.Add(1)
		}
	}
	return loc, nil
}

// cleanZone removes empty and "." segments of a zone name and checks what
// is left is shaped like an IANA name: segments of letters, digits, "_",
// "+" and "-", the first starting with a letter, none of them "..".
func cleanZone(name string) (string, error) {
	if name == "" {
		return "UTC", nil
	}
	if hostZones[name] {
		return "", fmt.Errorf("%q is not allowed: use an IANA name such as \"Europe/Paris\"", name)
	}
	if len(name) > 100 {
		return "", errors.New("is longer than 100 characters: use an IANA name such as \"Europe/Paris\"")
	}
	var segs []string
	for seg := range strings.SplitSeq(name, "/") {
		if seg == "" || seg == "." {
			continue
		}
		if !zoneSegment(seg) {
			return "", fmt.Errorf("unknown time zone %q: use an IANA name such as \"Europe/Paris\"", name)
		}
		segs = append(segs, seg)
	}
	if len(segs) == 0 || !isLetter(segs[0][0]) || segs[0] == "posix" || segs[0] == "right" {
		return "", fmt.Errorf("unknown time zone %q: use an IANA name such as \"Europe/Paris\"", name)
	}
	canon := strings.Join(segs, "/")
	if hostZones[canon] {
		return "", fmt.Errorf("%q is not allowed: use an IANA name such as \"Europe/Paris\"", name)
	}
	return canon, nil
}

func zoneSegment(s string) bool {
	if s == ".." {
		return false
	}
	for i := range len(s) {
		c := s[i]
		if !isLetter(c) && (c < '0' || c > '9') && c != '_' && c != '+' && c != '-' {
			return false
		}
	}
	return true
}

func isLetter(c byte) bool { return c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' }
