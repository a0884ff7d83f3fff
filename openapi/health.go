package openapi

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"reflect"

	"github.com/danielgtaylor/huma/v2"
)

type healthHandlers struct {
	version  string
	ready    func(ctx context.Context) error
	degraded func() []string
	logger   *slog.Logger
}

// NotReadyError is why a replica cannot serve. /readyz, open to anyone,
// shows only Reason; Err (addresses, SQL, paths) is logged.
type NotReadyError struct {
	Reason string
	Err    error
}

func (e *NotReadyError) Error() string {
	if e.Err == nil {
		return e.Reason
	}
	return e.Reason + ": " + e.Err.Error()
}

func (e *NotReadyError) Unwrap() error { return e.Err }

// notReadyReason is what /readyz tells of err.
func notReadyReason(err error) string {
	var nr *NotReadyError
	if errors.As(err, &nr) {
		return nr.Reason
	}
	return "not ready: see the server's log"
}

// HealthStatus answers liveness and readiness probes.
type HealthStatus struct {
	Status  string `json:"status" enum:"ok,unavailable" doc:"ok when the check passed"`
	Version string `json:"version" doc:"Version of this ax build"`
	Reason  string `json:"reason,omitempty" doc:"Why the replica is not ready"`
	// Degraded is what a ready replica does in a lesser way.
	Degraded []string `json:"degraded,omitempty" maxItems:"16" doc:"What this ready replica does in a lesser way, such as polling because database notifications do not reach it (a transaction pooler without AX_DIRECT_DATABASE_URL)"`
}

type healthOutput struct {
	Status int
	Body   HealthStatus
}

func (h *healthHandlers) register(api huma.API) {
	register(api, huma.Operation{
		OperationID: "healthz", Method: http.MethodGet, Path: "/healthz", Tags: []string{"Operations"},
		Summary: "Liveness: the process serves HTTP",
		// 422: an unknown query parameter (RejectUnknownQueryParameters).
		Errors:      []int{http.StatusUnprocessableEntity},
		Description: "200 while the process answers HTTP, whatever the database does (readyz says whether it can serve). Needs no API key.",
	}, func(ctx context.Context, _ *struct{}) (*healthOutput, error) {
		return &healthOutput{Status: http.StatusOK, Body: HealthStatus{Status: "ok", Version: h.version}}, nil
	})
	register(api, huma.Operation{
		OperationID: "readyz", Method: http.MethodGet, Path: "/readyz", Tags: []string{"Operations"},
		Summary:     "Readiness: the database answers and its schema is current",
		Description: "Needs no API key. 503 with a reason while this replica cannot serve; while it serves in a lesser way (polling because database notifications do not reach it), 200 listing how under degraded.",
		Errors:      []int{http.StatusUnprocessableEntity},
		Responses: map[string]*huma.Response{
			"503": {Description: "Not ready", Content: map[string]*huma.MediaType{
				"application/json": {Schema: api.OpenAPI().Components.Schemas.Schema(
					reflect.TypeFor[HealthStatus](), true, "")}}},
		},
	}, func(ctx context.Context, _ *struct{}) (*healthOutput, error) {
		out := &healthOutput{Status: http.StatusOK, Body: HealthStatus{Status: "ok", Version: h.version}}
		if h.ready != nil {
			if err := h.ready(ctx); err != nil {
				out.Status = http.StatusServiceUnavailable
				h.logger.WarnContext(ctx, "not ready", "error", err)
				out.Body.Status, out.Body.Reason = "unavailable", notReadyReason(err)
			}
		}
		if h.degraded != nil && out.Status == http.StatusOK {
			out.Body.Degraded = h.degraded()
		}
		return out, nil
	})
}
