// Package pglocal finds or starts a PostgreSQL server for development and
// tests, so that `ax dev` and the test suites work on a machine where nobody
// set up a database by hand.
package pglocal

import (
	"errors"
	"sync"
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
