package delivery_test

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/queue/axtype"
	"github.com/ax-scheduler/ax/queue/dispatch"
	"github.com/ax-scheduler/ax/queue/webhook"
	"github.com/ax-scheduler/ax/queue/webhook/webhooktest"
)

// A callback exactly as ax delivers it (the headers and raw body the
// receiver got) passes Webhook.verify of the official npm package
// standardwebhooks, run with node, keyed with the job's signing secret. The
// same request with its body altered, or checked with another secret, is
// refused, so the check cannot pass by accident. The result holds non-ASCII
// text so that the signed bytes are UTF-8, not just ASCII.
func TestCallbackStandardWebhooksInterop(t *testing.T) {
	t.Parallel()
	env := setup(t, nil)
	rc := newReceiver(t, nil)
	job := env.job(func(j *axtype.Job) { j.CallbackURL = rc.URL + "/hook" })
	exec := env.trigger(job.ID)
	task := leaseOne(t, env)
	agents := dispatch.NewLeaseBroker(env.pool, nil, dispatch.AgentConfig{}, nil, nil).WithOutbox(env.river.Outbox())
	_, err := agents.Complete(context.Background(), task.AgentID, []axtype.TaskResult{{
		TaskRef: axtype.TaskRef{ID: task.ID, Token: task.LeaseToken}, State: "succeeded",
		Result: json.RawMessage(`{"greeting":"héllo ✓ 日本語","rows":3}`)}})
	require.NoError(t, err)

	env.eventually("delivered", 10*time.Second, "SELECT state::text FROM ax.callback WHERE execution_id = $1", exec.ID)
	got := rc.requests()
	require.Len(t, got, 1)
	r := got[0]
	require.Equal(t, exec.ID.String(), r.header.Get(webhook.HeaderID))
	require.Contains(t, string(r.body), `"state":"succeeded"`)
	require.Contains(t, string(r.body), "日本語", "the body carries raw UTF-8")

	webhooktest.VerifyWithStandardWebhooks(t, job.SigningSecret, r.header, r.body)

	tampered := bytes.Replace(r.body, []byte(`"state":"succeeded"`), []byte(`"state":"cancelled"`), 1)
	controls := webhooktest.RunStandardWebhooks(t, []webhooktest.VerifyRequest{
		{Secret: job.SigningSecret, Header: r.header, Body: tampered},
		{Secret: webhook.NewSecret().Text(), Header: r.header, Body: r.body},
	}, nil)
	require.ErrorContains(t, controls.Verify[0], "No matching signature", "a tampered body is refused")
	require.ErrorContains(t, controls.Verify[1], "No matching signature", "another secret is refused")
}
