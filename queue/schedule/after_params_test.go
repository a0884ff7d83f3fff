package schedule_test

import (
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/queue/axtype"
	"github.com/ax-scheduler/ax/queue/schedule"
)

// TestRenderedAfterParamsAreBounded: each template of a downstream job's
// params is bounded, their number only by the params' own 256 KiB. 2,000
// templates of an upstream's 60 KB result rendered 120 MB, which the run
// then carried in every lease and callback (and past 256 MB no run could
// be stored). Rendering stops once the output passes what params may be;
// the firer then uses the params as written. A few templates still render.
func TestRenderedAfterParamsAreBounded(t *testing.T) {
	t.Parallel()
	result, err := json.Marshal(strings.Repeat("r", 60_000))
	require.NoError(t, err)
	runs := []axtype.AfterRun{{ID: uuid.Must(uuid.NewV7()), Name: "etl/u", State: "succeeded", Result: result,
		ScheduledFor: time.Now()}}
	doc := map[string]any{}
	for i := range 2000 {
		doc[fmt.Sprintf("k%d", i)] = `{{index .upstream "etl/u" "result"}}`
	}
	params, err := json.Marshal(doc)
	require.NoError(t, err)

	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err = schedule.RenderAfterParams(params, runs, time.Now())
	runtime.ReadMemStats(&after)
	require.ErrorContains(t, err, "larger than the 262144 bytes params may be")
	require.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(32<<20), "allocated %d MiB", (after.TotalAlloc-before.TotalAlloc)>>20)

	few, err := json.Marshal(map[string]any{"a": `{{index .upstream "etl/u" "state"}}`, "b": 1})
	require.NoError(t, err)
	rendered, err := schedule.RenderAfterParams(few, runs, time.Now())
	require.NoError(t, err)
	require.JSONEq(t, `{"a": "succeeded", "b": 1}`, string(rendered))
}
