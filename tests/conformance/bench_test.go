package conformance

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// benchCapacity is the slots of the one agent per SDK.
const benchCapacity = 100

// BenchmarkAgentSDKs measures no-op tasks per second through one agent of
// 100 slots of each SDK (Go, TypeScript, Python) against the same `ax
// serve`: b.N tasks (at least 1,000) as the shards of runs of up to 10,000, from the
// trigger until every task has succeeded. Its default run is short (the
// usual benchtime of a second per SDK, a few runs); a longer one:
// make bench BENCH=AgentSDKs BENCH_COUNT=5. The TypeScript and Python
// runs also report ratio-vs-go: their rate over the Go agent's, measured
// first in the same process against the same server, so that machine
// speed cancels out.
func BenchmarkAgentSDKs(b *testing.B) {
	s := startServer(b)
	var goRate float64
	for _, sdk := range sdks {
		b.Run(sdk.name, func(b *testing.B) {
			fx := sdk.prepare(b)
			pool := "bench-" + sdk.name
			if _, err := s.agentIDNow(pool); err != nil {
				// Started once per SDK: b.Run calls this function for each b.N.
				fx.start(s.tb, s, pool, "pool="+pool, "", fmt.Sprintf("AX_CAPACITY=%d", benchCapacity))
				s.agentID(b, pool)
			}
			// At least 1,000 tasks: a handful measures the first lease, not a rate.
			tasks := max(b.N, 1000)
			b.ResetTimer()
			began := time.Now()
			var execs []string
			for left := tasks; left > 0; left -= 10000 {
				shards := map[string]any{"shards": map[string]any{"count": min(left, 10000)}}
				execs = append(execs, s.runJob(b, pool, "noop", nil, shards))
			}
			for _, id := range execs {
				require.Equal(b, "succeeded", s.waitExecution(b, id, 5*time.Minute))
			}
			b.StopTimer()
			rate := float64(tasks) / time.Since(began).Seconds()
			b.ReportMetric(rate, "tasks/s")
			if sdk.name == "go" {
				goRate = rate
			} else if goRate > 0 {
				b.ReportMetric(rate/goRate, "ratio-vs-go")
			}
		})
	}
}
