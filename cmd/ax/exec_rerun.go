package main

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"text/tabwriter"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/ax-scheduler/ax/openapi/client"
)

// rerunArgs are the parsed arguments of ax exec rerun: one run (ID), or
// the ended runs a filter selects.
type rerunArgs struct {
	ID         uuid.UUID // one run; uuid.Nil: a bulk re-run by the filter below
	Failed     bool      // only the shards that did not succeed
	Job        *uuid.UUID
	Group      string
	States     []string
	ErrorCodes []string
	Since      time.Duration
	Max        int
	DryRun     bool
	Key        string // the request key; "": the server's default (a hash of the request)
}

// newExecRerunCommand is ax exec rerun: one run by id, or the ended runs
// a filter selects.
func newExecRerunCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "rerun [ID] [--failed] | rerun --job JOB|--group G [--state S] [--error-code C] [--since 24h] [--dry-run]",
		Short: "Re-run a run (or only its failed shards), or the ended runs a filter selects",
		Args:  cobra.MaximumNArgs(1),
	}
	af := addAPIFlags(cmd)
	fs := cmd.Flags()
	failed := fs.Bool("failed", false, "re-run only the shards that did not succeed")
	job := fs.String("job", "", "bulk: re-run the ended runs of this job (id, group/name or name)")
	group := fs.String("group", "", "bulk: re-run the ended runs of this job group")
	state := fs.String("state", "", "bulk: comma-separated states (failed,timed_out,cancelled,succeeded); default failed,timed_out")
	codes := fs.String("error-code", "", "bulk: comma-separated error codes a shard ended with (exit_3,http_503)")
	since := fs.Duration("since", 0, "bulk: only runs scheduled within this long ago (e.g. 24h)")
	maxRuns := fs.Int("max", 100, "bulk: re-run at most this many runs (1-1000)")
	dryRun := fs.Bool("dry-run", false, "bulk: list what would be re-run, change nothing")
	key := fs.String("request-key", "", "request key: the same key again never re-runs a run twice (default: derived from the request)")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		a := rerunArgs{Failed: *failed, Group: *group, States: splitList(*state), ErrorCodes: splitList(*codes),
			Since: *since, Max: *maxRuns, DryRun: *dryRun, Key: *key}
		c, err := af.client()
		if err != nil {
			return err
		}
		switch {
		case len(args) == 1 && *job == "" && *group == "":
			id, err := uuid.Parse(args[0])
			if err != nil {
				return usageErrorf("execution id %q is not a UUID", args[0])
			}
			a.ID = id
		case len(args) == 0 && (*job != "" || *group != ""):
			if *job != "" {
				id, err := resolveJob(cmd.Context(), c, *job)
				if err != nil {
					return err
				}
				a.Job = &id
			}
		default:
			return usageErrorf("usage: ax exec rerun ID [--failed]  |  ax exec rerun --job JOB|--group G [--state failed] [--error-code C] [--since 24h] [--dry-run]")
		}
		if a.ID != uuid.Nil {
			return rerunOne(cmd.Context(), c, af, a)
		}
		return rerunMany(cmd.Context(), c, af, a)
	}
	return cmd
}

// rerunOne re-runs one run and prints the new one.
func rerunOne(ctx context.Context, c *client.ClientWithResponses, af *apiFlags, a rerunArgs) error {
	shards := client.RerunRequestShardsAll
	if a.Failed {
		shards = client.RerunRequestShardsFailed
	}
	body := client.RerunExecutionJSONRequestBody{Shards: &shards}
	if a.Key != "" {
		body.RequestKey = &a.Key
	}
	resp, err := c.RerunExecutionWithResponse(ctx, a.ID, nil, body)
	if err != nil {
		return fmt.Errorf("error calling ax: %w", err)
	}
	if resp.JSON202 == nil {
		return apiError(resp.StatusCode(), resp.Body)
	}
	if af.output == "json" {
		return printJSON(resp.JSON202)
	}
	e := resp.JSON202
	fmt.Printf("re-run %s of %s: %s, %d shard(s) %s\n", e.Id, a.ID, e.State, len(deref(e.Tasks)), shards)
	return nil
}

// rerunMany re-runs (or with DryRun lists) the runs the filter selects.
func rerunMany(ctx context.Context, c *client.ClientWithResponses, af *apiFlags, a rerunArgs) error {
	shards := client.BulkRerunRequestShardsAll
	if a.Failed {
		shards = client.BulkRerunRequestShardsFailed
	}
	maxRuns := int64(a.Max)
	body := client.RerunExecutionsJSONRequestBody{JobId: a.Job, Shards: &shards, Max: &maxRuns, DryRun: &a.DryRun}
	if a.Group != "" {
		body.Group = &a.Group
	}
	if len(a.States) > 0 {
		states := make([]client.BulkRerunRequestStates, len(a.States))
		for i, s := range a.States {
			states[i] = client.BulkRerunRequestStates(s)
		}
		body.States = &states
	}
	if len(a.ErrorCodes) > 0 {
		body.ErrorCodes = &a.ErrorCodes
	}
	if a.Since > 0 {
		from := time.Now().Add(-a.Since)
		body.From = &from
	}
	// Without a key the command's own arguments make one (not the server's
	// hash of the body, whose from moves with the clock under --since):
	// the same command again re-runs nothing twice.
	key := cmp.Or(a.Key, bulkCommandKey(a))
	body.RequestKey = &key
	resp, err := c.RerunExecutionsWithResponse(ctx, nil, body)
	if err != nil {
		return fmt.Errorf("error calling ax: %w", err)
	}
	if resp.JSON200 == nil {
		return apiError(resp.StatusCode(), resp.Body)
	}
	out := resp.JSON200
	if af.output == "json" {
		return printJSON(out)
	}
	w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "EXECUTION\tSTATE\tSCHEDULED FOR (UTC)\tRE-RUN")
	for _, r := range deref(out.Runs) {
		rerun := "-"
		switch {
		case r.RerunId != nil:
			rerun = r.RerunId.String()
			if deref(r.Replayed) {
				rerun += " (made earlier)"
			}
		case r.Error != nil:
			rerun = "not re-run: " + *r.Error
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", r.ExecutionId, r.State, r.ScheduledFor.UTC().Format(time.RFC3339), rerun)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	n := len(deref(out.Runs))
	switch {
	case out.DryRun:
		fmt.Printf("dry run: %d run(s) would be re-run\n", n)
	default:
		fmt.Printf("%d run(s) re-run under key %s (run the same command again: nothing is re-run twice)\n", n, out.RequestKey)
	}
	if out.Truncated {
		// Not "raise --max": the key is of the arguments, and a new key
		// would re-run again what this call re-ran.
		fmt.Printf("stopped: more runs matched than --max %d, or the re-runs made reached the bound of a call "+
			"(50,000 tasks); run the same command again to go on\n", a.Max)
	}
	return nil
}

// bulkCommandKey derives a request key from a bulk re-run's arguments.
func bulkCommandKey(a rerunArgs) string {
	job := ""
	if a.Job != nil {
		job = a.Job.String()
	}
	sum := sha256.Sum256(fmt.Appendf(nil, "%s|%s|%q|%q|%s|%t|%d", job, a.Group, a.States, a.ErrorCodes, a.Since,
		a.Failed, a.Max))
	return "cli:" + hex.EncodeToString(sum[:16])
}
