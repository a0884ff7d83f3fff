package dbtest

import (
	"context"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"
)

// Statements counts the sqlc statements (those whose text begins
// "-- name: X ") that connections with it as their tracer run, by name:
// tests that show how many round trips some work takes.
type Statements struct {
	mu sync.Mutex
	n  map[string]int
}

// TraceQueryStart implements pgx.QueryTracer.
func (s *Statements) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	if rest, ok := strings.CutPrefix(data.SQL, "-- name: "); ok {
		name, _, _ := strings.Cut(rest, " ")
		s.mu.Lock()
		if s.n == nil {
			s.n = map[string]int{}
		}
		s.n[name]++
		s.mu.Unlock()
	}
	return ctx
}

// TraceQueryEnd implements pgx.QueryTracer.
func (s *Statements) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// Count returns how many statements named name ran so far.
func (s *Statements) Count(name string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n[name]
}
