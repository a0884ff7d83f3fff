package schedule_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/queue"
	"github.com/ax-scheduler/ax/queue/axtype"
	"github.com/ax-scheduler/ax/queue/schedule"
)

// BenchmarkBackfill releases a backfill of 20,000 ticks of an every-second
// job, 1,000 unfinished at a time, ending each pass's runs as succeeded
// (as agents' results would) before the next: created ticks/s of the
// releaser alone (tests/bench's BenchmarkBackfillThroughAgents runs
// 100,000 ticks through 3 agents beside an every-second job).
func BenchmarkBackfill(b *testing.B) {
	e := setup(b)
	ctx := context.Background()
	backfills := queue.NewBackfillService(e.pool, nil, nil)
	releaser := schedule.NewBackfillReleaser(e.pool, nil, schedule.BackfillReleaserConfig{})
	const ticks = 20_000
	var created int
	var took time.Duration
	for b.Loop() {
		job := e.job(axtype.TriggerCron, nil) // every second
		to := time.Now().UTC().Truncate(time.Second).Add(-time.Hour)
		bf, err := backfills.Create(ctx, &queue.BackfillRequest{JobID: job.ID, From: to.Add(-ticks * time.Second), To: to,
			MaxConcurrent: 1000})
		require.NoError(b, err)
		start := time.Now()
		for {
			n, err := releaser.ReleaseDue(ctx)
			require.NoError(b, err)
			unfinished, _ := e.backfillRuns(bf.ID)
			if n == 0 && len(unfinished) == 0 {
				break
			}
			e.endRuns(unfinished)
		}
		took += time.Since(start)
		got, err := backfills.Get(ctx, bf.ID)
		require.NoError(b, err)
		require.Equal(b, ticks, got.TicksCreated)
		created += got.TicksCreated
	}
	b.ReportMetric(float64(created)/took.Seconds(), "ticks/s")
}
