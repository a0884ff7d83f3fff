package openapi

import (
	"context"
	"log/slog"

	"github.com/danielgtaylor/huma/v2"

	"github.com/ax-scheduler/ax/queue/axtype"
	"github.com/ax-scheduler/ax/queue/delivery"
	"github.com/ax-scheduler/ax/queue/outbound"
)

// urlChecker refuses, when a job is saved, the URLs ax itself would call
// but may not reach (server-side request forgery): the callback URL, and
// the URL of an HTTP job without target labels (ax serve sends it). The
// same policy is enforced again at every connection. The caller is told
// why without what a name resolved to (outbound.Explain): that would map
// the internal network for anyone who may save a job; the log has it.
type urlChecker struct {
	policy outbound.Policy
	logger *slog.Logger
}

// check returns a 422 naming each refused URL's field, or nil.
func (c *urlChecker) check(ctx context.Context, j *Job) error {
	errs := c.problems(ctx, j, "body.")
	if len(errs) == 0 {
		return nil
	}
	return huma.Error422UnprocessableEntity("the job names a URL ax may not call", errs...)
}

// problems lists what check refuses, each located under prefix
// ("body.", "body.jobs[2].").
func (c *urlChecker) problems(ctx context.Context, j *Job, prefix string) fieldErrors {
	var errs fieldErrors
	if j.Callback != nil && j.Callback.URL != "" {
		if _, err := c.policy.ValidateURL(ctx, j.Callback.URL); err != nil {
			errs.add(prefix+"callback.url", c.refused(ctx, "callback.url", err), j.Callback.URL)
		}
	}
	if agentlessHTTP(j) {
		if _, err := c.policy.ValidateURL(ctx, j.Executor.URL); err != nil {
			errs.add(prefix+"executor.url", c.refused(ctx, "executor.url", err), j.Executor.URL)
		}
		if err := delivery.ParseHTTPBodyTemplate(j.Executor.Body); err != nil {
			errs.add(prefix+"executor.body", "is not a valid template: "+err.Error(), j.Executor.Body)
		}
	}
	return errs
}

// refused logs why a URL was refused, in full, and returns the reason the
// caller may see.
func (c *urlChecker) refused(ctx context.Context, field string, err error) string {
	if c.logger != nil {
		c.logger.InfoContext(ctx, "job URL refused", "field", field, "error", err)
	}
	return outbound.Explain(err)
}

// agentlessHTTP reports whether ax serve itself sends a job's requests,
// by axtype.Job.Agentless on the fields that decide it.
func agentlessHTTP(j *Job) bool {
	stored := axtype.Job{ExecutorKind: axtype.ExecutorKind(j.Executor.Kind), TargetLabels: deref(j.Target).Labels,
		RouteStrategy: axtype.RouteStrategy(deref(j.Route).Strategy)}
	return stored.Agentless()
}
