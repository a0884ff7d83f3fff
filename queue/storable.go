package queue

import (
	"github.com/ax-scheduler/ax/queue/axtype"
)

// CheckStorableJSON is axtype.CheckStorableJSON for the API, which checks
// bodies before it hands them to the services: it returns a
// *axtype.UnstorableError when Postgres would refuse to store a JSON value.
var CheckStorableJSON = axtype.CheckStorableJSON
