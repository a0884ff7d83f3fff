package openapi

import (
	"errors"
	"log/slog"
	"net/http"

	"github.com/danielgtaylor/huma/v2"
)

// internalErrorDetail is all a client learns of an unexpected error.
const internalErrorDetail = "internal error: the server logged the details"

// hideInternalErrors keeps what went wrong inside the server out of 500
// answers: huma puts the handler's error text (SQL, addresses, file
// names) in the problem's errors. The whole problem is logged here, with
// the request, and the client gets a generic one.
func hideInternalErrors(logger *slog.Logger) huma.Transformer {
	return func(ctx huma.Context, status string, v any) (any, error) {
		problem, ok := v.(*huma.ErrorModel)
		if status != "500" || !ok {
			return v, nil
		}
		var errs []error
		for _, d := range problem.Errors {
			if d != nil {
				errs = append(errs, errors.New(d.Message))
			}
		}
		logger.ErrorContext(ctx.Context(), "internal error", "method", ctx.Method(), "path", ctx.URL().Path,
			"detail", problem.Detail, "error", errors.Join(errs...))
		return &huma.ErrorModel{Type: problem.Type, Title: http.StatusText(http.StatusInternalServerError),
			Status: http.StatusInternalServerError, Detail: internalErrorDetail, Instance: problem.Instance}, nil
	}
}
