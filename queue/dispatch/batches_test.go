package dispatch

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

// Asks made while both batches are out are served together by the next
// batch, each with its own answer; an ask whose call ends while it waits
// is withdrawn (no batch sees it), and one whose call ends while its
// batch runs gets its answer with the call's error (a lease's tasks, for
// the caller to hand back).
func TestBatchesServeTheWaitingAsksTogether(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	started := make(chan struct{}, 10)
	var mu sync.Mutex
	var seen [][]uuid.UUID
	b := &batches[uuid.UUID, uuid.UUID]{run: func(_ context.Context, asks []*batchAsk[uuid.UUID, uuid.UUID]) {
		mu.Lock()
		var ids []uuid.UUID
		for _, a := range asks {
			ids = append(ids, a.q)
		}
		seen = append(seen, ids)
		n := len(seen)
		mu.Unlock()
		started <- struct{}{}
		if n <= batchesAtOnce {
			<-release // the later asks queue up meanwhile
		}
		for _, a := range asks {
			a.answer(a.q, nil)
		}
	}}
	ctx := context.Background()
	var wg sync.WaitGroup
	ask := func(ctx context.Context, id uuid.UUID, wantErr error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, err := b.do(ctx, id)
			require.ErrorIs(t, err, wantErr)
			if wantErr == context.Canceled && got == uuid.Nil {
				return // withdrawn
			}
			require.Equal(t, id, got, "each ask gets its own answer")
		}()
	}
	// The first asks start both batches; the one whose poll ends while
	// its batch runs still gets its tasks, with the error.
	firstCtx, cancelFirst := context.WithCancel(ctx)
	first := uuid.New()
	ask(firstCtx, first, context.Canceled)
	<-started
	ask(ctx, uuid.New(), nil)
	<-started
	cancelFirst()

	agents := make([]uuid.UUID, 30)
	for i := range agents {
		agents[i] = uuid.New()
		ask(ctx, agents[i], nil)
	}
	withdrawnCtx, withdraw := context.WithCancel(ctx)
	withdrawn := uuid.New()
	ask(withdrawnCtx, withdrawn, context.Canceled)
	require.Eventually(t, func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return len(b.waiting) == len(agents)+1
	}, 5*time.Second, time.Millisecond, "the asks wait for the batches out")
	withdraw()
	require.Eventually(t, func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return len(b.waiting) == len(agents)
	}, 5*time.Second, time.Millisecond, "the ended poll's ask is withdrawn")
	close(release)
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, seen, 3, "two batches for the first asks, one for the 30 that came while they were out")
	require.ElementsMatch(t, agents, seen[2])
	// A batch's goroutine answers its asks before it finds none waiting
	// and ends: the last may still be on its way out.
	require.Eventually(t, func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return b.running == 0
	}, 5*time.Second, time.Millisecond, "no batch is left running")
}
