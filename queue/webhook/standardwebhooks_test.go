package webhook_test

import (
	"bytes"
	"encoding/base64"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/queue/webhook"
	"github.com/ax-scheduler/ax/queue/webhook/webhooktest"
)

// TestStandardWebhooksInterop checks our signatures against an
// implementation we did not write, both ways: the npm package must accept
// what Sign makes (and refuse tampered copies, so the check is not
// vacuous), and Verify must accept what the package signs.
func TestStandardWebhooksInterop(t *testing.T) {
	t.Parallel()
	current, old, long := webhook.NewSecret(), webhook.NewSecret(), mustParse(t, "whsec_"+base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{0xa5}, 64)))
	now := time.Now()
	jsonBody := []byte(`{"execution_id":"0190a6c4-8c1e-7b3a-9f00-3c2d1e0f4a5b","state":"succeeded","result":{"rows":3}}`)
	unicodeBody := []byte(`{"result":"héllo ✓ 日本語","error":null}`)

	signed := func(id string, body []byte, secrets ...webhook.Secret) http.Header {
		h := http.Header{}
		require.NoError(t, webhook.Sign(h, id, now, body, secrets...))
		return h
	}
	verify := []struct {
		name string
		webhooktest.VerifyRequest
		want bool
	}{
		{"one secret", webhooktest.VerifyRequest{Secret: current.Text(), Header: signed("0190a6c4-8c1e-7b3a-9f00-3c2d1e0f4a5b", jsonBody, current), Body: jsonBody}, true},
		{"rotation, new secret", webhooktest.VerifyRequest{Secret: current.Text(), Header: signed("exec_2", jsonBody, current, old), Body: jsonBody}, true},
		{"rotation, old secret", webhooktest.VerifyRequest{Secret: old.Text(), Header: signed("exec_2", jsonBody, current, old), Body: jsonBody}, true},
		{"unicode body", webhooktest.VerifyRequest{Secret: current.Text(), Header: signed("exec_3", unicodeBody, current), Body: unicodeBody}, true},
		{"empty body", webhooktest.VerifyRequest{Secret: current.Text(), Header: signed("exec_4", nil, current), Body: []byte{}}, true},
		{"64-byte secret", webhooktest.VerifyRequest{Secret: long.Text(), Header: signed("exec_5", jsonBody, long), Body: jsonBody}, true},
		{"tampered body (control)", webhooktest.VerifyRequest{Secret: current.Text(), Header: signed("exec_6", jsonBody, current), Body: unicodeBody}, false},
		{"wrong secret (control)", webhooktest.VerifyRequest{Secret: old.Text(), Header: signed("exec_7", jsonBody, current), Body: jsonBody}, false},
	}
	sign := []webhooktest.SignRequest{
		{Secret: current.Text(), ID: "exec_8", Timestamp: now, Body: jsonBody},
		{Secret: current.Text(), ID: "exec_9", Timestamp: now, Body: unicodeBody},
		{Secret: vectorSecret, ID: vectorID, Timestamp: time.Unix(vectorTimestamp, 0), Body: []byte(vectorBody)},
	}
	requests := make([]webhooktest.VerifyRequest, len(verify))
	for i, c := range verify {
		requests[i] = c.VerifyRequest
	}

	answer := webhooktest.RunStandardWebhooks(t, requests, sign)

	require.Len(t, answer.Verify, len(verify))
	for i, c := range verify {
		require.Equal(t, c.want, answer.Verify[i] == nil, "standardwebhooks verify %q: %v", c.name, answer.Verify[i])
	}
	require.Len(t, answer.Sign, len(sign))
	require.Equal(t, vectorSignature, answer.Sign[2], "the npm package reproduces the reference vector")
	for i, c := range sign[:2] {
		h := http.Header{}
		h.Set(webhook.HeaderID, c.ID)
		h.Set(webhook.HeaderTimestamp, strconv.FormatInt(c.Timestamp.Unix(), 10))
		h.Set(webhook.HeaderSignature, answer.Sign[i])
		_, err := webhook.Verify(h, c.Body, current)
		require.NoError(t, err, "our Verify of the npm package's signature %d", i)
		_, err = webhook.Verify(h, c.Body, old, current)
		require.NoError(t, err, "our Verify with two secrets, the right one second")
		_, err = webhook.Verify(h, append(c.Body, ' '), current)
		require.ErrorIs(t, err, webhook.ErrNoMatchingSignature)
	}
}

func mustParse(t *testing.T, s string) webhook.Secret {
	t.Helper()
	secret, err := webhook.ParseSecret(s)
	require.NoError(t, err)
	return secret
}
