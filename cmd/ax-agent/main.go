// Command ax-agent runs the tasks of an ax server on this machine: HTTP
// calls, the Go handlers compiled into it (see package agent to build an
// agent with handlers of your own) and, when --executors (AX_EXECUTORS)
// lists shell, shell commands. Without shell it neither leases nor runs
// them: a shell task runs whatever its job says on the machine. SIGTERM or SIGINT
// drains it: it leases nothing more and tells the server it is draining,
// running tasks get the drain grace, the rest are stopped and handed back
// to the server; a second signal ends the grace at
// once, a third exits without handing anything back.
//
// The agent reports itself ready, and gets work, only once its self-check
// passes: /bin/sh must run (when shell is enabled), and so must the operator's --ready-command
// (AX_READY_COMMAND) when one is given, tried again every --ready-retry
// until it exits 0. --weight (AX_AGENT_WEIGHT) is its share of work under
// the weighted routing strategy.
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/ax-scheduler/ax/agent"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

func main() {
	if len(os.Args) > 1 && os.Args[1] == "version" {
		fmt.Println(version)
		return
	}
	if err := run(os.Args[1:]); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "ax-agent:", err)
		}
		os.Exit(1)
	}
}

func run(args []string) error {
	cfg, err := parseConfig(args, os.Getenv, os.Stderr)
	if err != nil {
		return err
	}
	cfg.Logger = newLogger(os.Getenv("AX_LOG_LEVEL"))
	cfg.Version = version
	a, err := agent.New(cfg)
	if err != nil {
		return err
	}
	ctx, drain := context.WithCancel(context.Background())
	defer drain()
	sigs := make(chan os.Signal, 3)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	go onSignals(sigs, drain, a.EndGrace, cfg.Logger)
	return a.Run(ctx)
}

// onSignals drains the agent on the first SIGTERM or SIGINT, cuts the drain
// grace short on the second (running tasks are stopped and handed back at
// once), and exits on the third without handing anything back.
func onSignals(sigs <-chan os.Signal, drain, endGrace func(), logger *slog.Logger) {
	logger.Info("signal received: draining", "signal", (<-sigs).String())
	drain()
	logger.Warn("second signal: stopping running tasks and handing them back", "signal", (<-sigs).String())
	endGrace()
	logger.Error("third signal: exiting at once; running tasks are left to their lease expiry", "signal", (<-sigs).String())
	os.Exit(1)
}

// parseConfig maps flags, then AX_ environment variables, onto the agent's
// configuration.
func parseConfig(args []string, getenv func(string) string, usage io.Writer) (agent.Config, error) {
	env := envReader{getenv: getenv}
	fs := flag.NewFlagSet("ax-agent", flag.ContinueOnError)
	fs.SetOutput(usage)
	server := fs.String("server", cmp.Or(getenv("AX_SERVER"), "http://127.0.0.1:8080"), "ax server URL (AX_SERVER)")
	// No default shown for the key: -h must not print a secret.
	key := fs.String("key", "", "bootstrap API key with scope agent (AX_AGENT_KEY, else AX_API_KEY)")
	name := fs.String("name", getenv("AX_AGENT_NAME"), "agent name (AX_AGENT_NAME; default: the host name)")
	labels := fs.String("labels", getenv("AX_AGENT_LABELS"), "labels jobs target, k=v,k=v (AX_AGENT_LABELS)")
	capacity := fs.Int("capacity", env.int("AX_AGENT_CAPACITY", 4), "tasks run at once (AX_AGENT_CAPACITY)")
	weight := fs.Int("weight", env.int("AX_AGENT_WEIGHT", 0),
		"share of work under the weighted strategy, 1..1000 (AX_AGENT_WEIGHT; default: the server's, 1)")
	ready := fs.String("ready-command", getenv("AX_READY_COMMAND"),
		"shell command that must exit 0 before the agent takes work, e.g. 'test -x /usr/bin/ffmpeg' (AX_READY_COMMAND)")
	readyRetry := fs.Duration("ready-retry", env.duration("AX_READY_RETRY", 10*time.Second),
		"how often a failing ready command is run again (AX_READY_RETRY)")
	grace := fs.Duration("drain-grace", env.duration("AX_DRAIN_GRACE", 90*time.Second),
		"how long running tasks may finish after SIGTERM (AX_DRAIN_GRACE)")
	executors := fs.String("executors", cmp.Or(getenv("AX_EXECUTORS"), "handler,http"),
		"task kinds this agent runs: shell, http, handler; shell only when listed (AX_EXECUTORS)")
	heartbeat := fs.Duration("heartbeat", env.duration("AX_HEARTBEAT_INTERVAL", 0),
		"override the server's heartbeat interval (AX_HEARTBEAT_INTERVAL)")
	insecure := fs.Bool("insecure-http", env.bool("AX_AGENT_INSECURE_HTTP"),
		"allow a plain http:// server URL that is not loopback: key, token and tasks cross the network unencrypted (AX_AGENT_INSECURE_HTTP)")
	hostName := fs.String("host-name", getenv("AX_AGENT_HOST_NAME"),
		"host name recorded on task events (AX_AGENT_HOST_NAME; default: the machine's)")
	hostIP := fs.String("host-ip", getenv("AX_AGENT_HOST_IP"),
		"IP recorded on task events with the host name (AX_AGENT_HOST_IP; default: the local address of the route to the server)")
	diskPath := fs.String("disk-path", getenv("AX_DISK_PATH"),
		"directory whose free disk space heartbeats report (AX_DISK_PATH; default: the working directory)")
	if err := fs.Parse(args); err != nil {
		return agent.Config{}, err
	}
	if fs.NArg() > 0 {
		return agent.Config{}, fmt.Errorf("unexpected argument %q (the only command is `version`)", fs.Arg(0))
	}
	lbls, err := parseLabels(*labels)
	if err = errors.Join(env.err, err); err != nil {
		return agent.Config{}, err
	}
	cfg := agent.Config{
		URL: *server, InsecureHTTP: *insecure, Key: cmp.Or(*key, getenv("AX_AGENT_KEY"), getenv("AX_API_KEY")), Name: *name,
		Labels: lbls, Capacity: *capacity, Weight: *weight, DrainGrace: *grace, HeartbeatInterval: *heartbeat,
		SelfCheckRetry: *readyRetry, Executors: splitList(*executors), HostName: *hostName, HostIP: *hostIP,
		DiskPath: *diskPath,
	}
	if strings.TrimSpace(*ready) != "" {
		cfg.SelfCheck = agent.CommandSelfCheck(*ready)
	}
	return cfg, nil
}

// splitList reads "a,b,c", dropping blanks.
func splitList(s string) []string {
	var out []string
	for item := range strings.SplitSeq(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

// parseLabels reads "k=v,k=v".
func parseLabels(s string) (map[string]string, error) {
	labels := map[string]string{}
	for item := range strings.SplitSeq(s, ",") {
		if strings.TrimSpace(item) == "" {
			continue
		}
		k, v, ok := strings.Cut(item, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return nil, fmt.Errorf("label %q is not k=v", item)
		}
		labels[k] = strings.TrimSpace(v)
	}
	return labels, nil
}

// envReader reads typed environment variables and remembers the first
// malformed one.
type envReader struct {
	getenv func(string) string
	err    error
}

func (e *envReader) int(name string, fallback int) int {
	s := strings.TrimSpace(e.getenv(name))
	if s == "" {
		return fallback
	}
	v, err := strconv.Atoi(s)
	if err != nil {
		e.fail(fmt.Errorf("%s=%q is not a number", name, s))
		return fallback
	}
	return v
}

func (e *envReader) duration(name string, fallback time.Duration) time.Duration {
	s := strings.TrimSpace(e.getenv(name))
	if s == "" {
		return fallback
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		e.fail(fmt.Errorf("%s=%q is not a duration such as 90s", name, s))
		return fallback
	}
	return v
}

func (e *envReader) bool(name string) bool {
	s := strings.TrimSpace(e.getenv(name))
	if s == "" {
		return false
	}
	v, err := strconv.ParseBool(s)
	if err != nil {
		e.fail(fmt.Errorf("%s=%q is not a boolean such as true or false", name, s))
	}
	return v
}

func (e *envReader) fail(err error) {
	if e.err == nil {
		e.err = err
	}
}

// newLogger logs JSON to stderr at level (default info).
func newLogger(level string) *slog.Logger {
	var l slog.Level
	if err := l.UnmarshalText([]byte(cmp.Or(level, "info"))); err != nil {
		l = slog.LevelInfo
	}
	return slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: l}))
}
