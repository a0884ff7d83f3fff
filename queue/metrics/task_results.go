package metrics

import (
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// MaxErrorCodeLabels is how many distinct error codes a replica gives
// series of their own in ax_task_results_total; codes seen after that are
// counted as OtherErrorCode. Error codes come from agents and HTTP targets,
// so without a cap one bad reporter could mint series without end.
const MaxErrorCodeLabels = 50

// OtherErrorCode is the error_code label of outcomes whose code came after
// the first MaxErrorCodeLabels.
const OtherErrorCode = "other"

// TaskResultCounter is ax_task_results_total: task outcomes by state and
// error code ("" for an outcome without one). The first
// MaxErrorCodeLabels distinct codes a replica counts keep their own label;
// the rest share OtherErrorCode. A code once admitted stays admitted, so a
// series never changes meaning while the process lives.
type TaskResultCounter struct {
	vec *prometheus.CounterVec
	max int

	mu    sync.Mutex
	codes map[string]struct{}
}

func newTaskResultCounter(maxCodes int) *TaskResultCounter {
	return &TaskResultCounter{
		vec: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ax_task_results_total",
			Help: "Task outcomes: succeeded, failed (for good), cancelled, timed_out, by error code (\"\" for none; " +
				"codes past the first " + strconv.Itoa(maxCodes) + " a replica sees count as \"other\"); retried failures count as retry.",
		}, []string{"state", "error_code"}),
		max:   maxCodes,
		codes: map[string]struct{}{},
	}
}

// Add counts n outcomes in state with code.
func (c *TaskResultCounter) Add(state, code string, n float64) {
	if n > 0 {
		c.With(state, code).Add(n)
	}
}

// Inc counts one outcome in state with code.
func (c *TaskResultCounter) Inc(state, code string) { c.With(state, code).Inc() }

// With is the counter of outcomes in state with code, after the cap on
// distinct codes.
func (c *TaskResultCounter) With(state, code string) prometheus.Counter {
	return c.vec.WithLabelValues(state, c.label(code))
}

// label is the error_code label of code: itself while the cap allows.
func (c *TaskResultCounter) label(code string) string {
	if code == "" {
		return ""
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.codes[code]; ok {
		return code
	}
	if len(c.codes) >= c.max {
		return OtherErrorCode
	}
	c.codes[code] = struct{}{}
	return code
}

// Describe implements prometheus.Collector.
func (c *TaskResultCounter) Describe(ch chan<- *prometheus.Desc) { c.vec.Describe(ch) }

// Collect implements prometheus.Collector.
func (c *TaskResultCounter) Collect(ch chan<- prometheus.Metric) { c.vec.Collect(ch) }
