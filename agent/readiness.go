package agent

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// selfCheckTimeout bounds one run of a self-check command.
const selfCheckTimeout = 10 * time.Second

// ShellSelfCheck is the default Config.SelfCheck of agents with the shell
// executor: it is usable when /bin/sh runs `true`.
func ShellSelfCheck(ctx context.Context) error {
	return runCheck(ctx, "true")
}

// noSelfCheck is the default Config.SelfCheck of an agent without the
// shell executor: nothing to check.
func noSelfCheck(context.Context) error { return nil }

// CommandSelfCheck returns a Config.SelfCheck that runs command with
// /bin/sh -c (so it checks the shell executor too): the agent is ready once
// the command exits 0. Operators use it to keep an agent that is alive but
// useless, such as one whose tools or mounts are missing, from getting work:
// `test -x /usr/bin/ffmpeg`, `pg_isready -h db`. The command sees the
// agent's environment less its AX_ variables (the agent's key stays
// private), as shell tasks do; a run that takes longer than 10 seconds
// fails.
func CommandSelfCheck(command string) func(context.Context) error {
	return func(ctx context.Context) error { return runCheck(ctx, command) }
}

// runCheck runs command in a process group of its own, killed whole when
// the check times out, and returns the end of its output when it fails.
func runCheck(ctx context.Context, command string) error {
	ctx, cancel := context.WithTimeout(ctx, selfCheckTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", command)
	cmd.Env = inheritedEnv()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = time.Second // a child that left the group must not hold the output open
	out, err := cmd.CombinedOutput()
	if err != nil {
		tail := strings.TrimSpace(string(out))
		if len(tail) > 500 {
			tail = "…" + tail[len(tail)-500:]
		}
		return fmt.Errorf("/bin/sh -c %q failed: %w: %s", command, err, tail)
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
		a.log.WarnContext(ctx, "self-check failed: agent not ready", "error", err,
			"retry_in", a.cfg.SelfCheckRetry.String())
		if sleep(ctx, a.cfg.SelfCheckRetry) != nil {
			return
		}
	}
}
