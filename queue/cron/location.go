package cron

import (
	"errors"
	"fmt"
	"sync"
	"time"
	// Embedded tz data lets schedules work on hosts without /usr/share/zoneinfo.
	_ "time/tzdata"
)

// locations caches loaded zones: the scheduler parses a job's schedule at
// every fire and time.LoadLocation reads and decodes a file each time.
var locations sync.Map // name → *time.Location

// loadLocation resolves an IANA zone name; "" means UTC. "Local" is refused
// because it would make a job's schedule depend on the server's settings.
func loadLocation(name string) (*time.Location, error) {
	switch name {
	case "":
		return time.UTC, nil
	case "Local":
		return nil, errors.New(`"Local" is not allowed: use an IANA name such as "Europe/Paris"`)
	}
	if loc, ok := locations.Load(name); ok {
		return loc.(*time.Location), nil
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, fmt.Errorf("unknown time zone %q: use an IANA name such as \"Europe/Paris\"", name)
	}
	locations.Store(name, loc)
	return loc, nil
}
