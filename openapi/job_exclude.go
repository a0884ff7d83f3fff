package openapi

import (
	"fmt"
	"strings"

	"github.com/danielgtaylor/huma/v2"

	"github.com/ax-scheduler/ax/queue/axtype"
)

// validateExclude checks a job's exclude list: calendar names as a
// calendar's must be, each once. Whether the calendars exist is the
// database's foreign key to answer (jobExcludeError), at write time.
func (j *Job) validateExclude(prefix *huma.PathBuffer, errs *fieldErrors) {
	seen := map[string]bool{}
	for i, name := range j.Exclude {
		// Not prefix.With: its Pop cuts at the last "[" and would leave
		// "exclude" on the buffer.
		at := fmt.Sprintf("%s.exclude[%d]", prefix, i)
		switch {
		case !axtype.CalendarNamePattern.MatchString(name):
			errs.add(at, "is not a calendar name (1-63 of a-z 0-9 . _ -, starting with a letter or digit)", name)
		case seen[name]:
			errs.add(at, "names the same calendar twice", name)
		}
		seen[name] = true
	}
}

// jobExcludeError names the entry of in.Exclude that a missing calendar
// broke the foreign key on: Postgres's detail holds the name
// ("Key (calendar_name)=(cn-holidays) is not present …").
func jobExcludeError(detail string, in *Job, prefix string) error {
	for i, name := range in.Exclude {
		if strings.Contains(detail, "=("+name+")") {
			return huma.Error422UnprocessableEntity("unknown calendar",
				&huma.ErrorDetail{Location: fmt.Sprintf("%sexclude[%d]", prefix, i),
					Message: "names no calendar: create it first (POST /v1/calendars)", Value: name})
		}
	}
	return huma.Error422UnprocessableEntity("unknown calendar",
		&huma.ErrorDetail{Location: prefix + "exclude", Message: "names a calendar that does not exist", Value: in.Exclude})
}
