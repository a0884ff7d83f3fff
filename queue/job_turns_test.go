package queue

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestJobTurnsOneAtATimePerJob: calls for one job take turns, calls for
// another job do not wait for them, a call whose context ends stops
// waiting, and a job nobody calls for is forgotten.
func TestJobTurnsOneAtATimePerJob(t *testing.T) {
	t.Parallel()
	var turns jobTurns
	ctx := context.Background()
	a, b := uuid.New(), uuid.New()

	var (
		mu           sync.Mutex
		inside, most int
		wg           sync.WaitGroup
	)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			release, err := turns.take(ctx, a)
			if !assert.NoError(t, err) {
				return
			}
			mu.Lock()
			inside++
			most = max(most, inside)
			mu.Unlock()
			time.Sleep(time.Millisecond) // others try meanwhile
			mu.Lock()
			inside--
			mu.Unlock()
			release()
		}()
	}

	held, err := turns.take(ctx, b)
	require.NoError(t, err, "another job's turn is free")
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	_, err = turns.take(short, b)
	require.ErrorIs(t, err, context.DeadlineExceeded, "a call whose context ends stops waiting")
	held()

	wg.Wait()
	require.Equal(t, 1, most, "one call of a job at a time")
	turns.mu.Lock()
	defer turns.mu.Unlock()
	require.Empty(t, turns.jobs, "jobs without calls are forgotten")
}
