package metrics_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/queue/metrics"
)

// ax_task_results_total keeps the first MaxErrorCodeLabels codes and
// counts the rest as other: a reporter minting codes cannot mint series.
func TestTaskResultErrorCodesAreCapped(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewPedanticRegistry()
	m := metrics.New(reg)
	extra := 7
	for i := range metrics.MaxErrorCodeLabels + extra {
		m.TaskResults.Inc("failed", fmt.Sprintf("exit_%d", i))
	}
	m.TaskResults.Inc("failed", "exit_0") // admitted: keeps its series
	m.TaskResults.Add("timed_out", "timeout", 2)
	m.TaskResults.Inc("succeeded", "")

	series := map[string]float64{}
	families, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() != "ax_task_results_total" {
			continue
		}
		for _, s := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range s.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			series[labels["state"]+"/"+labels["error_code"]] = s.GetCounter().GetValue()
		}
	}
	admitted := map[string]bool{}
	for k := range series {
		if _, code, _ := strings.Cut(k, "/"); code != "" && code != metrics.OtherErrorCode {
			admitted[code] = true
		}
	}
	require.Len(t, admitted, metrics.MaxErrorCodeLabels)
	require.True(t, admitted["timeout"], "pre-made for timed_out, so it holds one of the places")
	// timeout took one place: exit_0 … exit_48 got theirs, the 8 after are other.
	require.Equal(t, float64(extra+1), series["failed/"+metrics.OtherErrorCode])
	require.Equal(t, float64(2), series["failed/exit_0"])
	require.Equal(t, float64(1), series[fmt.Sprintf("failed/exit_%d", metrics.MaxErrorCodeLabels-2)])
	require.NotContains(t, series, fmt.Sprintf("failed/exit_%d", metrics.MaxErrorCodeLabels-1))
	require.Equal(t, float64(2), series["timed_out/timeout"])
	require.Equal(t, float64(1), series["succeeded/"])
	require.Equal(t, float64(0), series["failed/"], "pre-made, so rates start from 0")
}
