// Package pglocal finds or starts a PostgreSQL server for development and
// tests, so that `ax dev` and the test suites work on a machine where nobody
// set up a database by hand.
package pglocal

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Sources of a Server, in the order Find tries them.
const (
	SourceEnv     = "env"     // DATABASE_URL
	SourceLocal   = "local"   // a server already answering on 127.0.0.1:5432
	SourceStarted = "started" // a throwaway cluster started by Find
)

// Server is a Postgres server that ax can use.
type Server struct {
	// URL is the connection URL for the admin database, e.g.
	// postgres://postgres@127.0.0.1:PORT/postgres?sslmode=disable.
	URL string

	// Source says where the server came from: SourceEnv, SourceLocal or
	// SourceStarted.
	Source string

	// Dir is the folder of a started cluster (its log is Dir/postgres.log).
	// Empty unless Source is SourceStarted.
	Dir string

	cluster *cluster // nil unless this package started the server
	keep    bool
	temp    bool

	mu      sync.Mutex
	stopped bool
}

// Env returns the environment a child process needs to reach the server, to
// append to exec.Cmd.Env.
func (s *Server) Env() []string {
	return []string{"DATABASE_URL=" + s.URL}
}

// ErrNotStarted means the server was not started by this package (or is
// stopped for good), so it cannot be halted or started.
var ErrNotStarted = errors.New("pglocal: not a cluster this package started and still owns")

// Halt shuts the server of a started cluster down (pg_ctl stop -m fast:
// sessions are ended, commits are kept) and keeps its data and port, so
// that a test can take the database away from running processes and bring
// it back with Start, as a crash-restart or a failover would. Halting a
// halted server does nothing. Stop still cleans up after a Halt.
func (s *Server) Halt() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped || s.cluster == nil {
		return ErrNotStarted
	}
	return s.cluster.stop(stopFast)
}

// Start starts a halted cluster again on the same port, so URL stays
// valid, and waits until it accepts connections. Starting a running server
// does nothing. It fails if another process took the port meanwhile.
func (s *Server) Start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped || s.cluster == nil {
		return ErrNotStarted
	}
	if s.cluster.running() {
		return nil
	}
	if err := s.cluster.startOn(ctx, s.cluster.port); err != nil {
		return fmt.Errorf("error starting PostgreSQL again on port %d: %w", s.cluster.port, err)
	}
	return ping(ctx, s.URL, 10*time.Second)
}

// Stop stops the cluster if this package started it and removes its folder
// unless Options.Keep is set. It is a no-op for servers it did not start, and
// safe to call twice.
func (s *Server) Stop() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped || s.cluster == nil {
		return nil
	}
	s.stopped = true

	err := s.cluster.stop(stopFast)
	if s.keep {
		// Without an owner the sweep of crashed runs leaves the folder alone.
		return errors.Join(err, s.cluster.disown())
	}
	return errors.Join(err, s.cluster.remove(s.temp))
}
