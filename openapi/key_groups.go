package openapi

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"

	"github.com/ax-scheduler/ax/queue"
	"github.com/ax-scheduler/ax/queue/axtype"
)

// groupGuard keeps a key limited to job groups (`ax key create --groups`)
// to the jobs and runs of those groups. What lies outside answers 404, as
// if it did not exist, so a limited key learns no other group's job ids or
// names; creating a job in another group is refused with 403 naming the
// field. Keys without groups are not slowed down: the checks read nothing.
type groupGuard struct {
	jobs    *queue.JobService
	execs   *queue.ExecutionService
	classes *queue.ClassService
}

// keyGroups returns the groups the caller's key is limited to; nil: all.
func keyGroups(ctx context.Context) []string {
	if key, _ := ctx.Value(principalKey{}).(*axtype.APIKey); key != nil {
		return key.Groups
	}
	return nil
}

// allows reports whether the caller may see and change jobs of group.
func allows(ctx context.Context, group string) bool {
	groups := keyGroups(ctx)
	return groups == nil || slices.Contains(groups, group)
}

// writable refuses a job definition in a group the caller may not use;
// location names the field (body.group).
func writable(ctx context.Context, group, location string) error {
	if allows(ctx, group) {
		return nil
	}
	return huma.Error403Forbidden("this API key is limited to other job groups",
		&huma.ErrorDetail{Location: location, Value: group, Message: "is not one of the key's groups"})
}

// classProblems refuses, for a key limited to groups, a rate class open
// to every group (no groups of its own): such a key's jobs would take the
// tokens of a class other teams' jobs rely on. A class kept to groups is
// held to them by the database for every writer (job_rate_class_groups).
// location names the field (body.rate_limit_class).
func (g groupGuard) classProblems(ctx context.Context, class, location string) (fieldErrors, error) {
	if class == "" || keyGroups(ctx) == nil {
		return nil, nil
	}
	groups, err := g.classes.Groups(ctx, class)
	switch {
	case errors.Is(err, axtype.ErrNotFound):
		return nil, nil // the write says the job names no class
	case err != nil:
		return nil, err
	case groups == nil:
		var errs fieldErrors
		errs.add(location, "is open to every job group; a key limited to groups may name only a class kept to "+
			"groups (ask an admin to set the class's groups)", class)
		return errs, nil
	}
	return nil, nil
}

// class is classProblems as a problem response (422).
func (g groupGuard) class(ctx context.Context, class, location string) error {
	errs, err := g.classProblems(ctx, class, location)
	if err != nil || len(errs) == 0 {
		return err
	}
	return huma.Error422UnprocessableEntity("the rate class is open to every group", errs...)
}

// classKept is class for a change of job id: a class the job names
// already is kept (a job written before migration 00080, or before its
// class lost its groups, stays editable); only a class it did not name is
// checked.
func (g groupGuard) classKept(ctx context.Context, id uuid.UUID, class, location string) error {
	if class == "" || keyGroups(ctx) == nil {
		return nil
	}
	stored, err := g.jobs.Get(ctx, id)
	if err == nil && stored.RateLimitClass == class {
		return nil
	}
	return g.class(ctx, class, location)
}

// upstreamProblems refuses, for a key limited to groups, the upstream jobs
// of def in other groups, as if they did not exist ("names no job"): a
// downstream job's params render its upstreams' results, so such a key
// could read another group's results, and learn which of its jobs exist.
// at prefixes each field (body., body.jobs[i].).
func upstreamProblems(ctx context.Context, def *axtype.Job, at string) fieldErrors {
	if keyGroups(ctx) == nil {
		return nil
	}
	var errs fieldErrors
	for i, u := range def.AfterUpstream {
		group, _, _ := strings.Cut(u.Job, "/")
		if !allows(ctx, group) {
			errs.add(fmt.Sprintf("%strigger.upstream[%d].job", at, i), fmt.Sprintf("names no job: %q", u.Job), u.Job)
		}
	}
	return errs
}

// upstreamsVisible is upstreamProblems as one 422 for a job's own call.
func upstreamsVisible(ctx context.Context, def *axtype.Job) error {
	if errs := upstreamProblems(ctx, def, "body."); len(errs) > 0 {
		return huma.Error422UnprocessableEntity("invalid upstream jobs", errs...)
	}
	return nil
}

// job answers 404 when the caller may not see job id.
func (g groupGuard) job(ctx context.Context, id uuid.UUID) error {
	if keyGroups(ctx) == nil {
		return nil
	}
	group, err := g.jobs.Group(ctx, id)
	return g.decide(ctx, group, err, "job not found")
}

// execution answers 404 when the caller may not see execution id.
func (g groupGuard) execution(ctx context.Context, id uuid.UUID) error {
	if keyGroups(ctx) == nil {
		return nil
	}
	group, err := g.execs.Group(ctx, id)
	return g.decide(ctx, group, err, "execution not found")
}

func (g groupGuard) decide(ctx context.Context, group string, err error, notFound string) error {
	switch {
	case errors.Is(err, axtype.ErrNotFound):
		return huma.Error404NotFound(notFound)
	case err != nil:
		return err
	case !allows(ctx, group):
		return huma.Error404NotFound(notFound)
	}
	return nil
}
