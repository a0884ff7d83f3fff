package openapi

import (
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
	guard     groupGuard
}

func (h *outboundHandlers) register(api huma.API) {
	h.registerRuns(api)
	h.registerCallbacks(api)
	h.registerTaskCompletion(api)
	h.registerSecretRotation(api)
}
