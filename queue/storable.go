package queue

import "github.com/ax-scheduler/ax/db"

// CheckStorableJSON is db.CheckStorableJSON for the API, which checks
// bodies before it hands them to the services: it returns a
// *db.UnstorableError when Postgres would refuse to store a JSON value.
var CheckStorableJSON = db.CheckStorableJSON
