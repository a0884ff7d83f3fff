package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/google/uuid"

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

// jobBackfill parses ax job backfill's flags and runs it.
func jobBackfill(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("ax job backfill ID --from T --to T", flag.ContinueOnError)
	var af apiFlags
	af.register(fs)
	from := fs.String("from", "", "first instant of the range, RFC 3339 (2026-10-10T00:00:00Z)")
	to := fs.String("to", "", "end of the range (excluded), RFC 3339; not after now")
	maxConcurrent := fs.Int("max-concurrent", 1, "at most this many backfilled runs unfinished at once")
	overlap := fs.String("overlap", "allow", "allow, or forbid: release a tick only while the job has no unfinished run")
	key := fs.String("idempotency-key", "", "Idempotency-Key: the same key again is the same backfill (default: a new backfill)")
	detach := fs.Bool("detach", false, "print the backfill and return instead of following its progress")
	if err := parseInterspersed(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 || *from == "" || *to == "" {
		return errors.New("usage: ax job backfill ID --from T --to T [--max-concurrent N] [--detach]")
	}
	a := backfillArgs{MaxConcurrent: *maxConcurrent, Overlap: *overlap, Key: *key, Detach: *detach, Every: time.Second}
	var err error
	if a.Job, err = uuid.Parse(fs.Arg(0)); err != nil {
		return fmt.Errorf("job id %q is not a UUID", fs.Arg(0))
	}
	if a.From, err = time.Parse(time.RFC3339, *from); err != nil {
		return fmt.Errorf("--from: %w", err)
	}
	if a.To, err = time.Parse(time.RFC3339, *to); err != nil {
		return fmt.Errorf("--to: %w", err)
	}
	c, err := af.client()
	if err != nil {
		return err
	}
	return runBackfill(ctx, c, &af, a, os.Stdout)
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
