package bench

import (
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// requestLog records when agents' lease and complete calls to a replica
// started and how long the server took, while recording is on (off, it
// costs one atomic load per request).
type requestLog struct {
	on    atomic.Bool
	mu    sync.Mutex
	calls []call
}

// call is one recorded request.
type call struct {
	lease bool // a lease; else a complete
	start time.Time
	took  time.Duration
}

func (l *requestLog) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !l.on.Load() || r.Method != http.MethodPost {
			next.ServeHTTP(w, r)
			return
		}
		lease := strings.HasSuffix(r.URL.Path, "/lease")
		if !lease && !strings.HasSuffix(r.URL.Path, "/complete") {
			next.ServeHTTP(w, r)
			return
		}
		start := time.Now()
		next.ServeHTTP(w, r)
		took := time.Since(start)
		l.mu.Lock()
		l.calls = append(l.calls, call{lease: lease, start: start, took: took})
		l.mu.Unlock()
	})
}

// record starts recording afresh.
func (l *requestLog) record() {
	l.mu.Lock()
	l.calls = nil
	l.mu.Unlock()
	l.on.Store(true)
}

// stop stops recording and returns what was recorded.
func (l *requestLog) stop() []call {
	l.on.Store(false)
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.calls
}
