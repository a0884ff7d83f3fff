package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
)

// Executor kinds a task can have.
const (
	KindShell   = "shell"
	KindHTTP    = "http"
	KindHandler = "handler"
)

// executor runs one task. It returns the task's result (may be nil) and an
// error when the task failed; a failed task may still have a result (a
// shell command's exit code). It must return soon after ctx ends.
type executor interface {
	execute(ctx context.Context, t LeasedTask, out *taskOutput, log *slog.Logger) (json.RawMessage, error)
}

// DefaultExecutors are the kinds an agent runs unless configured
// otherwise: shell commands need an agent that enables them.
func DefaultExecutors() []string { return []string{KindHandler, KindHTTP} }

// executorFor picks the executor of a task's kind; kinds the agent was not
// configured for are refused, whatever the server sent.
func (a *Agent) executorFor(kind string) (executor, error) {
	if e, ok := a.executors[kind]; ok {
		return e, nil
	}
	if kind != KindShell && kind != KindHTTP && kind != KindHandler {
		return nil, fmt.Errorf("executor kind %q is not supported by this agent (it knows shell, http and handler)", kind)
	}
	return nil, fmt.Errorf("executor kind %q is not enabled on this agent (it runs %s; see Config.Executors, AX_EXECUTORS)",
		kind, strings.Join(a.cfg.Executors, ", "))
}
