package openapi

import (
	"log/slog"

	"github.com/danielgtaylor/huma/v2"

	"github.com/ax-scheduler/ax/queue"
)

// outboundHandlers serve what outside systems use to hand work to ax and
// learn its outcome: ad-hoc runs, callback redelivery, results of
// agentless HTTP tasks, and signing secret rotation.
type outboundHandlers struct {
	jobs      *queue.JobService
	execs     *queue.ExecutionService
	callbacks *queue.CallbackService
	completer *queue.TaskCompleter
	urls      *urlChecker
	api       huma.API // for problems written by middleware
	logger    *slog.Logger
	guard     groupGuard
}

func (h *outboundHandlers) register(api huma.API) {
	h.api = api
	h.registerRuns(api)
	h.registerCallbacks(api)
	h.registerTaskCompletion(api)
	h.registerSecretRotation(api)
}
