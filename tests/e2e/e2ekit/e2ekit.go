// Package e2ekit is what the end-to-end test packages (tests/e2e and the
// folders below it) share: `ax serve` and ax-agent processes on databases
// of their own, the CLI and the API of a running server, and the database
// seen through psql-like queries.
package e2ekit

import (
	"os"
	"testing"

	"github.com/ax-scheduler/ax/tests/dbtest"
	"github.com/ax-scheduler/ax/tests/proctest"
)

// Main runs an end-to-end test package; call it from TestMain. Up to 4
// tests run at once (proctest.WidenParallel), on databases from dbtest,
// and the binaries built for them are removed at the end.
func Main(m *testing.M) {
	proctest.WidenParallel(4)
	code := dbtest.Run(m)
	proctest.Cleanup() // the binaries it built; os.Exit skips deferred calls
	os.Exit(code)
}
