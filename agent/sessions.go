package agent

import (
	"context"
	"sync"
)

// sessions holds the agent's registration and replaces it when the server
// stops accepting it. Every loop of the agent asks it for the current
// session, so a refused token is replaced once, by whichever loop notices
// first, and the others wait for that registration instead of racing it.
type sessions struct {
	// register registers the agent, retrying while the server is away.
	register func(context.Context) (Credentials, error)

	turn chan struct{} // one registration at a time; a mutex callers can give up on
	mu   sync.Mutex
	cur  *Credentials
	last Credentials // kept when cur is dropped: its settings still apply
}

func newSessions(register func(context.Context) (Credentials, error)) *sessions {
	return &sessions{register: register, turn: make(chan struct{}, 1)}
}

// current returns the session, registering when there is none.
func (s *sessions) current(ctx context.Context) (Session, error) {
	if c, ok := s.credentials(); ok {
		return sessionOf(c), nil
	}
	select {
	case s.turn <- struct{}{}:
	case <-ctx.Done():
		return Session{}, ctx.Err()
	}
	defer func() { <-s.turn }()
	if c, ok := s.credentials(); ok { // registered while this caller waited
		return sessionOf(c), nil
	}
	c, err := s.register(ctx)
	if err != nil {
		return Session{}, err
	}
	s.mu.Lock()
	s.cur, s.last = &c, c
	s.mu.Unlock()
	return sessionOf(c), nil
}

// drop forgets old if it is still the current session; a session that was
// already replaced stays replaced.
func (s *sessions) drop(old Session) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur != nil && sessionOf(*s.cur) == old {
		s.cur = nil
	}
}

// held returns the current session without registering.
func (s *sessions) held() (Session, bool) {
	c, ok := s.credentials()
	return sessionOf(c), ok
}

// settings returns what the server said at the last registration: lease
// length and heartbeat interval.
func (s *sessions) settings() Credentials {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last
}

func (s *sessions) credentials() (Credentials, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur == nil {
		return Credentials{}, false
	}
	return *s.cur, true
}

func sessionOf(c Credentials) Session {
	return Session{AgentID: c.AgentID, Token: c.Token}
}
