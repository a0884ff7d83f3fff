package openapi

import (
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"time"
)

// LogRequests logs one line per request with its status and duration.
// Probes, metrics scrapes and the agent protocol's routine calls (lease
// long polls, heartbeats, logs, results: several a minute per idle
// agent) are logged at debug level unless they fail; runs are logged
// where they fire and end instead.
func LogRequests(logger *slog.Logger, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(rec, r)
		level := slog.LevelInfo
		switch {
		case r.URL.Path == "/healthz", r.URL.Path == "/readyz", r.URL.Path == "/metrics":
			level = slog.LevelDebug
		case rec.status < 400 && agentProtocolCall.MatchString(r.URL.Path):
			level = slog.LevelDebug
		}
		attrs := []any{"method", r.Method, "path", r.URL.Path,
			"status", rec.status, "duration_ms", float64(time.Since(start).Microseconds()) / 1000}
		if tp := r.Header.Get("traceparent"); ValidTraceParent(tp) {
			attrs = append(attrs, "trace_id", tp[3:35])
		}
		logger.Log(r.Context(), level, "http request", attrs...)
	})
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(code int) {
	s.status = code
	s.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController reach the real writer (flush,
// deadlines for long polls).
func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// agentProtocolCall matches the agent calls made over and over.
var agentProtocolCall = regexp.MustCompile(`^/v1/agents/[^/]+/(lease|heartbeat|logs|complete)$`)

var traceParentPattern = regexp.MustCompile(`^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$`)

// ValidTraceParent reports whether s is a W3C traceparent of version 00
// with non-zero trace and parent ids.
func ValidTraceParent(s string) bool {
	return traceParentPattern.MatchString(s) &&
		s[3:35] != strings.Repeat("0", 32) && s[36:52] != strings.Repeat("0", 16)
}
