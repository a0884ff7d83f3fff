package dispatch_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/queue/axtype"
	"github.com/ax-scheduler/ax/queue/dispatch"
	"github.com/ax-scheduler/ax/tests/testlog"
)

// A heartbeat naming 10,000 tasks the agent does not hold (any agent may
// send one) logs ten lost leases and one line that counts the rest: a
// line each was 2 MB of log per call, written while every request of the
// replica waits on the same handler. All 10,000 are still answered lost.
func TestAHeartbeatOfManyLostLeasesLogsAFewLines(t *testing.T) {
	e := setup(t, nil)
	a := e.agent(nil, nil)
	var logs testlog.Buffer
	broker := dispatch.NewLeaseBroker(e.pool, nil, e.cfg, slog.New(slog.NewTextHandler(&logs, nil)), nil)
	refs := make([]axtype.TaskRef, 10_000)
	for i := range refs {
		refs[i] = axtype.TaskRef{ID: uuid.New(), Token: uuid.New()}
	}
	ready := true
	res, err := broker.Heartbeat(context.Background(), a.ID, refs, &axtype.AgentLoad{Ready: &ready})
	require.NoError(t, err)
	require.Len(t, res.Lost, len(refs))
	out := logs.String()
	require.Equal(t, 10, strings.Count(out, `msg="lease lost"`), out)
	require.Contains(t, out, `msg="leases lost"`)
	require.Contains(t, out, "more=9990")
}
