package history_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/db"

	"github.com/ax-scheduler/ax/queue/axtype"
)

// lease gives the tasks of a run a current lease token, as a lease would,
// and returns their refs in shard order.
func (e *env) lease(run uuid.UUID) []axtype.TaskRef {
	e.t.Helper()
	rows, err := e.pool.Query(context.Background(), `
		UPDATE ax.task SET state = 'leased', lease_token = gen_random_uuid(), leased_at = now(),
		                   lease_expires_at = now() + interval '1 minute'
		WHERE execution_id = $1 RETURNING id, lease_token, shard_index`, run)
	require.NoError(e.t, err)
	type leased struct {
		ref   axtype.TaskRef
		shard int32
	}
	got, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (leased, error) {
		var l leased
		return l, r.Scan(&l.ref.ID, &l.ref.Token, &l.shard)
	})
	require.NoError(e.t, err)
	refs := make([]axtype.TaskRef, len(got))
	for _, l := range got {
		refs[l.shard] = l.ref
	}
	return refs
}

// A result that ends a run writes the run and its task to history with the
// final state in the statement that ends it (ax.history_end): no live row
// is left, the retention follows the outcome, the callback outbox row is
// written and ax_execution_ended is notified, as for runs ended by an
// update (the execution_ended trigger).
func TestAResultEndsItsRunStraightIntoHistory(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	job := e.job(nil)
	_, err := e.pool.Exec(ctx, `UPDATE ax.job SET callback_url = 'https://receiver.test/cb' WHERE id = $1`, job.ID)
	require.NoError(t, err)
	listener, err := e.pool.Acquire(ctx)
	require.NoError(t, err)
	defer listener.Release()
	_, err = listener.Exec(ctx, `LISTEN ax_execution_ended`)
	require.NoError(t, err)

	ok, bad := e.trigger(job.ID), e.trigger(job.ID)
	okRef, badRef := e.lease(ok)[0], e.lease(bad)[0]
	done, err := db.TaskComplete(ctx, e.pool, []axtype.TaskResult{
		{TaskRef: okRef, State: axtype.TaskSucceeded},
		{TaskRef: badRef, State: axtype.TaskFailed, Error: "exit status 3", ErrorCode: "exit_3"},
	})
	require.NoError(t, err)
	require.Len(t, done, 2)
	for _, d := range done {
		require.True(t, d.Finalized, "run %s ended", d.ExecutionID)
	}
	require.Equal(t, "history", e.where(ok))
	require.Equal(t, "history", e.where(bad))

	for run, want := range map[uuid.UUID]struct {
		state string
		kept  time.Duration
	}{ok: {"succeeded", 2 * time.Minute}, bad: {"failed", 5 * time.Minute}} {
		var state, taskState string
		var keptFor time.Duration
		var finished bool
		require.NoError(t, e.pool.QueryRow(ctx, `
			SELECT e.state::text, t.state::text, e.finished_at IS NOT NULL AND e.updated_at = e.finished_at,
			       extract(epoch FROM e.retain_until - e.finished_at)::bigint * interval '1 second'
			FROM ax.execution_history e JOIN ax.task_history t ON t.execution_id = e.id
			WHERE e.id = $1`, run).Scan(&state, &taskState, &finished, &keptFor))
		require.Equal(t, want.state, state)
		require.Equal(t, want.state, taskState)
		require.True(t, finished, "the end time is set")
		require.Equal(t, want.kept, keptFor.Round(time.Second))
	}

	var outbox int
	require.NoError(t, e.pool.QueryRow(ctx,
		`SELECT count(*) FROM ax.callback WHERE execution_id = ANY($1)`, []uuid.UUID{ok, bad}).Scan(&outbox))
	require.Equal(t, 2, outbox, "one callback outbox row per ended run")

	wait, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	note, err := listener.Conn().WaitForNotification(wait)
	require.NoError(t, err)
	require.ElementsMatch(t, []string{ok.String(), bad.String()}, strings.Split(note.Payload, ","))

	// A stale token (the run has ended) matches nothing and moves nothing.
	again, err := db.TaskComplete(ctx, e.pool, []axtype.TaskResult{{TaskRef: okRef, State: axtype.TaskFailed}})
	require.NoError(t, err)
	require.Empty(t, again)
}

// A run of several shards ends with its last shard's result, in the state
// its shards add up to, and not before.
func TestTheLastShardsResultEndsItsRun(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	job := e.job(func(j *axtype.Job) { j.ShardCount = 2 })
	run := e.trigger(job.ID)
	refs := e.lease(run)
	require.Len(t, refs, 2)

	done, err := db.TaskComplete(ctx, e.pool, []axtype.TaskResult{{TaskRef: refs[0], State: axtype.TaskSucceeded}})
	require.NoError(t, err)
	require.False(t, done[0].Finalized)
	require.Equal(t, "live", e.whereShards(run, 2))

	done, err = db.TaskComplete(ctx, e.pool, []axtype.TaskResult{{TaskRef: refs[1], State: axtype.TaskFailed, Error: "boom"}})
	require.NoError(t, err)
	require.True(t, done[0].Finalized)
	require.Equal(t, "history", e.whereShards(run, 2))
	var state string
	require.NoError(t, e.pool.QueryRow(ctx, `SELECT state::text FROM ax.execution_history WHERE id = $1`, run).Scan(&state))
	require.Equal(t, "failed", state)
}

// ax.history_end_single, which ends runs of one shard without looking
// for their other tasks, leaves a run of several alone, even when it is
// given one shard's outcome: ending it would move the other shard, still
// in flight, to history (task_history's checks refuse that, so the whole
// completion would fail). history_end, given the same, waits too.
func TestHistoryEndSingleLeavesARunOfSeveralShards(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	job := e.job(func(j *axtype.Job) { j.ShardCount = 2 })
	run := e.trigger(job.ID)
	refs := e.lease(run)
	require.Len(t, refs, 2)

	endSingle := func(fn string) []uuid.UUID {
		t.Helper()
		var ended []uuid.UUID
		require.NoError(t, e.pool.QueryRow(ctx, `SELECT ax.`+fn+`(ARRAY[$1::uuid], ARRAY['succeeded'], ARRAY[$2::uuid],
			ARRAY['succeeded'], ARRAY[NULL::jsonb], ARRAY[''], ARRAY[''])`, run, refs[0].ID).Scan(&ended))
		return ended
	}
	require.Empty(t, endSingle("history_end_single"))
	require.Equal(t, "live", e.whereShards(run, 2))
	// history_end, given the same, sees the other shard in flight.
	require.Empty(t, endSingle("history_end"))
	require.Equal(t, "live", e.whereShards(run, 2))
}

// whereShards is where for a run of n shards.
func (e *env) whereShards(id uuid.UUID, n int) string {
	e.t.Helper()
	var live, kept, liveTasks, keptTasks int
	require.NoError(e.t, e.pool.QueryRow(context.Background(), `
		SELECT (SELECT count(*) FROM ax.execution WHERE id = $1),
		       (SELECT count(*) FROM ax.execution_history WHERE id = $1),
		       (SELECT count(*) FROM ax.task WHERE execution_id = $1),
		       (SELECT count(*) FROM ax.task_history WHERE execution_id = $1)`, id).Scan(&live, &kept, &liveTasks, &keptTasks))
	switch {
	case live == 1 && liveTasks == n && kept+keptTasks == 0:
		return "live"
	case kept == 1 && keptTasks == n && live+liveTasks == 0:
		return "history"
	}
	return "broken"
}

// A result for a run that was ended beside its task (history_end cannot
// end it again) is kept on the live task row (TaskRecordEnd), and
// maintenance moves the run once its task has ended.
func TestAResultForARunEndedBesideItsTaskIsKept(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	run := e.trigger(e.job(nil).ID)
	ref := e.lease(run)[0]
	_, err := e.pool.Exec(ctx, `UPDATE ax.execution SET state = 'failed', finished_at = now() WHERE id = $1`, run)
	require.NoError(t, err)

	done, err := db.TaskComplete(ctx, e.pool, []axtype.TaskResult{{TaskRef: ref, State: axtype.TaskSucceeded, Result: []byte(`{"n":1}`)}})
	require.NoError(t, err)
	require.Len(t, done, 1)
	require.False(t, done[0].Finalized)
	var state string
	var token *uuid.UUID
	var result []byte
	require.NoError(t, e.pool.QueryRow(ctx, `SELECT state::text, lease_token, result FROM ax.task WHERE id = $1`, ref.ID).
		Scan(&state, &token, &result))
	require.Equal(t, "succeeded", state)
	require.Nil(t, token)
	require.JSONEq(t, `{"n":1}`, string(result))

	require.Equal(t, 1, e.maintainAt(0).Moved)
	require.Equal(t, "history", e.where(run))
}
