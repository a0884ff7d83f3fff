package main

import (
	"errors"
	"flag"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/ax-scheduler/ax/queue"
	"github.com/ax-scheduler/ax/queue/axtype"
)

// healthConfig is how `ax serve` judges agents for routing (issue #17):
// the window of least_active's duration tie-break and the error share
// that quarantines. The smoothing of agents' load is Agent.LoadSmoothing.
type healthConfig struct {
	// DurationWindow (AX_DURATION_WINDOW, default 1 h) is how far back an
	// agent's successes count toward its average task duration.
	DurationWindow time.Duration
	// ErrorShare (AX_QUARANTINE_ERROR_SHARE, default 0: off) quarantines an
	// agent whose failures matching ErrorCodes reach this share of its
	// outcomes in the quarantine window.
	ErrorShare float64
	// ErrorCodes (AX_QUARANTINE_ERROR_CODES, comma-separated) are the
	// error codes (exit_137, signal_killed, …) a failure must carry to
	// count toward ErrorShare; none: every failure counts.
	ErrorCodes []string
	// CheckEvery (AX_HEALTH_CHECK_EVERY, default 5 s) is how often the
	// reaper judges agents' health: its cost grows with the fleet.
	CheckEvery time.Duration
}

// maxErrorCodes bounds AX_QUARANTINE_ERROR_CODES.
const maxErrorCodes = 32

// addHealthFlags maps the flags and AX_ variables of agent health onto c.
func addHealthFlags(fs *flag.FlagSet, c *serveConfig) error {
	smoothing, errSmoothing := envDuration("AX_LOAD_SMOOTHING", axtype.DefaultLoadSmoothing)
	window, errWindow := envDuration("AX_DURATION_WINDOW", time.Hour)
	share, errShare := envFloat("AX_QUARANTINE_ERROR_SHARE", 0)
	every, errEvery := envDuration("AX_HEALTH_CHECK_EVERY", 5*time.Second)
	fs.DurationVar(&c.Health.CheckEvery, "health-check-every", every,
		"how often agents' failure rates are checked for quarantine and their probes for restore; each check reads every active agent's recent outcomes (AX_HEALTH_CHECK_EVERY)")
	fs.DurationVar(&c.Agent.LoadSmoothing, "load-smoothing", smoothing,
		"how long a heartbeat's load keeps weighing on an agent's smoothed load, which load_aware routing reads (AX_LOAD_SMOOTHING)")
	fs.DurationVar(&c.Health.DurationWindow, "duration-window", window,
		"how far back successes count toward an agent's average task duration, least_active's tie-break (AX_DURATION_WINDOW)")
	fs.Float64Var(&c.Health.ErrorShare, "quarantine-error-share", share,
		"quarantine an agent when failures matching --quarantine-error-codes reach this share of its outcomes; 0: off (AX_QUARANTINE_ERROR_SHARE)")
	fs.Func("quarantine-error-codes",
		"comma-separated error codes (exit_137, signal_killed…) a failure must carry to count toward --quarantine-error-share; none: every failure (AX_QUARANTINE_ERROR_CODES)",
		func(s string) error { c.Health.ErrorCodes = splitCodes(s); return nil })
	c.Health.ErrorCodes = splitCodes(envOr("AX_QUARANTINE_ERROR_CODES", ""))
	return errors.Join(errSmoothing, errWindow, errShare, errEvery)
}

// validateHealth checks the health settings.
func validateHealth(c serveConfig) error {
	var errs []error
	if c.Agent.LoadSmoothing < time.Second {
		errs = append(errs, fmt.Errorf("load smoothing %s must be at least 1 s", c.Agent.LoadSmoothing))
	}
	if c.Health.CheckEvery < time.Second || c.Health.CheckEvery > time.Hour {
		errs = append(errs, fmt.Errorf("health check every %s must be from 1 s to 1 h", c.Health.CheckEvery))
	}
	if c.Health.DurationWindow < time.Second {
		errs = append(errs, fmt.Errorf("duration window %s must be at least 1 s", c.Health.DurationWindow))
	}
	if math.IsNaN(c.Health.ErrorShare) || c.Health.ErrorShare < 0 || c.Health.ErrorShare > 1 {
		errs = append(errs, fmt.Errorf("quarantine error share %v must be between 0 (off) and 1", c.Health.ErrorShare))
	}
	if len(c.Health.ErrorCodes) > maxErrorCodes {
		errs = append(errs, fmt.Errorf("%d quarantine error codes: at most %d", len(c.Health.ErrorCodes), maxErrorCodes))
	}
	for _, code := range c.Health.ErrorCodes {
		if !queue.ValidErrorCode(code) {
			errs = append(errs, fmt.Errorf("quarantine error code %.70q is not an error code (1 to %d of a-z, 0-9, _ . -)",
				code, axtype.MaxErrorCodeLength))
		}
	}
	return errors.Join(errs...)
}

// splitCodes reads "a,b", dropping blanks.
func splitCodes(s string) []string {
	var out []string
	for code := range strings.SplitSeq(s, ",") {
		if code = strings.TrimSpace(code); code != "" {
			out = append(out, code)
		}
	}
	return out
}

// envFloat reads a number from the environment.
func envFloat(name string, fallback float64) (float64, error) {
	s := envOr(name, "")
	if s == "" {
		return fallback, nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return fallback, fmt.Errorf("%s=%q is not a number", name, s)
	}
	return f, nil
}
