package db_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/db"
	"github.com/ax-scheduler/ax/queue/axtype"
)

// TestJobSameDefinitionActiveWindow: a declared window equals the stored
// one as Postgres keeps it (to the microsecond, in any zone), and a
// different window is a change.
func TestJobSameDefinitionActiveWindow(t *testing.T) {
	t.Parallel()
	paris, err := time.LoadLocation("Europe/Paris")
	require.NoError(t, err)
	declared := time.Date(2027, 1, 4, 9, 0, 0, 123456789, paris)
	stored := declared.UTC().Truncate(time.Microsecond)
	job := func(from *time.Time, jitter int) *axtype.Job {
		return &axtype.Job{Name: "j", TriggerKind: axtype.TriggerCron, CronExpr: "0 * * * *", ActiveFrom: from, JitterSeconds: jitter}
	}
	same, err := db.JobSameDefinition(job(&declared, 0), job(&stored, 0))
	require.NoError(t, err)
	require.True(t, same)

	later := stored.Add(time.Second)
	for _, other := range []*axtype.Job{job(&later, 0), job(nil, 0), job(&stored, 30)} {
		same, err = db.JobSameDefinition(job(&declared, 0), other)
		require.NoError(t, err)
		require.False(t, same)
	}
}
