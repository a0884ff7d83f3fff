package agent

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when a test leaves goroutines behind: the
// agent must stop every loop it starts once Run returns.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
