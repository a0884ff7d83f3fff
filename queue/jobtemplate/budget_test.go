package jobtemplate

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// costlyTemplate, repeated, takes CPU to render over costlyKind's data:
// each compares two 64 KiB strings that differ last (100 of them take
// 0.2 to 0.7 ms).
const costlyTemplate = `{{if eq .a .b}}{{end}}x`

func costlyKind(timeout time.Duration) (*Kind, string, map[string]any) {
	a := strings.Repeat("a", 64<<10)
	data := map[string]any{"a": a + "1", "b": a + "2"}
	return &Kind{what: "test template", maxOutput: 1 << 20, timeout: timeout}, strings.Repeat(costlyTemplate, 100), data
}

// Renderings that wait for a CPU keep their budget: on a machine whose
// CPUs are all busy, a route key once failed its 50 ms of wall time and
// its task went unrouted. Here four spinning goroutines take the CPUs, so
// renderings of a fraction of a millisecond are now and then preempted
// and wait their turn (Go's time slice is 10 ms): by wall time they pass
// 10 ms, by CPU time they do not.
func TestRenderingsThatWaitForACPUKeepTheirBudget(t *testing.T) {
	if _, ok := threadCPUTime(); !ok {
		t.Skip("no thread CPU time on this platform")
	}
	k, text, data := costlyKind(10 * time.Millisecond)
	tmpl, err := k.Parse(text)
	require.NoError(t, err)

	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	for range 4 {
		go func() {
			for ctx.Err() == nil {
			}
		}()
	}
	// Render until five renderings have waited past the budget.
	slow, renderings, began := 0, 0, time.Now()
	for slow < 5 {
		require.Less(t, time.Since(began), 30*time.Second, "the spinners delayed %d of %d renderings", slow, renderings)
		start := time.Now()
		_, err := k.Execute(tmpl, data)
		require.NoError(t, err, "a rendering that waited %s", time.Since(start))
		if time.Since(start) > k.timeout {
			slow++
		}
		renderings++
	}
	t.Logf("%d of %d renderings took longer than %s of wall time", slow, renderings, k.timeout)
}

// A rendering that spends its budget on the CPU is stopped.
func TestRenderingsThatSpendTheirBudgetStop(t *testing.T) {
	t.Parallel()
	k, text, data := costlyKind(10 * time.Microsecond)
	tmpl, err := k.Parse(text)
	require.NoError(t, err)
	_, err = k.Execute(tmpl, data)
	require.ErrorContains(t, err, "error rendering the test template: took more than 10µs of CPU time")
}

// The budget counts the thread's CPU, not the time asleep: once its limit
// of wall time has passed, the limit again of CPU time.
func TestBudgetCountsCPUTime(t *testing.T) {
	t.Parallel()
	if _, ok := threadCPUTime(); !ok {
		t.Skip("no thread CPU time on this platform")
	}
	b := startBudget(20 * time.Millisecond)
	defer b.stop()
	time.Sleep(60 * time.Millisecond)
	require.False(t, b.spent(), "asleep for three budgets, but no CPU spent")
	require.True(t, b.overtime)
	time.Sleep(60 * time.Millisecond)
	require.False(t, b.spent(), "asleep again")
	start := time.Now()
	for !b.spent() {
		require.Less(t, time.Since(start), 30*time.Second, "20 ms of CPU never counted")
	}
	cpu, _ := threadCPUTime()
	require.GreaterOrEqual(t, cpu-b.cpuAt, 20*time.Millisecond)
}

// BenchmarkRouteKeyBudget: what the budget costs a route key's rendering
// (a goroutine locked to its thread, wall time read at each write), as
// the ratio of Execute to text/template's own Execute of the same key
// into a buffer, both timed in the same run.
func BenchmarkRouteKeyBudget(b *testing.B) {
	tmpl, err := RouteKey.Parse("customer_id={{.params.customer_id}}-{{.shard.index}}")
	if err != nil {
		b.Fatal(err)
	}
	data := map[string]any{"params": map[string]any{"customer_id": 9527}, "shard": map[string]any{"index": 3}}
	const rounds = 1000
	var bounded, bare time.Duration
	var buf bytes.Buffer
	for b.Loop() {
		start := time.Now()
		for range rounds {
			if _, err := RouteKey.Execute(tmpl, data); err != nil {
				b.Fatal(err)
			}
		}
		bounded += time.Since(start)
		start = time.Now()
		for range rounds {
			buf.Reset()
			if err := tmpl.Execute(&buf, data); err != nil {
				b.Fatal(err)
			}
		}
		bare += time.Since(start)
	}
	n := float64(b.N * rounds)
	b.ReportMetric(float64(bounded.Nanoseconds())/n, "ns/render")
	b.ReportMetric(float64(bare.Nanoseconds())/n, "bare-ns/render")
	b.ReportMetric(float64(bounded)/float64(bare), "ratio-vs-bare")
}
