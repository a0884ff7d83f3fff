// Command ax-receiver receives ax's callbacks on a developer's machine: it
// verifies each request's signature with the job's signing secret (package
// queue/webhook, as a real receiver must) and prints each verified
// callback as one line, then its body. It keeps nothing: for a receiver to
// copy into a service (deduplication in its own table, in the transaction
// of the business write) see queue/webhook/receiverdemo.
//
//	WEBHOOK_SECRETS=whsec_… ax-receiver -addr 127.0.0.1:9099 [-count 1]
//
// and give ax http://127.0.0.1:9099/callbacks as the job's callback URL
// (any path is served). With -count N it exits after N verified callbacks,
// so a script can wait for it.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/ax-scheduler/ax/queue/webhook"
)

func main() {
	addr := flag.String("addr", envOr("AX_RECEIVER_ADDR", "127.0.0.1:9099"), "address to listen on (port 0: any free port, printed at start)")
	count := flag.Int("count", 0, "exit after this many verified callbacks (0: run until interrupted)")
	flag.Parse()
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *addr, os.Getenv("WEBHOOK_SECRETS"), *count, os.Stdout, logger); err != nil {
		fmt.Fprintln(os.Stderr, "ax-receiver:", err)
		os.Exit(1)
	}
}

// run serves callbacks on addr until ctx ends or count callbacks were
// verified, writing each verified one to out.
func run(ctx context.Context, addr, secrets string, count int, out io.Writer, logger *slog.Logger) error {
	parsed, err := webhook.ParseSecrets(strings.Fields(secrets)...)
	if err != nil {
		return fmt.Errorf("WEBHOOK_SECRETS: %w", err)
	}
	if len(parsed) == 0 {
		return errors.New("WEBHOOK_SECRETS is not set: give the job's signing secret (whsec_…), two space-separated while it is rotated")
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	verifier := &webhook.Verifier{Secrets: parsed, Logger: logger}
	srv := &http.Server{Handler: verifier.Middleware(&printer{out: out, count: count, done: cancel}),
		ReadHeaderTimeout: 10 * time.Second}
	logger.InfoContext(ctx, "ax-receiver listening", "url", "http://"+ln.Addr().String()+"/callbacks")
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutdownCtx, cancelShutdown := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancelShutdown()
	return srv.Shutdown(shutdownCtx)
}

// printer answers every verified callback 204 and prints it.
type printer struct {
	mu    sync.Mutex // one callback's lines together
	out   io.Writer
	count int
	seen  atomic.Int64
	done  func()
}

func (p *printer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	msg, _ := webhook.MessageFromContext(r.Context())
	body, _ := io.ReadAll(r.Body) // already read and bounded by the verifier
	var summary struct {
		JobGroup   string `json:"job_group"`
		JobName    string `json:"job_name"`
		State      string `json:"state"`
		Sequence   int64  `json:"sequence"`
		ErrorField string `json:"error"`
	}
	_ = json.Unmarshal(body, &summary)
	var pretty bytes.Buffer
	if json.Indent(&pretty, body, "  ", "  ") != nil {
		pretty.Reset()
		pretty.Write(body)
	}
	line := fmt.Sprintf("verified callback %s (sent %s): job %s/%s %s, sequence %d",
		msg.ID, msg.Timestamp.UTC().Format(time.RFC3339), summary.JobGroup, summary.JobName, summary.State, summary.Sequence)
	if summary.ErrorField != "" {
		line += ": " + summary.ErrorField
	}
	p.mu.Lock()
	fmt.Fprintf(p.out, "%s\n  %s\n", line, pretty.String())
	p.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
	if n := p.seen.Add(1); p.count > 0 && n >= int64(p.count) {
		// After the answer is written: Shutdown lets this request finish.
		go p.done()
	}
}

func envOr(name, fallback string) string {
	if v := strings.TrimSpace(os.Getenv(name)); v != "" {
		return v
	}
	return fallback
}
