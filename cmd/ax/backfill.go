package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/ax-scheduler/ax/openapi/client"
)

// backfillArgs are the parsed arguments of ax job backfill.
type backfillArgs struct {
	Job           uuid.UUID
	From, To      time.Time
	MaxConcurrent int
	Overlap       string // allow | forbid
	Key           string // Idempotency-Key: the same key again is the same backfill
	Detach        bool   // print the backfill and return instead of following it
	Every         time.Duration
}

// newJobBackfillCommand is ax job backfill: run a job's missed ticks
// over a range and follow the progress.
func newJobBackfillCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "backfill JOB --from T --to T [--max-concurrent N] [--detach]",
		Short: "Run a job's ticks in [from, to) that have no run yet, and follow the progress",
		Args:  exactArgs(1),
	}
	af := addAPIFlags(cmd)
	fs := cmd.Flags()
	from := fs.String("from", "", "first instant of the range, RFC 3339 (2026-10-10T00:00:00Z)")
	to := fs.String("to", "", "end of the range (excluded), RFC 3339; not after now")
	maxConcurrent := fs.Int("max-concurrent", 1, "at most this many backfilled runs unfinished at once")
	overlap := fs.String("overlap", "allow", "allow, or forbid: release a tick only while the job has no unfinished run")
	key := fs.String("idempotency-key", "", "Idempotency-Key: the same key again is the same backfill (default: a new backfill)")
	detach := fs.Bool("detach", false, "print the backfill and return instead of following its progress")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if *from == "" || *to == "" {
			return usageErrorf("usage: %s (--from and --to are required)", cmd.UseLine())
		}
		a := backfillArgs{MaxConcurrent: *maxConcurrent, Overlap: *overlap, Key: *key, Detach: *detach, Every: time.Second}
		var err error
		if a.From, err = time.Parse(time.RFC3339, *from); err != nil {
			return usageErrorf("--from: %v", err)
		}
		if a.To, err = time.Parse(time.RFC3339, *to); err != nil {
			return usageErrorf("--to: %v", err)
		}
		c, err := af.client()
		if err != nil {
			return err
		}
		if a.Job, err = resolveJob(cmd.Context(), c, args[0]); err != nil {
			return err
		}
		return runBackfill(cmd.Context(), c, af, a, os.Stdout)
	}
	return cmd
}

// runBackfill creates the backfill and, unless detached, follows it with
// a progress bar until it ends (Ctrl-C stops following, not the backfill).
func runBackfill(ctx context.Context, c *client.ClientWithResponses, af *apiFlags, a backfillArgs, out io.Writer) error {
	maxConcurrent := int64(a.MaxConcurrent)
	overlap := client.BackfillRequestOverlap(a.Overlap)
	body := client.BackfillJobJSONRequestBody{From: a.From, To: a.To, MaxConcurrent: &maxConcurrent, Overlap: &overlap}
	params := &client.BackfillJobParams{}
	if a.Key != "" {
		params.IdempotencyKey = &a.Key
	}
	resp, err := c.BackfillJobWithResponse(ctx, a.Job, params, body)
	if err != nil {
		return fmt.Errorf("error calling ax: %w", err)
	}
	if resp.JSON202 == nil {
		return apiError(resp.StatusCode(), resp.Body)
	}
	b := resp.JSON202
	if af.output == "json" && a.Detach {
		return printJSON(b)
	}
	fmt.Fprintf(out, "backfill %s: %d tick(s) from %s to %s\n", b.Id, b.Ticks.Total,
		b.From.UTC().Format(time.RFC3339), b.To.UTC().Format(time.RFC3339))
	if a.Detach {
		return nil
	}
	for b.State == client.BackfillStateRunning {
		fmt.Fprintf(out, "\r%s", progressLine(b))
		select {
		case <-ctx.Done():
			fmt.Fprintf(out, "\nstopped following; the backfill goes on (ax: GET /v1/backfills/%s)\n", b.Id)
			return nil
		case <-time.After(a.Every):
		}
		r, err := c.GetBackfillWithResponse(ctx, b.Id)
		if err != nil {
			return fmt.Errorf("error calling ax: %w", err)
		}
		if r.JSON200 == nil {
			return apiError(r.StatusCode(), r.Body)
		}
		b = r.JSON200
	}
	fmt.Fprintf(out, "\r%s\n%s\n", progressLine(b), b.State)
	if af.output == "json" {
		return printJSON(b)
	}
	return nil
}

// progressLine draws a backfill's progress: ticks done (a run ended, or
// found run already) of the total, as a bar.
func progressLine(b *client.Backfill) string {
	const width = 30
	done := b.Ticks.Existing + b.Runs.Succeeded + b.Runs.Failed
	filled := width
	if b.Ticks.Total > 0 {
		filled = int(min(done, b.Ticks.Total) * width / b.Ticks.Total)
	}
	return fmt.Sprintf("[%s%s] %d/%d ticks  created %d  existing %d  succeeded %d  failed %d  running %d ",
		strings.Repeat("#", filled), strings.Repeat(".", width-filled), done, b.Ticks.Total,
		b.Ticks.Created, b.Ticks.Existing, b.Runs.Succeeded, b.Runs.Failed, b.Runs.Unfinished)
}
