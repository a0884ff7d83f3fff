// Package agent is the ax agent runtime and its Go SDK. An Agent registers
// with an ax server, long-polls it for tasks, runs them (a shell command, an
// HTTP call, or a Go handler registered with Handle), renews their leases by
// heartbeat, reports results, and drains when its context ends.
//
//	agent.Handle("reports.nightly", func(ctx context.Context, t agent.Task) (agent.Result, error) {
//		return buildReport(ctx, t.IdempotencyKey())
//	})
//	a, err := agent.New(agent.Config{URL: "http://ax:8080", Key: key})
//	…
//	err = a.Run(ctx) // returns after draining once ctx ends
package agent

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Config configures an Agent. Zero fields take the documented defaults.
type Config struct {
	// URL is the ax server's base URL, e.g. http://127.0.0.1:8080. Required
	// unless Server is set.
	URL string
	// InsecureHTTP lets URL be plain http:// to a server that is not on
	// loopback. Off by default: the agent's key and token, and every
	// task's command and output, would cross the network in clear. Serve
	// ax over TLS (ax serve --tls-cert, or a TLS proxy) instead.
	InsecureHTTP bool
	// Key is the bootstrap API key (scope agent) the agent registers with;
	// the server then gives the agent a token of its own. Required.
	Key string
	// Name is how operators see the agent. Defaults to the host name.
	Name string
	// HostName is the machine's name, recorded on the task events of the
	// agent's leases and results. Defaults to the host name (letters,
	// digits, '.', '_' and '-' only).
	HostName string
	// HostIP is the machine's IP, recorded with HostName. Defaults to the
	// local address of the route to URL; without one, the server records
	// the address the registration came from.
	HostIP string
	// DiskPath is the directory whose file system's free space heartbeats
	// report. Defaults to the working directory, where shell tasks run.
	DiskPath string
	// Labels are matched against jobs' target labels.
	Labels map[string]string
	// Executors are the task kinds the agent runs: KindShell, KindHTTP,
	// KindHandler. The server hands it no other kind, and the agent refuses
	// any other kind it is handed. Defaults to handler and http: shell
	// commands run only on agents that list KindShell.
	Executors []string
	// Capacity is how many tasks run at once. Defaults to 4.
	Capacity int
	// Weight is the agent's share of work under the weighted routing
	// strategy, 1..1000. Zero leaves it to the server, which defaults to 1.
	Weight int
	// HeartbeatInterval overrides the interval the server asks for at
	// registration. It must stay well under the server's lease length.
	HeartbeatInterval time.Duration
	// DrainGrace is how long running tasks may go on once Run's context
	// ends; those still running then are stopped and handed back. Defaults
	// to 90 seconds.
	DrainGrace time.Duration
	// KillGrace is how long a shell task's process group has between SIGTERM
	// and SIGKILL. Defaults to 5 seconds.
	KillGrace time.Duration
	// LeaseWait is how long one lease request waits on the server for work.
	// Defaults to 25 seconds, the most the server allows.
	LeaseWait time.Duration
	// MaxOutputBytes caps the output one task ships to the server. Defaults
	// to 16 MiB.
	MaxOutputBytes int64
	// Version is reported at registration.
	Version string
	// Logger receives the agent's logs. Defaults to slog.Default().
	Logger *slog.Logger
	// HTTPClient makes the HTTP executor's calls. Defaults to a plain client;
	// the task's timeout bounds each call.
	HTTPClient *http.Client
	// Server is how the agent reaches ax. Defaults to a ClientServer on URL.
	Server Server
	// SelfCheck decides when the agent's executors are usable: the agent
	// reports itself not ready, and leases nothing, until it passes.
	// Defaults to ShellSelfCheck when Executors include shell, else to no
	// check; CommandSelfCheck makes one of an operator's command.
	SelfCheck func(context.Context) error
	// SelfCheckRetry is how long the agent waits before running a failed
	// self-check again. Defaults to 10 seconds.
	SelfCheckRetry time.Duration
	// Jobs are the jobs the program declares next to its handlers (see
	// JobSpec). Once registered, the agent declares them in one call as
	// set JobSet at Version: they are created or updated to match, and the
	// set's jobs left out are paused. A declaration older than the set's
	// version is refused by the server (logged here), so two builds of a
	// program running side by side do not undo each other in turn.
	Jobs []JobSpec
	// JobSet names the declaration set of Jobs. Defaults to
	// sdk:<executable name>, the same on every machine running the program.
	JobSet string
	// DeclareKey is the API key (scope submit) that declares Jobs. Defaults
	// to Key, which then needs scope submit as well as agent.
	DeclareKey string
}

func (c Config) withDefaults() Config {
	host, _ := os.Hostname()
	c.Name = cmp.Or(c.Name, host, "ax-agent")
	c.HostName = cmp.Or(sanitizeHostName(c.HostName), localHostName())
	c.DiskPath = cmp.Or(c.DiskPath, ".")
	c.Capacity = cmp.Or(c.Capacity, 4)
	if len(c.Executors) == 0 {
		c.Executors = DefaultExecutors()
	}
	c.DrainGrace = cmp.Or(c.DrainGrace, 90*time.Second)
	c.KillGrace = cmp.Or(c.KillGrace, 5*time.Second)
	c.LeaseWait = cmp.Or(c.LeaseWait, 25*time.Second)
	c.MaxOutputBytes = cmp.Or(c.MaxOutputBytes, 16<<20)
	c.SelfCheckRetry = cmp.Or(c.SelfCheckRetry, 10*time.Second)
	if len(c.Jobs) > 0 {
		c.JobSet = cmp.Or(c.JobSet, defaultJobSet())
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.HTTPClient == nil {
		c.HTTPClient = &http.Client{}
	}
	if c.SelfCheck == nil {
		c.SelfCheck = noSelfCheck
		if slices.Contains(c.Executors, KindShell) {
			c.SelfCheck = ShellSelfCheck
		}
	}
	return c
}

func (c Config) validate() error {
	var errs []error
	if c.Key == "" {
		errs = append(errs, errors.New("no bootstrap key: an API key with scope agent is needed to register"))
	}
	if c.Server == nil && c.URL == "" {
		errs = append(errs, errors.New("no server URL"))
	}
	if c.Server == nil && c.URL != "" {
		errs = append(errs, checkServerURL(c.URL, c.InsecureHTTP))
	}
	if c.Capacity < 1 || c.Capacity > 10000 {
		errs = append(errs, fmt.Errorf("capacity %d is outside 1..10000", c.Capacity))
	}
	if c.Weight < 0 || c.Weight > 1000 {
		errs = append(errs, fmt.Errorf("weight %d is outside 1..1000", c.Weight))
	}
	if c.LeaseWait > 25*time.Second {
		errs = append(errs, fmt.Errorf("lease wait %s is over the 25 s the server allows", c.LeaseWait))
	}
	for _, d := range []time.Duration{c.HeartbeatInterval, c.DrainGrace, c.KillGrace, c.LeaseWait, c.SelfCheckRetry} {
		if d < 0 {
			errs = append(errs, fmt.Errorf("negative duration %s", d))
		}
	}
	for i, kind := range c.Executors {
		if !slices.Contains([]string{KindShell, KindHTTP, KindHandler}, kind) || slices.Contains(c.Executors[:i], kind) {
			errs = append(errs, fmt.Errorf("executor %q is unknown or listed twice: use shell, http, handler", kind))
		}
	}
	for k := range c.Labels {
		if k == "" {
			errs = append(errs, errors.New("a label has an empty name"))
		}
	}
	if err := checkJobs(c.Jobs); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Agent runs tasks for an ax server. Create it with New, register handlers
// with Handle, then call Run once.
type Agent struct {
	cfg       Config
	server    Server
	log       *slog.Logger
	handlers  *handlerRegistry
	executors map[string]executor
	sessions  *sessions
	running   *runningSet
	logs      *logShipper
	load      loadSampler
	backoff   backoff

	ready       atomic.Bool // the self-check passed
	leasePaused atomic.Bool // the server says the agent is draining
	started     atomic.Bool
	wake        chan struct{} // the lease loop may have something to do
	beatNow     chan struct{} // send a heartbeat without waiting for the tick
	graceOver   chan struct{} // closed by EndGrace
	endGrace    sync.Once
	tasks       sync.WaitGroup
	work        context.Context // parent of task contexts: outlives Run's ctx so a drain lets tasks finish
}

// New checks cfg and returns an Agent.
func New(cfg Config) (*Agent, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("invalid agent config: %w", err)
	}
	a := &Agent{cfg: cfg, server: cfg.Server, log: cfg.Logger, handlers: &handlerRegistry{},
		backoff: defaultBackoff, wake: make(chan struct{}, 1), beatNow: make(chan struct{}, 1),
		graceOver: make(chan struct{})}
	if a.server == nil {
		s, err := NewClientServer(cfg.URL, nil)
		if err != nil {
			return nil, fmt.Errorf("invalid agent config: %w", err)
		}
		a.server = s
	}
	if _, ok := a.server.(Declarer); len(cfg.Jobs) > 0 && !ok {
		return nil, errors.New("invalid agent config: Jobs are declared, but the Server cannot declare jobs (it is no Declarer)")
	}
	all := map[string]executor{
		KindShell:   &shellExecutor{shell: "/bin/sh", killGrace: cfg.KillGrace},
		KindHTTP:    newHTTPExecutor(cfg.HTTPClient, cfg.Version),
		KindHandler: &handlerExecutor{handlers: handlerLookup{a.handlers, defaultHandlers}},
	}
	a.executors = map[string]executor{}
	for _, kind := range cfg.Executors {
		a.executors[kind] = all[kind]
	}
	a.sessions = newSessions(a.register)
	a.running = newRunningSet(time.Now, a.wake)
	a.logs = newLogShipper(a.sendLogs, a.running.holds, a.log)
	return a, nil
}

// Handle registers fn for tasks whose executor names handler name, on this
// agent only; it takes precedence over the package-level Handle. It panics
// on an empty name, a nil fn or a name registered twice.
func (a *Agent) Handle(name string, fn HandlerFunc) { a.handlers.add(name, fn) }

// Run registers the agent and runs tasks until ctx ends, then drains:
// it stops leasing at once, tells the server it drains (so that no new task
// is routed to it), lets running tasks finish for DrainGrace,
// stops and hands back the rest, reports what finished, deregisters and
// returns. It returns an error only when the agent could not register at
// all (wrong key, wrong URL); once registered, it rides out server outages.
// Run may be called once.
func (a *Agent) Run(ctx context.Context) error {
	if !a.started.CompareAndSwap(false, true) {
		return errors.New("agent: Run called twice")
	}
	bg, stopBg := context.WithCancel(context.WithoutCancel(ctx))
	a.work = bg
	readiness := goDone(func() { a.checkReadiness(bg) })
	defer func() { stopBg(); <-readiness }()
	if _, err := a.sessions.current(ctx); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("error registering with the ax server: %w", err)
	}
	declared := goDone(func() {
		if len(a.cfg.Jobs) > 0 {
			a.declareJobs(bg)
		}
	})
	defer func() { <-declared }() // after stopBg, which ends its retries
	beats, stopBeats := context.WithCancel(bg)
	heartbeats := goDone(func() { a.heartbeatLoop(beats) })
	stopping := make(chan struct{})
	reporter := goDone(func() { a.reportResults(bg, stopping) })
	shipper := goDone(func() { a.logs.run(bg, stopping) })

	a.leaseLoop(ctx)
	announced := goDone(func() { a.announceDrain(bg) })
	a.drain(bg, stopping, reporter, shipper)
	<-announced // a late drain call must not follow the goodbye
	stopBeats() // no heartbeat may bring the agent back after its goodbye
	<-heartbeats
	a.deregister(bg)
	stopBg()
	<-reporter
	<-shipper
	return nil
}

// EndGrace cuts the drain grace short: once Run's context has ended, tasks
// still running are stopped and handed back at once. The ax-agent command
// calls it on a second SIGTERM. It may be called any time, and more than
// once.
func (a *Agent) EndGrace() {
	a.endGrace.Do(func() { close(a.graceOver) })
}

// drain finishes the agent's work once leasing stopped.
func (a *Agent) drain(ctx context.Context, stopping chan struct{}, reporter, shipper <-chan struct{}) {
	a.log.InfoContext(ctx, "draining", "running", a.running.executingCount(), "grace", a.cfg.DrainGrace.String())
	if !a.waitForTasks(a.cfg.DrainGrace) {
		a.releaseUnfinished(ctx)
	}
	close(stopping)
	// Results are retried until their leases would have expired; after that
	// the server will not take them anyway.
	if !waitFor(reporter, a.leaseDuration()+time.Second) {
		a.log.WarnContext(ctx, "results not reported before their leases expired", "results", a.running.pendingResults())
	}
	waitFor(shipper, logSendBudget)
}

// drainAnnounceBudget bounds how long the agent tries to tell the server
// it drains. Leasing has stopped already, so a server that does not hear it
// only goes on preferring the agent for new tasks until the deregistration
// (other agents steal them after a while).
const drainAnnounceBudget = 5 * time.Second

// announceDrain tells the server the agent is draining, so that it routes
// no new task to it while the running ones finish or are handed back.
func (a *Agent) announceDrain(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, drainAnnounceBudget)
	defer cancel()
	if err := a.callHeld(ctx, "drain", a.server.Drain); err != nil {
		a.log.WarnContext(ctx, "error telling the server the agent drains", "error", err)
		return
	}
	a.log.InfoContext(ctx, "told the server the agent drains")
}

// waitForTasks waits up to grace for the running tasks to finish, or until
// EndGrace; it reports whether they all did.
func (a *Agent) waitForTasks(grace time.Duration) bool {
	done := goDone(a.tasks.Wait)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
	case <-a.graceOver:
	}
	select { // a task may have ended at the same moment
	case <-done:
		return true
	default:
		return false
	}
}

// releaseUnfinished stops the tasks still running after the grace and
// hands their leases back, so another agent takes them at once instead of
// after the lease expires.
func (a *Agent) releaseUnfinished(ctx context.Context) {
	refs := a.running.stopForDrain()
	a.log.WarnContext(ctx, "drain grace over: stopping and handing back the tasks still running", "tasks", len(refs))
	// Give them time to stop before another agent may start them.
	if !waitGroupFor(&a.tasks, a.cfg.KillGrace+outputDrainWait+time.Second) {
		a.log.WarnContext(ctx, "some tasks ignored cancellation; handing them back anyway")
	}
	// Those that ended with success as they were stopped are reported
	// instead: their work is done.
	a.release(ctx, a.running.handBackStopped(refs), "agent drained")
}

// release hands leases back, retrying for a while.
func (a *Agent) release(ctx context.Context, refs []TaskRef, why string) {
	if len(refs) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	err := a.callHeld(ctx, "release", func(ctx context.Context, s Session) error {
		return a.server.Release(ctx, s, refs)
	})
	if err != nil {
		a.log.ErrorContext(ctx, "error handing leases back; they will expire instead", "tasks", len(refs), "error", err)
		return
	}
	a.log.InfoContext(ctx, "leases handed back", "tasks", len(refs), "why", why)
}

func (a *Agent) deregister(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	err := a.callHeld(ctx, "deregister", a.server.Deregister)
	if err != nil {
		a.log.ErrorContext(ctx, "error deregistering; the server will find the agent offline", "error", err)
		return
	}
	a.log.InfoContext(ctx, "agent deregistered")
}

// register introduces the agent with the bootstrap key, retrying while the
// server is away.
func (a *Agent) register(ctx context.Context) (Credentials, error) {
	reg := Registration{Name: a.cfg.Name, Labels: a.cfg.Labels, Capacity: a.cfg.Capacity, Weight: a.cfg.Weight,
		Version: a.cfg.Version, Executors: a.cfg.Executors, HostName: a.cfg.HostName,
		HostIP: cmp.Or(a.cfg.HostIP, localIP(ctx, a.cfg.URL))}
	var creds Credentials
	err := a.retry(ctx, "register", func(ctx context.Context) error {
		var err error
		creds, err = a.server.Register(ctx, a.cfg.Key, reg)
		return err
	})
	if err != nil {
		return creds, err
	}
	a.log.InfoContext(ctx, "agent registered", "agent_id", creds.AgentID, "name", reg.Name, "host", reg.HostName,
		"ip", reg.HostIP, "executors", reg.Executors,
		"capacity", reg.Capacity, "weight", reg.Weight, "lease_seconds", creds.LeaseSeconds)
	return creds, nil
}

// leaseDuration is how long a lease lasts without renewal, as the server
// said at registration. Defaults to 30 seconds, the server's default.
func (a *Agent) leaseDuration() time.Duration {
	return time.Duration(cmp.Or(a.sessions.settings().LeaseSeconds, 30)) * time.Second
}

// heartbeatInterval is the configured override, else the server's, else 5 s.
func (a *Agent) heartbeatInterval() time.Duration {
	server := time.Duration(a.sessions.settings().HeartbeatIntervalSeconds) * time.Second
	return cmp.Or(a.cfg.HeartbeatInterval, server, 5*time.Second)
}

// heartbeatTimeout is how long one heartbeat may take. The server marks
// an agent offline after three intervals without a heartbeat, and a slow
// answer (a server busy committing) still counts if it lands inside that
// window: giving up after one interval would let a server that answers in
// 1.2 intervals take every agent offline at once. Past the lease, the
// leases it renews have run out on the agent's side anyway.
func (a *Agent) heartbeatTimeout() time.Duration {
	return min(3*a.heartbeatInterval(), a.leaseDuration())
}

// goDone runs fn and returns a channel closed when it returns.
func goDone(fn func()) <-chan struct{} {
	done := make(chan struct{})
	go func() { defer close(done); fn() }()
	return done
}

// waitFor waits for done up to d and reports whether it came.
func waitFor(done <-chan struct{}, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		return false
	}
}

// waitGroupFor waits for wg up to d and reports whether it was done. On
// timeout a goroutine stays behind until wg is done: the price of waiting
// on a WaitGroup with a deadline.
func waitGroupFor(wg *sync.WaitGroup, d time.Duration) bool {
	return waitFor(goDone(wg.Wait), d)
}

// checkServerURL accepts https:// anywhere, and http:// to loopback or
// when insecure is set.
func checkServerURL(raw string, insecure bool) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return fmt.Errorf("server URL %q is not an absolute http:// or https:// URL", raw)
	}
	switch u.Scheme {
	case "https":
		return nil
	case "http":
	default:
		return fmt.Errorf("server URL %q: the scheme must be https (or http to loopback)", raw)
	}
	if insecure || loopbackHost(u.Hostname()) {
		return nil
	}
	return fmt.Errorf("refusing plain http:// to %s, which is not loopback: the agent's key, its token and every task "+
		"would cross the network unencrypted; use https:// (ax serve --tls-cert/--tls-key, or a TLS proxy), "+
		"or allow it with --insecure-http (AX_AGENT_INSECURE_HTTP=true)", u.Host)
}

// loopbackHost reports whether host is localhost or a loopback address.
func loopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}
