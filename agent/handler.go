package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/ax-scheduler/ax/queue/httptask"
)

// HandlerFunc runs a task of executor kind handler. It should stop soon
// after ctx ends (timeout, cancel from the server, lost lease, drain). The
// returned Result is marshalled to JSON and recorded as the task's result;
// a non-nil error fails the task with its text.
//
// Tasks run at least once: a handler may see the same task again after a
// crash or a lost lease, so it should use Task.IdempotencyKey for side
// effects that must happen once.
type HandlerFunc func(ctx context.Context, t Task) (Result, error)

// Result is the JSON-able output of a handler; nil records no result.
type Result any

// Task is what a handler gets to know about the task it runs.
type Task struct {
	// ExecutionID identifies the run; with ShardIndex it is the idempotency
	// key of this task (see IdempotencyKey).
	ExecutionID string
	TaskID      string
	JobID       string
	ShardIndex  int
	ShardTotal  int
	ShardParam  string
	// Attempt counts from 1; MaxAttempts is how many the job allows.
	Attempt      int
	MaxAttempts  int
	Params       json.RawMessage
	ScheduledFor time.Time
	// Deadline is when the attempt times out by the server's clock, at the
	// earliest (lease time plus the job's timeout); the handler's ctx ends
	// at the agent's own reckoning of it.
	Deadline time.Time
	// TraceParent is the run's W3C trace context ("" when none): start the
	// handler's spans under it to follow the run across systems.
	TraceParent string
	// Logger carries execution_id and task_id; use it for lines about the
	// task.
	Logger *slog.Logger
	// Output is the task's log: what is written here is shipped to the
	// server like a shell command's stdout.
	Output io.Writer
}

// IdempotencyKey is the task's key: the execution id, followed by
// ":<shard_index>" when the run has several shards. It is the same for
// every attempt of this task, different for every other task, and the
// same key an HTTP task of the same shard gets in Idempotency-Key and
// webhook-id (whoever sends it) and the callback lists for the shard
// (shards.items[].idempotency_key).
func (t Task) IdempotencyKey() string {
	return httptask.IdempotencyKey(t.ExecutionID, t.ShardIndex, t.ShardTotal)
}

// DecodeParams unmarshals the run's params into v. Numbers keep their
// exact value: into an int64 or uint64 field as usual, and into an
// interface{} (a map[string]any, say) as a json.Number rather than a
// float64, which would round integers above 2^53. Params holds the raw
// JSON for any other decoder.
func (t Task) DecodeParams(v any) error {
	if len(t.Params) == 0 {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(t.Params))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("error decoding params of task %s: %w", t.TaskID, err)
	}
	return nil
}

// handlerRegistry maps handler names to functions.
type handlerRegistry struct {
	mu sync.RWMutex
	m  map[string]HandlerFunc
}

// defaultHandlers is what the package-level Handle registers on; every
// Agent looks there after its own handlers.
var defaultHandlers = &handlerRegistry{}

// Handle registers fn for tasks whose executor names handler name, on every
// Agent of this process (Agent.Handle registers on one agent only). Like
// http.Handle it panics on an empty name, a nil fn or a name registered
// twice: those are programming errors best found at start.
func Handle(name string, fn HandlerFunc) { defaultHandlers.add(name, fn) }

func (r *handlerRegistry) add(name string, fn HandlerFunc) {
	if name == "" || fn == nil {
		panic("agent: Handle needs a name and a function")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.m[name]; dup {
		panic(fmt.Sprintf("agent: handler %q registered twice", name))
	}
	if r.m == nil {
		r.m = map[string]HandlerFunc{}
	}
	r.m[name] = fn
}

func (r *handlerRegistry) get(name string) (HandlerFunc, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	fn, ok := r.m[name]
	return fn, ok
}

func (r *handlerRegistry) names() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	names := make([]string, 0, len(r.m))
	for n := range r.m {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// handlerLookup finds a handler in the first registry that has it.
type handlerLookup []*handlerRegistry

func (l handlerLookup) get(name string) (HandlerFunc, bool) {
	for _, r := range l {
		if fn, ok := r.get(name); ok {
			return fn, true
		}
	}
	return nil, false
}

func (l handlerLookup) names() []string {
	var names []string
	for _, r := range l {
		names = append(names, r.names()...)
	}
	slices.Sort(names)
	return slices.Compact(names)
}
