package openapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/ax-scheduler/ax/queue"
	"github.com/ax-scheduler/ax/queue/axtype"
	"github.com/ax-scheduler/ax/queue/httptask"
)

// urlChecker refuses, when a job is saved, the URLs ax itself would call
// but may not reach (server-side request forgery): the callback URL, and
// the URL of an HTTP job without target labels (ax serve sends it). The
// same policy is enforced again at every connection. The caller is told
// why without what a name resolved to (queue.ExplainOutbound): that would map
// the internal network for anyone who may save a job; the log has it.
type urlChecker struct {
	policy queue.OutboundPolicy
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

// urlCheckTime bounds the name lookups of one request's URL checks, all
// together: a declaration of 1,000 jobs naming 2,000 hosts of a name
// server that does not answer took hours, holding its request (and its
// share of the body memory budget) all along.
const urlCheckTime = 10 * time.Second

// urlChecks checks the URLs of one request: each distinct URL once,
// all of them within urlCheckTime.
type urlChecks struct {
	c      *urlChecker
	ctx    context.Context
	cancel context.CancelFunc
	mu     sync.Mutex
	seen   map[string]error
}

// urlLookupsAtOnce bounds the lookups prefetch runs at once: one after
// another, 1,000 hosts at 20 ms each would pass urlCheckTime.
const urlLookupsAtOnce = 8

// prefetch checks raws, urlLookupsAtOnce at a time, for the calls to
// problems that follow.
func (u *urlChecks) prefetch(raws []string) {
	todo := map[string]bool{}
	for _, raw := range raws {
		if raw != "" {
			todo[raw] = true
		}
	}
	slots := make(chan struct{}, urlLookupsAtOnce)
	var wg sync.WaitGroup
	for raw := range todo {
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			u.validate(raw)
		})
	}
	wg.Wait()
}

// checks starts the URL checks of one request; the caller calls done.
func (c *urlChecker) checks(ctx context.Context) *urlChecks {
	ctx, cancel := context.WithTimeout(ctx, urlCheckTime)
	return &urlChecks{c: c, ctx: ctx, cancel: cancel, seen: map[string]error{}}
}

func (u *urlChecks) done() { u.cancel() }

// validate checks raw once per request.
func (u *urlChecks) validate(raw string) error {
	u.mu.Lock()
	err, ok := u.seen[raw]
	u.mu.Unlock()
	if ok {
		return err
	}
	_, err = u.c.policy.ValidateURL(u.ctx, raw)
	if err != nil && u.ctx.Err() != nil {
		err = errURLCheckTimedOut
	}
	u.mu.Lock()
	u.seen[raw] = err
	u.mu.Unlock()
	return err
}

// errURLCheckTimedOut: the request's URLs took longer than urlCheckTime
// to check.
var errURLCheckTimedOut = fmt.Errorf("was not checked: the request's URLs took longer than %s to check", urlCheckTime)

// problems lists what check refuses, each located under prefix
// ("body.", "body.jobs[2].").
func (c *urlChecker) problems(ctx context.Context, j *Job, prefix string) fieldErrors {
	u := c.checks(ctx)
	defer u.done()
	var errs fieldErrors
	awayWhile(ctx, func() { errs = u.problems(j, prefix) }) // name lookups, up to urlCheckTime
	return errs
}

// checkedURLs are the URLs of j that problems checks.
func checkedURLs(j *Job) []string {
	var out []string
	if j.Callback != nil {
		out = append(out, j.Callback.URL)
	}
	if agentlessHTTP(j) {
		out = append(out, j.Executor.URL)
	}
	return out
}

// problems is urlChecker.problems within these checks.
func (u *urlChecks) problems(j *Job, prefix string) fieldErrors {
	var errs fieldErrors
	if j.Callback != nil && j.Callback.URL != "" {
		if err := u.validate(j.Callback.URL); err != nil {
			errs.add(prefix+"callback.url", u.c.refused(u.ctx, "callback.url", err), j.Callback.URL)
		}
	}
	if agentlessHTTP(j) {
		if err := u.validate(j.Executor.URL); err != nil {
			errs.add(prefix+"executor.url", u.c.refused(u.ctx, "executor.url", err), j.Executor.URL)
		}
		if err := httptask.ParseBodyTemplate(j.Executor.Body); err != nil {
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
	if errors.Is(err, errURLCheckTimedOut) {
		return err.Error()
	}
	return queue.ExplainOutbound(err)
}

// agentlessHTTP reports whether ax serve itself sends a job's requests,
// by axtype.Job.Agentless on the fields that decide it.
func agentlessHTTP(j *Job) bool {
	stored := axtype.Job{ExecutorKind: axtype.ExecutorKind(j.Executor.Kind), TargetLabels: deref(j.Target).Labels,
		RouteStrategy: axtype.RouteStrategy(deref(j.Route).Strategy)}
	return stored.Agentless()
}
