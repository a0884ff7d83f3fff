package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ax-scheduler/ax/queue/delivery"
	"github.com/ax-scheduler/ax/queue/metrics"
	"github.com/ax-scheduler/ax/queue/outbound"
)

// outboundConfig is what callbacks and agentless HTTP jobs may reach and
// where their targets find the API.
type outboundConfig struct {
	// AllowPrivate (AX_OUTBOUND_ALLOW_PRIVATE) lets callbacks and HTTP jobs
	// reach private networks (10/8, 172.16/12, 192.168/16, fc00::/7…): for
	// receivers on the operator's own network. Off by default.
	AllowPrivate bool
	// AllowLoopback (AX_OUTBOUND_ALLOW_LOOPBACK) lets them reach this
	// machine: for tests and single-machine setups. Off by default. Cloud
	// metadata and link-local addresses are refused whatever the flags.
	AllowLoopback bool
	// PublicURL (AX_PUBLIC_URL) is the API's address as targets of HTTP
	// jobs reach it, to post results after answering 202. Defaults to
	// http://<addr>.
	PublicURL string
	// HTTPMaxPerJob (AX_HTTP_MAX_PER_JOB) and HTTPMaxPerHost
	// (AX_HTTP_MAX_PER_HOST) cap the agentless HTTP requests of one job and
	// to one host in flight at once: 0 means a quarter and a half of the
	// replica's 100 HTTP workers.
	HTTPMaxPerJob  int
	HTTPMaxPerHost int
	// CallbackRetries (--callback-retry-schedule,
	// AX_CALLBACK_RETRY_SCHEDULE: durations separated by commas) is the
	// wait before each retry of a failed callback; after the last the
	// callback is callback_failed. Empty: 1s,5s,30s,2m,10m. Tests shorten
	// it to see a callback fail for good in seconds.
	CallbackRetries durationList
}

func addOutboundFlags(fs *flag.FlagSet, c *outboundConfig) error {
	private, errPrivate := envBool("AX_OUTBOUND_ALLOW_PRIVATE")
	loopback, errLoopback := envBool("AX_OUTBOUND_ALLOW_LOOPBACK")
	fs.BoolVar(&c.AllowPrivate, "outbound-allow-private", private,
		"let callbacks and HTTP jobs reach private networks (AX_OUTBOUND_ALLOW_PRIVATE)")
	fs.BoolVar(&c.AllowLoopback, "outbound-allow-loopback", loopback,
		"let callbacks and HTTP jobs reach this machine, for tests (AX_OUTBOUND_ALLOW_LOOPBACK)")
	fs.StringVar(&c.PublicURL, "public-url", envOr("AX_PUBLIC_URL", ""),
		"the API's URL as HTTP-job targets reach it, for results posted after a 202; default http(s)://<addr> (AX_PUBLIC_URL)")
	perJob, errPerJob := envInt("AX_HTTP_MAX_PER_JOB")
	perHost, errPerHost := envInt("AX_HTTP_MAX_PER_HOST")
	fs.IntVar(&c.HTTPMaxPerJob, "http-max-per-job", perJob,
		"most agentless HTTP requests of one job in flight at once; 0: 25 (AX_HTTP_MAX_PER_JOB)")
	fs.IntVar(&c.HTTPMaxPerHost, "http-max-per-host", perHost,
		"most agentless HTTP requests to one host in flight at once; 0: 50 (AX_HTTP_MAX_PER_HOST)")
	var errRetries error
	if s := envOr("AX_CALLBACK_RETRY_SCHEDULE", ""); s != "" {
		if errRetries = c.CallbackRetries.Set(s); errRetries != nil {
			errRetries = fmt.Errorf("AX_CALLBACK_RETRY_SCHEDULE: %w", errRetries)
		}
	}
	fs.Var(&c.CallbackRetries, "callback-retry-schedule",
		"waits before each retry of a failed callback, separated by commas; default 1s,5s,30s,2m,10m (AX_CALLBACK_RETRY_SCHEDULE)")
	return errors.Join(errPrivate, errLoopback, errPerJob, errPerHost, errRetries)
}

// durationList is a flag of up to 20 positive durations separated by
// commas.
type durationList []time.Duration

func (l *durationList) String() string {
	parts := make([]string, len(*l))
	for i, d := range *l {
		parts[i] = d.String()
	}
	return strings.Join(parts, ",")
}

func (l *durationList) Set(s string) error {
	parts := strings.Split(s, ",")
	if len(parts) > 20 {
		return fmt.Errorf("%d durations; at most 20", len(parts))
	}
	out := make(durationList, len(parts))
	for i, p := range parts {
		d, err := time.ParseDuration(strings.TrimSpace(p))
		if err != nil || d <= 0 {
			return fmt.Errorf("%q is not a positive duration such as 30s", p)
		}
		out[i] = d
	}
	*l = out
	return nil
}

func envInt(name string) (int, error) {
	s := strings.TrimSpace(envOr(name, ""))
	if s == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%s=%q is not a whole number of 0 or more", name, s)
	}
	return n, nil
}

func envBool(name string) (bool, error) {
	s := strings.TrimSpace(envOr(name, ""))
	if s == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(s)
	if err != nil {
		return false, fmt.Errorf("%s=%q is not a boolean such as true or false", name, s)
	}
	return b, nil
}

func (c outboundConfig) policy() outbound.Policy {
	return outbound.Policy{AllowPrivate: c.AllowPrivate, AllowLoopback: c.AllowLoopback}
}

// publicURL is where targets of HTTP jobs reach the API (their completion
// URL), whoever sends their requests: --public-url, else this replica's
// own address.
func (cfg serveConfig) publicURL() string {
	if cfg.Outbound.PublicURL != "" {
		return cfg.Outbound.PublicURL
	}
	if cfg.TLSCert != "" {
		return "https://" + cfg.Addr
	}
	return "http://" + cfg.Addr
}

// startRiver starts the replica's River workers: callback delivery and
// agentless HTTP tasks.
func startRiver(ctx context.Context, pool *pgxpool.Pool, logger *slog.Logger, m *metrics.Metrics, cfg serveConfig,
	behindPooler bool) (*delivery.RiverService, error) {
	publicURL := cfg.publicURL()
	rs, err := delivery.NewRiverService(pool, delivery.RiverConfig{
		Policy: cfg.Outbound.policy(), Version: version,
		HTTP: delivery.HTTPTaskConfig{PublicURL: publicURL, MaxPerJob: cfg.Outbound.HTTPMaxPerJob,
			MaxPerHost: cfg.Outbound.HTTPMaxPerHost},
		Logger: logger, Metrics: m, OutboundMetrics: metrics.NewOutboundMetrics(prometheus.DefaultRegisterer),
		History: cfg.History, Callback: delivery.CallbackConfig{RetrySchedule: cfg.Outbound.CallbackRetries},
		PollOnly: behindPooler,
	})
	if err != nil {
		return nil, err
	}
	return rs, rs.Start(ctx)
}
