package agent

import (
	"context"
	"fmt"
	"os/exec"
	"time"
)

// selfCheckRetry is how often a failed self-check is tried again.
const selfCheckRetry = 10 * time.Second

// ShellSelfCheck is the default Config.SelfCheck: the shell executor is
// usable when /bin/sh runs `true`.
func ShellSelfCheck(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "/bin/sh", "-c", "true").CombinedOutput(); err != nil {
		return fmt.Errorf("/bin/sh -c true failed: %w %s", err, out)
	}
	return nil
}

// checkReadiness runs the self-check until it passes, then reports the agent
// ready: at once by heartbeat, so the server routes tasks to it without
// waiting for the next beat, and to the lease loop, which waits for it.
func (a *Agent) checkReadiness(ctx context.Context) {
	for {
		err := a.cfg.SelfCheck(ctx)
		if err == nil {
			a.ready.Store(true)
			a.log.InfoContext(ctx, "self-check passed: agent ready")
			signal(a.beatNow)
			signal(a.wake)
			return
		}
		if ctx.Err() != nil {
			return
		}
		a.log.WarnContext(ctx, "self-check failed: agent not ready", "error", err, "retry_in", selfCheckRetry.String())
		if sleep(ctx, selfCheckRetry) != nil {
			return
		}
	}
}
