// Package cluster holds the end-to-end tests of ax as several processes:
// replicas of `ax serve` sharing a database, runs routed among agents,
// and the faults of those processes and of Postgres (agents killed,
// stopped or drained, replicas killed, the database restarted or failed
// over). The tests of one server and its CLI, API and agents are
// tests/e2e's; both use tests/e2e/e2ekit.
package cluster

import (
	"testing"

	"github.com/ax-scheduler/ax/tests/e2e/e2ekit"
)

func TestMain(m *testing.M) { e2ekit.Main(m) }
