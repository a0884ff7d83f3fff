package queue

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/ax-scheduler/ax/db"

	"github.com/ax-scheduler/ax/queue/axtype"
	"github.com/ax-scheduler/ax/queue/cron"
	"github.com/ax-scheduler/ax/queue/schedule"
)

// Verdicts of an Explanation.
const (
	VerdictFired      = "fired"       // a run exists for the tick
	VerdictSkipped    = "skipped"     // a skip record covers the tick
	VerdictNotATick   = "not_a_tick"  // the trigger has no tick at that instant
	VerdictDSTGap     = "dst_gap"     // the wall time asked about does not exist that day
	VerdictPaused     = "paused"      // the job is paused since before the tick
	VerdictNotCreated = "not_created" // the job did not exist yet
	VerdictUpcoming   = "upcoming"    // the tick is in the future
	VerdictManual     = "manual"      // a manual job has no ticks
	VerdictNoRecord   = "no_record"   // a past tick with neither a run nor a skip
	// VerdictOutsideWindow: the instant is a tick of the trigger outside
	// the job's active window, so it does not fire.
	VerdictOutsideWindow = "outside_window"
	// VerdictExcluded: the tick's date is in a calendar the job excludes,
	// and no record says otherwise (the tick is ahead, or not recorded).
	VerdictExcluded = "excluded"
)

// Explanation says, from the records, what became of one instant of a
// job's schedule: "why didn't it run at 03:00?".
type Explanation struct {
	// At is the instant explained: the one asked about, or for a wall
	// time in a daylight-saving gap, the end of the gap (where such a tick
	// fires).
	At      time.Time
	Local   string // At on the job's clock, with its offset
	Verdict string
	Reason  string // one sentence for a person
	Tick    bool   // At is a tick of the trigger
	// Execution is the run fired for the tick; Running, for an overlap
	// skip, the run that was still unfinished at At, and for a run that
	// waited (concurrency policy queue), the run it waited behind.
	Execution, Running *axtype.Execution
	Skip               *axtype.SkippedFire
	NextTick           *time.Time // the trigger's first tick after At, when it has one
	// Triggers, for a job with several triggers, says of each whether it
	// ticks at At and when it ticks next.
	Triggers []TriggerTick
}

// TriggerTick is one trigger of a job's list seen from an instant.
type TriggerTick struct {
	Index    int
	Spec     axtype.TriggerSpec
	Tick     bool       // it ticks at the instant
	NextTick *time.Time // its first tick after the instant
}

// Explain answers what became of job id's schedule at at. With wall, only
// at's date and clock count: they are read in the job's timezone (a wall
// time inside a spring-forward gap is answered as such).
func (s *ExecutionService) Explain(ctx context.Context, id uuid.UUID, at time.Time, wall bool) (*Explanation, error) {
	job, err := db.JobGetByID(ctx, s.pool, id)
	if err != nil {
		return nil, err
	}
	loc, err := cron.LoadLocation(job.Timezone)
	if err != nil {
		return nil, fmt.Errorf("error loading the job's timezone %q: %w", job.Timezone, err)
	}
	out := &Explanation{At: at.UTC()}
	if wall {
		instant, gapEnd := wallInstant(at, loc)
		if gapEnd != nil {
			return s.explainGap(ctx, job, at, *gapEnd, loc)
		}
		out.At = instant
	}
	out.Local = localTime(out.At, loc)
	return out, s.explainInstant(ctx, job, loc, out)
}

// explainInstant fills out (At and Local set) for job.
func (s *ExecutionService) explainInstant(ctx context.Context, job *axtype.Job, loc *time.Location, out *Explanation) error {
	at := out.At
	out.Tick, out.NextTick = isTick(job, loc, at)
	if len(job.Triggers) > 0 {
		explainTriggers(job, out)
	}
	// The records first: what was fired or skipped for the tick is the
	// answer, whatever the job's state now.
	exec, err := db.ExecutionGetByTick(ctx, s.pool, job.ID, at)
	if err == nil {
		out.Verdict, out.Execution = VerdictFired, exec
		out.Reason = fmt.Sprintf("it fired: run %s (%s cause), %s", exec.ID, exec.Cause, exec.State)
		if exec.TriggerIndex != nil && len(job.Triggers) > 0 {
			out.Reason += fmt.Sprintf(", fired by triggers[%d]", *exec.TriggerIndex)
		}
		if exec.Cause == axtype.CauseBackfill {
			return s.explainBackfilled(ctx, exec, out)
		}
		return s.explainWaited(ctx, exec, loc, out)
	} else if !errors.Is(err, axtype.ErrNotFound) {
		return err
	}
	skip, err := db.SkippedFireCovering(ctx, s.pool, job.ID, at)
	if err == nil {
		out.Verdict, out.Skip = VerdictSkipped, skip
		out.Reason = fmt.Sprintf("the tick was skipped (%s): %s", skip.Reason, skip.Detail)
		if skip.Reason == axtype.SkipUpstreamFailed {
			out.Reason = "skipped because " + skip.Detail
		}
		if skip.Reason == axtype.SkipOverlap {
			// The run the skip waited on: unfinished when it was decided.
			running, err := db.ExecutionRunningAt(ctx, s.pool, job.ID, at, skip.RecordedAt)
			switch {
			case err == nil:
				out.Running = running
				out.Reason += fmt.Sprintf("; run %s (the tick of %s) had not finished then", running.ID,
					localTime(running.ScheduledFor, loc))
			case !errors.Is(err, axtype.ErrNotFound):
				return err
			}
		}
		return nil
	} else if !errors.Is(err, axtype.ErrNotFound) {
		return err
	}
	excluded, err := excludingCalendar(ctx, s, job, at)
	if err != nil {
		return err
	}
	switch {
	case job.TriggerKind == axtype.TriggerAfter:
		// Its logical times are its upstreams' (a backfill's may come
		// before it was created).
		return s.explainAfter(ctx, job, out)
	case at.Before(job.CreatedAt):
		out.Verdict = VerdictNotCreated
		out.Reason = fmt.Sprintf("the job was created at %s, after this instant", localTime(job.CreatedAt, loc))
	case job.TriggerKind == axtype.TriggerManual:
		out.Verdict, out.Reason = VerdictManual, "the job is manual: it runs only when triggered, and no run was triggered for this instant"
	case out.Tick && !inActiveWindow(job, at):
		out.Verdict, out.Reason = VerdictOutsideWindow, "outside the active window "+windowText(job, loc)+": the tick does not fire"
	case out.Tick && excluded != nil:
		out.Verdict = VerdictExcluded
		out.Reason = fmt.Sprintf("excluded by calendar %s: %s (in %s) is one of its days, so the tick does not fire",
			excluded.Name, localDate(at, excluded.Timezone), excluded.Timezone)
	case !out.Tick:
		out.Verdict, out.Reason = VerdictNotATick, "this instant is not a tick of the trigger"
		if out.NextTick != nil {
			out.Reason += fmt.Sprintf("; the next tick after it is %s", localTime(*out.NextTick, loc))
		}
	case at.After(time.Now()):
		out.Verdict, out.Reason = VerdictUpcoming, "the tick is in the future"
		if job.Paused {
			out.Reason += "; the job is paused, so it will not fire unless resumed before then"
		}
	case job.Paused && job.PausedAt != nil && !job.PausedAt.After(at):
		out.Verdict = VerdictPaused
		out.Reason = fmt.Sprintf("the job is paused since %s: its ticks do not fire (they are recorded as skipped when it resumes)",
			localTime(*job.PausedAt, loc))
	default:
		out.Verdict = VerdictNoRecord
		out.Reason = "neither a run nor a skip is recorded for this tick: it is due and not fired yet, " +
			"or its run was removed by history retention"
	}
	return nil
}

// explainGap explains a wall time that the timezone skips on its date: a
// tick there fires at the end of the gap (cron's daylight-saving rule).
func (s *ExecutionService) explainGap(ctx context.Context, job *axtype.Job, wall time.Time, gapEnd time.Time, loc *time.Location) (*Explanation, error) {
	end := &Explanation{At: gapEnd, Local: localTime(gapEnd, loc)}
	if err := s.explainInstant(ctx, job, loc, end); err != nil {
		return nil, err
	}
	out := *end
	out.Verdict = VerdictDSTGap
	out.Reason = fmt.Sprintf("%s does not exist in %s: the clocks jump forward at %s; a tick whose wall time falls in the gap fires at its end. At %s: %s",
		wall.Format("2006-01-02 15:04:05"), loc, localTime(gapEnd, loc), localTime(gapEnd, loc), end.Reason)
	return &out, nil
}

// isTick reports whether at is a tick of job's trigger, and its first
// tick after at when it has one.
func isTick(job *axtype.Job, loc *time.Location, at time.Time) (bool, *time.Time) {
	if len(job.Triggers) > 0 {
		// active_from anchors the grid of a list's intervals.
		ticks := schedule.TicksAt(job.Triggers, job.ActiveFrom, nil, at)
		next, err := schedule.NextFire(&axtype.Job{TriggerKind: job.TriggerKind, Triggers: job.Triggers, ActiveFrom: job.ActiveFrom}, at)
		if err != nil {
			return false, nil
		}
		return len(ticks) > 0, next
	}
	switch job.TriggerKind {
	case axtype.TriggerCron:
		sched, err := cron.Parse(job.CronExpr, loc.String())
		if err != nil {
			return false, nil
		}
		next := sched.Next(at)
		return sched.Next(at.Add(-time.Nanosecond)).Equal(at), &next
	case axtype.TriggerInterval:
		anchor := job.NextFireAt
		if anchor == nil {
			anchor = job.LastScheduledFor
		}
		if anchor == nil || job.IntervalSeconds < 1 {
			return false, nil
		}
		step := time.Duration(job.IntervalSeconds) * time.Second
		off := at.Sub(*anchor) % step
		if off < 0 {
			off += step
		}
		next := at.Add(step - off)
		return off == 0, &next
	case axtype.TriggerDelay:
		if job.RunAt == nil {
			return false, nil
		}
		tick := job.RunAt.Equal(at)
		if at.Before(*job.RunAt) {
			return tick, job.RunAt
		}
		return tick, nil
	}
	return false, nil
}

// wallInstant reads wall's date and clock in loc. When that wall time does
// not exist there (a spring-forward gap), it returns the gap's end.
func wallInstant(wall time.Time, loc *time.Location) (time.Time, *time.Time) {
	y, mo, d := wall.Date()
	h, mi, sec := wall.Clock()
	t := time.Date(y, mo, d, h, mi, sec, wall.Nanosecond(), loc)
	if th, tm, ts := t.Clock(); th == h && tm == mi && ts == sec && t.Day() == d {
		return t.UTC(), nil
	}
	// The offset changes somewhere within a few hours of t: find the
	// instant it does (the first one with the later offset).
	lo, hi := t.Add(-6*time.Hour), t.Add(6*time.Hour)
	_, loOff := lo.In(loc).Zone()
	for hi.Sub(lo) > time.Second {
		mid := lo.Add(hi.Sub(lo) / 2).Truncate(time.Second)
		if _, off := mid.In(loc).Zone(); off == loOff {
			lo = mid
		} else {
			hi = mid
		}
	}
	end := hi.UTC()
	return end, &end
}

// inActiveWindow reports whether at lies in job's active window.
func inActiveWindow(job *axtype.Job, at time.Time) bool {
	return (job.ActiveFrom == nil || !at.Before(*job.ActiveFrom)) && (job.ActiveUntil == nil || at.Before(*job.ActiveUntil))
}

// windowText shows job's active window as [from, until) on loc's clock.
func windowText(job *axtype.Job, loc *time.Location) string {
	from, until := "…", "…"
	if job.ActiveFrom != nil {
		from = localTime(*job.ActiveFrom, loc)
	}
	if job.ActiveUntil != nil {
		until = localTime(*job.ActiveUntil, loc)
	}
	return "[" + from + ", " + until + ")"
}

// localTime formats t on loc's clock with its offset.
func localTime(t time.Time, loc *time.Location) string {
	return t.In(loc).Format("2006-01-02T15:04:05-07:00")
}

// explainBackfilled says which backfill ran a tick (the schedule did not:
// it was missed, skipped or came before the job was set to run).
func (s *ExecutionService) explainBackfilled(ctx context.Context, exec *axtype.Execution, out *Explanation) error {
	b, err := db.BackfillOfExecution(ctx, s.pool, exec.ID)
	if err != nil || b == nil {
		return err
	}
	out.Reason = fmt.Sprintf("it was backfilled: run %s of backfill %s, %s", exec.ID, *b, exec.State)
	return nil
}

// explainTriggers fills out.Triggers for a job with several triggers, and
// names in the reason those that tick at the instant.
func explainTriggers(job *axtype.Job, out *Explanation) {
	ticking := schedule.TicksAt(job.Triggers, job.ActiveFrom, nil, out.At)
	next := schedule.ListNextTicks(job.Triggers, job.ActiveFrom, nil, out.At)
	for i, spec := range job.Triggers {
		out.Triggers = append(out.Triggers, TriggerTick{Index: i, Spec: spec, Tick: slices.Contains(ticking, i), NextTick: next[i]})
	}
}

// excludingCalendar returns the calendar of job's exclude list whose days
// hold at, read as they are now; nil when none does.
func excludingCalendar(ctx context.Context, s *ExecutionService, job *axtype.Job, at time.Time) (*axtype.Calendar, error) {
	if len(job.Exclude) == 0 {
		return nil, nil
	}
	cals, err := db.CalendarListByNames(ctx, s.pool, job.Exclude)
	if err != nil {
		return nil, err
	}
	return schedule.ExcludedBy(cals, at), nil
}

// localDate is at's date in the zone tz.
func localDate(at time.Time, tz string) string {
	loc, err := cron.LoadLocation(tz)
	if err != nil {
		loc = time.UTC
	}
	return at.In(loc).Format(time.DateOnly)
}

// explainWaited says why a run of a queue job started late: it waited
// behind an unfinished run of its job (or still does).
func (s *ExecutionService) explainWaited(ctx context.Context, exec *axtype.Execution, loc *time.Location, out *Explanation) error {
	wait, err := db.QueuedRunGet(ctx, s.pool, exec.ID)
	switch {
	case errors.Is(err, axtype.ErrNotFound):
		return nil
	case err != nil:
		return err
	}
	behind := "a run that had ended before the wait was recorded"
	if wait.BehindID != uuid.Nil {
		behind = "run " + wait.BehindID.String()
		running, err := db.ExecutionGetByID(ctx, s.pool, wait.BehindID)
		switch {
		case err == nil:
			out.Running = running
			behind += fmt.Sprintf(" (the tick of %s)", localTime(running.ScheduledFor, loc))
		case !errors.Is(err, axtype.ErrNotFound):
			return err
		}
	}
	if wait.ReleasedAt == nil {
		out.Reason += "; it is waiting behind " + behind + " (concurrency policy queue): it starts when that run ends"
		return nil
	}
	out.Reason += fmt.Sprintf("; it waited behind %s (concurrency policy queue) and was released at %s, when that run ended",
		behind, localTime(*wait.ReleasedAt, loc))
	return nil
}
