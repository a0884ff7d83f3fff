package main

import (
	"context"
	"strings"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/ax-scheduler/ax/openapi/client"
)

// resolveJob finds the job a person named: its id, `group/name`, or a bare
// name when one group alone has a job of that name. The group ends at the
// first slash: a name with slashes is written with its group
// (default/reports/daily).
func resolveJob(ctx context.Context, c *client.ClientWithResponses, ref string) (uuid.UUID, error) {
	if id, err := uuid.Parse(ref); err == nil {
		return id, nil
	}
	if ref == "" {
		return uuid.Nil, usageErrorf("a job is named by its id, group/name or name")
	}
	limit := int64(2) // two tell a unique name from an ambiguous one
	params := &client.ListJobsParams{Limit: &limit}
	name := ref
	if group, rest, ok := strings.Cut(ref, "/"); ok {
		params.Group, name = &group, rest
	}
	params.Name = &name
	resp, err := c.ListJobsWithResponse(ctx, params)
	if err != nil {
		return uuid.Nil, unreachable(err)
	}
	if resp.JSON200 == nil {
		return uuid.Nil, apiError(resp.StatusCode(), resp.Body)
	}
	jobs := deref(resp.JSON200.Jobs)
	switch len(jobs) {
	case 0:
		return uuid.Nil, notFoundErrorf("no job %q (see `ax job list`)", ref)
	case 1:
		return deref(jobs[0].Id), nil
	}
	return uuid.Nil, usageErrorf("more than one group has a job named %q: name it as GROUP/NAME (%s/%s, %s/%s)",
		ref, deref(jobs[0].Group), name, deref(jobs[1].Group), name)
}

// completeJobs offers group/name of the jobs the server has, when the
// command line or the environment holds a server and key; else nothing.
func completeJobs(af *apiFlags) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		c, err := af.client()
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		limit := int64(1000)
		resp, err := c.ListJobsWithResponse(cmd.Context(), &client.ListJobsParams{Limit: &limit})
		if err != nil || resp.JSON200 == nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var out []cobra.Completion
		for _, j := range deref(resp.JSON200.Jobs) {
			ref := deref(j.Group) + "/" + j.Name
			if strings.HasPrefix(ref, toComplete) {
				out = append(out, cobra.CompletionWithDesc(ref, describeTriggers(j)))
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}
