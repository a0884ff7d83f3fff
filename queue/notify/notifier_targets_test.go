package notify_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/queue/notify"
)

// TestTargetedNotificationsWakeWhomTheyName: on a targeted channel a
// notification naming keys wakes those keys' subscribers at once and the
// channel's other subscribers only after the late delay (once for any
// number of notifications meanwhile); an empty payload wakes the plain
// subscribers at once.
func TestTargetedNotificationsWakeWhomTheyName(t *testing.T) {
	e := setup(t)
	const late = 600 * time.Millisecond
	e.notifier.Target(notify.TaskReadyChannel, late)
	plain, stopPlain := e.notifier.Subscribe(notify.TaskReadyChannel)
	defer stopPlain()
	mine, stopMine := e.notifier.SubscribeKey(notify.TaskReadyChannel, "agent-1")
	defer stopMine()
	theirs, stopTheirs := e.notifier.SubscribeKey(notify.TaskReadyChannel, "agent-2")
	defer stopTheirs()
	sentinel, stopSentinel := e.notifier.SubscribeKey(notify.ExecutionEndedChannel, "sentinel")
	defer stopSentinel()
	// setup's notifyUntil sends again every 20 ms until one arrives: on a
	// loaded machine more than one was sent, and the late ones (empty
	// payloads) woke the plain subscriber "at once" below. Notifications
	// come in order: past a sentinel, none of setup's is left.
	e.send(notify.ExecutionEndedChannel, "sentinel")
	require.True(t, woken(sentinel, 5*time.Second))
	drain(plain)
	drain(mine)
	drain(theirs)

	sent := time.Now()
	e.send(notify.TaskReadyChannel, "agent-0,agent-1")
	e.send(notify.TaskReadyChannel, "agent-1,agent-3")
	e.send(notify.ExecutionEndedChannel, "sentinel") // handled after both above
	require.True(t, woken(sentinel, 5*time.Second))
	require.True(t, woken(mine, 0), "the named agent's subscriber wakes at once")
	require.False(t, woken(theirs, 0), "an agent not named sleeps")
	if time.Since(sent) < late/2 {
		require.False(t, woken(plain, 0), "the other subscribers do not wake at once")
	}
	require.True(t, woken(plain, 5*time.Second), "the other subscribers wake within the late delay")
	require.GreaterOrEqual(t, time.Since(sent), late-50*time.Millisecond, "not before it")
	require.False(t, woken(plain, late+200*time.Millisecond), "two notifications, one late wake-up")
	require.False(t, woken(theirs, 0), "keyed subscribers of other keys are not woken late")

	drain(mine)
	e.send(notify.TaskReadyChannel, "")
	require.True(t, woken(plain, 5*time.Second), "an empty payload wakes the plain subscribers at once")
	require.False(t, woken(mine, 0), "and no key's")
	require.False(t, woken(theirs, 0))

	// So does a reconnect (notifications sent meanwhile were lost).
	_, err := e.pool.Exec(context.Background(), `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE datname = current_database() AND pid <> pg_backend_pid() AND query LIKE 'LISTEN%'`)
	require.NoError(t, err)
	require.True(t, woken(plain, 10*time.Second), "a reconnect wakes the plain subscribers")
	require.False(t, woken(mine, 200*time.Millisecond), "and no key of a targeted channel")
}

func TestTargetsPayload(t *testing.T) {
	var none notify.Targets
	require.Equal(t, "", none.Payload())

	var some notify.Targets
	some.Add("b")
	some.Add("a")
	some.Add("b")
	require.Equal(t, "a,b", some.Payload(), "each key once, in order")
	some.Add("")
	require.Equal(t, "", some.Payload(), "a task for anyone makes it everyone's")

	var many notify.Targets
	for i := range notify.MaxTargets + 1 {
		many.Add(strings.Repeat("x", i+1))
	}
	require.Equal(t, "", many.Payload(), "more keys than a payload holds: everyone")
}
