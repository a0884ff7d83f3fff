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
	b := &batches[uuid.UUID, uuid.UUID]{run: func(_ context.Context, asks []*batchAsk[uuid.UUID, uuid.UUID]) bool {
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
		return false
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

// After a small batch, the next waits until pace has passed since the
// small one started and serves together the asks that came meanwhile;
// after a batch that was not small (a backlog's, or one that served
// nothing), the next starts at once.
func TestBatchesKeepPaceAfterSmallBatches(t *testing.T) {
	t.Parallel()
	const pace = 300 * time.Millisecond
	type batch struct {
		at  time.Time
		ids []uuid.UUID
	}
	var mu sync.Mutex
	var seen []batch
	small := true
	b := &batches[uuid.UUID, uuid.UUID]{pace: pace, run: func(_ context.Context, asks []*batchAsk[uuid.UUID, uuid.UUID]) bool {
		mu.Lock()
		bt := batch{at: time.Now()}
		for _, a := range asks {
			bt.ids = append(bt.ids, a.q)
		}
		seen = append(seen, bt)
		s := small
		mu.Unlock()
		for _, a := range asks {
			a.answer(a.q, nil)
		}
		return s
	}}
	ctx := context.Background()
	ask := func(id uuid.UUID) {
		got, err := b.do(ctx, id)
		require.NoError(t, err)
		require.Equal(t, id, got)
	}
	last := func() batch {
		mu.Lock()
		defer mu.Unlock()
		return seen[len(seen)-1]
	}

	first := uuid.New()
	ask(first) // nothing before it: served at once, and small
	firstAt := last().at
	// Its answer comes before its batch records that it was small: an ask
	// made in between found no small batch before it and was served at
	// once, alone (a clean-clone CI run). Ask once that is recorded.
	require.Eventually(t, func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return b.lastSmall
	}, 5*time.Second, time.Millisecond, "the first batch is recorded small")
	second, third := uuid.New(), uuid.New()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); ask(second) }()
	go func() {
		defer wg.Done()
		time.Sleep(pace / 3)
		ask(third)
	}()
	wg.Wait()
	paced := last()
	require.ElementsMatch(t, []uuid.UUID{second, third}, paced.ids,
		"the asks that came while the batch kept pace are served together")
	require.GreaterOrEqual(t, paced.at.Sub(firstAt), pace, "the next batch waited out the pace")

	mu.Lock()
	small = false
	mu.Unlock()
	ask(uuid.New()) // waits out the pace after the small one, and is not small
	notSmallAt := last().at
	ask(uuid.New())
	require.Less(t, last().at.Sub(notSmallAt), pace/2, "after a batch that was not small, the next starts at once")
}
