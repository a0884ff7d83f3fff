package openapi

import (
	"fmt"

	"github.com/danielgtaylor/huma/v2"

	"github.com/ax-scheduler/ax/queue"
	"github.com/ax-scheduler/ax/queue/axtype"
)

// checkErrorCode refuses, as a problem naming location, an error code that
// is not queue.ValidErrorCode or that comes with a result that succeeded (a
// success has no reason to give). The schema's pattern says the same for
// clients; this holds handlers to it whatever the schema lets through.
func checkErrorCode(location, state, code string) error {
	switch {
	case code == "":
		return nil
	case !queue.ValidErrorCode(code):
		return huma.Error422UnprocessableEntity("invalid error code", &huma.ErrorDetail{Location: location,
			Message: fmt.Sprintf("must be 1 to %d of a-z, 0-9, '_', '.' and '-'", axtype.MaxErrorCodeLength), Value: code})
	case state == string(axtype.TaskSucceeded):
		return huma.Error422UnprocessableEntity("error code on a success", &huma.ErrorDetail{Location: location,
			Message: "only a result that did not succeed carries an error code", Value: code})
	}
	return nil
}
