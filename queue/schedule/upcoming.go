package schedule

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ax-scheduler/ax/db"

	"github.com/ax-scheduler/ax/queue/axtype"
	"github.com/ax-scheduler/ax/queue/clock"
	"github.com/ax-scheduler/ax/queue/internal/startstop"
	"github.com/ax-scheduler/ax/queue/notify"
)

// UpcomingConfig tunes an Upcoming.
type UpcomingConfig struct {
	// Every is how often the upcoming fires are computed again. Defaults to
	// 30 seconds; a job change (notification) makes it sooner.
	Every time.Duration
	// Horizon is how far ahead ticks are listed: an hour, plus Every so the
	// hour is covered until the next pass. Defaults to 1 h + Every.
	Horizon time.Duration
	// MaxPerJob bounds the ticks listed for one job (an every-second job
	// fires 3,600 times an hour); MaxTotal bounds a pass. Defaults 3,600
	// and 200,000: past them the list is cut (logged), the schedule is not.
	MaxPerJob, MaxTotal int
	// Clock, when set, is the time ticks are computed from (tests).
	Clock  *clock.Clock
	Logger *slog.Logger
}

func (c UpcomingConfig) withDefaults() UpcomingConfig {
	c.Every = cmp.Or(c.Every, 30*time.Second)
	c.Horizon = cmp.Or(c.Horizon, time.Hour+c.Every)
	c.MaxPerJob = cmp.Or(c.MaxPerJob, 3600)
	c.MaxTotal = cmp.Or(c.MaxTotal, 200_000)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Upcoming keeps ax.upcoming_fire (read by the view ax.upcoming_hour)
// holding every tick of the coming hour of the unpaused cron and interval
// jobs. Every replica runs one; a transaction-scoped advisory lock lets
// one at a time replace the table, the others skip their pass.
type Upcoming struct {
	pool     *pgxpool.Pool
	notifier *notify.Notifier
	cfg      UpcomingConfig
	bg       startstop.Runner
}

// NewUpcoming returns an Upcoming over pool; notifier (may be nil) makes
// it recompute when jobs change.
func NewUpcoming(pool *pgxpool.Pool, notifier *notify.Notifier, cfg UpcomingConfig) *Upcoming {
	return &Upcoming{pool: pool, notifier: notifier, cfg: cfg.withDefaults()}
}

// Start runs it in the background until Stop.
func (u *Upcoming) Start(ctx context.Context) error {
	var changed <-chan struct{}
	unsubscribe := func() {}
	if u.notifier != nil {
		changed, unsubscribe = u.notifier.Subscribe(notify.JobChangedChannel)
	}
	u.bg.Start(ctx, func(ctx context.Context) {
		defer unsubscribe()
		force := true
		for ctx.Err() == nil {
			if _, err := u.pass(ctx, force); err != nil && ctx.Err() == nil {
				u.cfg.Logger.ErrorContext(ctx, "error listing upcoming fires", "error", err)
			}
			force = false
			select { // a job changed: list again even if another replica just did
			case <-changed:
				force = true
				notify.Sleep(ctx, time.Second, nil, nil) // a burst of changes (an apply) is one pass
			case <-ctx.Done():
			case <-time.After(u.cfg.Every):
			}
			// A burst of job changes (an apply of many jobs) is one pass.
			notify.Sleep(ctx, time.Second, nil, nil)
		}
	})
	return nil
}

// Stop ends it. Safe to call twice or without Start.
func (u *Upcoming) Stop() { u.bg.Stop() }

// Pass computes the upcoming fires and replaces the table with them; it
// returns how many it listed (0 and no change when another replica holds
// the lock).
func (u *Upcoming) Pass(ctx context.Context) (int, error) { return u.pass(ctx, true) }

// PassIfStale is Pass, except that it leaves a list another replica made
// less than half a period ago: N replicas list once a period, not N
// times. It is what the timer runs; a job change runs Pass.
func (u *Upcoming) PassIfStale(ctx context.Context) (int, error) { return u.pass(ctx, false) }

func (u *Upcoming) pass(ctx context.Context, force bool) (int, error) {
	n := 0
	err := db.WithTx(ctx, u.pool, func(tx pgx.Tx) error {
		locked, err := db.UpcomingFireLock(ctx, tx)
		if err != nil || !locked {
			return err
		}
		if !force {
			if fresh, err := db.UpcomingFireFresh(ctx, tx, u.cfg.Every/2); err != nil || fresh {
				return err
			}
		}
		now := time.Now()
		if c := u.cfg.Clock.Now(); c != nil {
			now = *c
		}
		until := now.Add(u.cfg.Horizon)
		sources, err := db.UpcomingFireSources(ctx, tx, until)
		if err != nil {
			return err
		}
		// Ticks a calendar excludes are not upcoming fires; calendars are
		// read afresh each pass (the cache is the trigger loop's).
		if err := (&calendarCache{}).resolve(ctx, tx, sources); err != nil {
			return err
		}
		var jobIDs []uuid.UUID
		var fireAts []time.Time
		cut := 0
		shared := sharedTicks{}
		for _, t := range sources {
			ticks, err := shared.ticks(t, now, until, u.cfg.MaxPerJob)
			if err != nil {
				u.cfg.Logger.WarnContext(ctx, "cannot list a job's upcoming fires", "job_id", t.JobID, "error", err)
				continue
			}
			if len(t.Calendars) > 0 {
				ticks = excludeTicks(t, slices.Clone(ticks), &skipRecorder{})
			}
			if len(jobIDs)+len(ticks) > u.cfg.MaxTotal {
				cut++
				continue
			}
			for _, tick := range ticks {
				jobIDs, fireAts = append(jobIDs, t.JobID), append(fireAts, tick)
			}
		}
		if cut > 0 {
			u.cfg.Logger.WarnContext(ctx, "upcoming fires cut: too many in the hour", "jobs_left_out", cut, "max", u.cfg.MaxTotal)
		}
		n = len(jobIDs)
		return db.UpcomingFireReplace(ctx, tx, jobIDs, fireAts)
	})
	if err != nil {
		return 0, fmt.Errorf("error listing upcoming fires: %w", err)
	}
	return n, nil
}

// upcomingTicks lists t's ticks from its next fire (or now, if that has
// passed) through until, at most max.
func upcomingTicks(t *axtype.DueTrigger, now, until time.Time, max int) ([]time.Time, error) {
	ticks := triggerTicks{}
	tick, err := ticks.atOrAfter(t, now)
	if err != nil {
		return nil, err
	}
	var out []time.Time
	for tick != nil && !tick.After(until) && len(out) < max {
		out = append(out, *tick)
		if tick, err = ticks.next(t, *tick); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// sharedTicks lists each distinct cron schedule's ticks of a pass once,
// for every job on it: computing a tick (gronx, through regular
// expressions) was most of a pass's CPU, and jobs share schedules (every
// hour, every second).
type sharedTicks map[[2]string][]time.Time

// ticks is upcomingTicks(t, now, until, max), from the schedule's shared
// list when t is a cron job whose next fire is on it.
func (s sharedTicks) ticks(t *axtype.DueTrigger, now, until time.Time, max int) ([]time.Time, error) {
	if t.TriggerKind != axtype.TriggerCron || t.ActiveFrom != nil || t.ActiveUntil != nil || len(t.Triggers) > 0 {
		// A job with an active window, or several triggers, has ticks of
		// its own.
		return upcomingTicks(t, now, until, max)
	}
	key := [2]string{t.CronExpr, t.Timezone}
	all, ok := s[key]
	if !ok {
		fromNow := *t
		fromNow.NextFireAt = time.Time{} // the schedule's ticks from now on
		var err error
		if all, err = upcomingTicks(&fromNow, now, until, math.MaxInt); err != nil {
			return nil, err
		}
		s[key] = all
	}
	start := 0
	if !t.NextFireAt.Before(now) {
		i, found := slices.BinarySearchFunc(all, t.NextFireAt, time.Time.Compare)
		if !found {
			return upcomingTicks(t, now, until, max) // off the schedule's ticks
		}
		start = i
	}
	return all[start:min(len(all), start+max)], nil
}
