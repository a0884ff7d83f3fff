package clock_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/queue/clock"
)

func TestNilClockIsTheDatabaseClock(t *testing.T) {
	t.Parallel()
	var c *clock.Clock
	require.Nil(t, c.Now(), "nil: the queries use now()")
}

func TestClockAdvancesAndSetsAndKeepsRunning(t *testing.T) {
	t.Parallel()
	c := clock.New()
	require.WithinDuration(t, time.Now(), *c.Now(), time.Second)

	c.Advance(time.Hour)
	require.WithinDuration(t, time.Now().Add(time.Hour), *c.Now(), time.Second)

	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	c.Set(at)
	first := *c.Now()
	require.WithinDuration(t, at, first, time.Second)
	require.Equal(t, time.UTC, first.Location())
	require.Eventually(t, func() bool { return c.Now().After(first) }, time.Second, time.Millisecond, "it runs on")
}
