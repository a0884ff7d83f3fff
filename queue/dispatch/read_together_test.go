package dispatch

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/queue/axtype"
)

// Calls made while a read is out are answered together by the next read,
// each with its own row; an id the read does not find gets
// axtype.ErrNotFound.
func TestReadTogetherAnswersWaitingCallsWithOneRead(t *testing.T) {
	t.Parallel()
	first := make(chan struct{})
	release := make(chan struct{})
	var mu sync.Mutex
	var reads [][]uuid.UUID
	o := &readTogether[*axtype.LeaseOutlook]{read: func(_ context.Context, ids []uuid.UUID) (map[uuid.UUID]*axtype.LeaseOutlook, error) {
		mu.Lock()
		reads = append(reads, ids)
		n := len(reads)
		mu.Unlock()
		if n == 1 {
			close(first)
			<-release // the later checks queue up meanwhile
		}
		out := map[uuid.UUID]*axtype.LeaseOutlook{}
		for _, id := range ids {
			if id != gone {
				out[id] = &axtype.LeaseOutlook{State: axtype.AgentActive}
			}
		}
		return out, nil
	}}
	ctx := context.Background()
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, err := o.get(ctx, uuid.New())
		require.NoError(t, err)
	}()
	<-first
	agents := make([]uuid.UUID, 50)
	var wg sync.WaitGroup
	for i := range agents {
		agents[i] = uuid.New()
		if i == 7 {
			agents[i] = gone
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, err := o.get(ctx, agents[i])
			if agents[i] == gone {
				require.ErrorIs(t, err, axtype.ErrNotFound)
				return
			}
			require.NoError(t, err)
			require.Equal(t, axtype.AgentActive, got.State)
		}()
	}
	require.Eventually(t, func() bool {
		o.mu.Lock()
		defer o.mu.Unlock()
		return len(o.waiting) == len(agents)
	}, 5*time.Second, time.Millisecond, "the checks wait for the read out")
	close(release)
	wg.Wait()
	<-done
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, reads, 2, "one read for the first check, one for the 50 that came while it was out")
	require.ElementsMatch(t, agents, reads[1])
}

// gone is an agent no read finds.
var gone = uuid.MustParse("0190a0a0-0000-7000-8000-00000000dead")

// Two calls of one agent answered by one read get agents of their own: a
// lease poll updates its agent's state as it checks (waitLeasable), and
// another call of the same agent must not see it, nor race with it.
func TestLeaseBrokerGetGivesEachCallItsOwnAgent(t *testing.T) {
	t.Parallel()
	id, other := uuid.New(), uuid.New()
	first := make(chan struct{})
	release := make(chan struct{})
	s := &LeaseBroker{agents: &readTogether[*axtype.Agent]{read: func(_ context.Context, ids []uuid.UUID) (map[uuid.UUID]*axtype.Agent, error) {
		if ids[0] == other {
			close(first)
			<-release // the two calls of id queue up meanwhile, for one read
		}
		out := map[uuid.UUID]*axtype.Agent{}
		for _, x := range ids {
			out[x] = &axtype.Agent{ID: x, State: axtype.AgentActive, Ready: true}
		}
		return out, nil
	}}}
	ctx := context.Background()
	var wg sync.WaitGroup
	wg.Go(func() {
		_, err := s.Get(ctx, other)
		require.NoError(t, err)
	})
	<-first
	got := make([]*axtype.Agent, 2)
	for i := range got {
		wg.Go(func() {
			a, err := s.Get(ctx, id)
			require.NoError(t, err)
			got[i] = a
		})
	}
	require.Eventually(t, func() bool {
		s.agents.mu.Lock()
		defer s.agents.mu.Unlock()
		return len(s.agents.waiting[id]) == 2
	}, 5*time.Second, time.Millisecond, "both calls wait for the next read")
	close(release)
	wg.Wait()
	require.NotSame(t, got[0], got[1])
	got[0].State, got[0].Ready = axtype.AgentDraining, false
	require.Equal(t, axtype.AgentActive, got[1].State)
	require.True(t, got[1].Ready)
}
