package webhook_test

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/queue/webhook"
)

// The reference vector published with the Standard Webhooks libraries; the
// npm package reproduces it too (see TestStandardWebhooksInterop).
const (
	vectorSecret    = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	vectorID        = "msg_p5jXN8AQM9LWM0D4loKWxJek"
	vectorTimestamp = 1614265330
	vectorBody      = `{"test": 2432232314}`
	vectorSignature = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
)

func TestReferenceVector(t *testing.T) {
	t.Parallel()
	secret, err := webhook.ParseSecret(vectorSecret)
	require.NoError(t, err)
	got, err := webhook.Signature(vectorID, time.Unix(vectorTimestamp, 0), []byte(vectorBody), secret)
	require.NoError(t, err)
	require.Equal(t, vectorSignature, got)

	h := http.Header{}
	h.Set(webhook.HeaderID, vectorID)
	h.Set(webhook.HeaderTimestamp, "1614265330")
	h.Set(webhook.HeaderSignature, vectorSignature)
	v := webhook.Verifier{Secrets: []webhook.Secret{secret}, Now: func() time.Time { return time.Unix(vectorTimestamp+10, 0) }}
	msg, err := v.Verify(h, []byte(vectorBody))
	require.NoError(t, err)
	require.Equal(t, webhook.Message{ID: vectorID, Timestamp: time.Unix(vectorTimestamp, 0)}, msg)
}

func TestNewSecret(t *testing.T) {
	t.Parallel()
	a, b := webhook.NewSecret(), webhook.NewSecret()
	require.NotEqual(t, a.Text(), b.Text())
	require.True(t, strings.HasPrefix(a.Text(), "whsec_"))
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(a.Text(), "whsec_"))
	require.NoError(t, err)
	require.Len(t, key, 32)

	parsed, err := webhook.ParseSecret(a.Text())
	require.NoError(t, err)
	require.Equal(t, a.Text(), parsed.Text())

	require.NotContains(t, a.String(), a.Text()[len("whsec_"):len("whsec_")+4], "String must not reveal the key")
	require.Contains(t, a.String(), "redacted")
	require.NotEqual(t, a.String(), b.String(), "fingerprints tell secrets apart")
	require.Equal(t, a.String(), fmt.Sprint(a))
	require.True(t, webhook.Secret{}.IsZero())
}

func TestParseSecret(t *testing.T) {
	t.Parallel()
	encode := func(n int) string { return base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, n)) }
	tests := []struct {
		name, in string
		wantErr  string // empty: valid
	}{
		{"32 bytes", "whsec_" + encode(32), ""},
		{"24 bytes, the minimum", "whsec_" + encode(24), ""},
		{"64 bytes, the maximum", "whsec_" + encode(64), ""},
		{"unpadded base64", "whsec_" + strings.TrimRight(encode(32), "="), ""},
		{"surrounding spaces", "  whsec_" + encode(32) + "\n", ""},
		{"no prefix", encode(32), `must start with "whsec_"`},
		{"other prefix", "whsk_" + encode(32), `must start with "whsec_"`},
		{"not base64", "whsec_not*base64!", "not standard base64"},
		{"url-safe base64", "whsec_" + strings.NewReplacer("+", "-", "/", "_").Replace(base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{0xfb, 0xff}, 16))), "not standard base64"},
		{"empty", "whsec_", "decodes to 0 bytes"},
		{"23 bytes", "whsec_" + encode(23), "decodes to 23 bytes; 24 to 64 are required"},
		{"65 bytes", "whsec_" + encode(65), "decodes to 65 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := webhook.ParseSecret(tt.in)
			if tt.wantErr == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, webhook.ErrInvalidSecret)
			require.ErrorContains(t, err, tt.wantErr)
		})
	}
}

func TestParseSecrets(t *testing.T) {
	t.Parallel()
	secrets, err := webhook.ParseSecrets(vectorSecret, webhook.NewSecret().Text())
	require.NoError(t, err)
	require.Len(t, secrets, 2)
	_, err = webhook.ParseSecrets(vectorSecret, "whsec_short")
	require.ErrorIs(t, err, webhook.ErrInvalidSecret)
	require.ErrorContains(t, err, "secret 2:")
}

func TestSignErrors(t *testing.T) {
	t.Parallel()
	secret, now := webhook.NewSecret(), time.Now()
	tests := []struct {
		name    string
		id      string
		at      time.Time
		secrets []webhook.Secret
		want    error
	}{
		{"empty id", "", now, []webhook.Secret{secret}, webhook.ErrInvalidID},
		{"id with a dot", "msg.1", now, []webhook.Secret{secret}, webhook.ErrInvalidID},
		{"id with a space", "msg 1", now, []webhook.Secret{secret}, webhook.ErrInvalidID},
		{"id with a newline", "msg\n1", now, []webhook.Secret{secret}, webhook.ErrInvalidID},
		{"zero time", "msg_1", time.Time{}, []webhook.Secret{secret}, webhook.ErrInvalidTimestamp},
		{"no secret", "msg_1", now, nil, webhook.ErrNoSecrets},
		{"zero secret", "msg_1", now, []webhook.Secret{secret, {}}, webhook.ErrInvalidSecret},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := http.Header{}
			err := webhook.Sign(h, tt.id, tt.at, []byte("{}"), tt.secrets...)
			require.ErrorIs(t, err, tt.want)
			require.Empty(t, h, "a failed Sign must not set headers")
		})
	}
}

func TestSignSetsHeaders(t *testing.T) {
	t.Parallel()
	old, current := webhook.NewSecret(), webhook.NewSecret()
	at := time.Unix(1_700_000_000, 999_000_000)
	h := http.Header{}
	require.NoError(t, webhook.Sign(h, "exec_1", at, []byte("{}"), current, old))
	require.Equal(t, "exec_1", h.Get("webhook-id"))
	require.Equal(t, "1700000000", h.Get("webhook-timestamp"))
	sigs := strings.Split(h.Get("webhook-signature"), " ")
	require.Len(t, sigs, 2, "one signature per secret during a rotation")
	for _, sig := range sigs {
		require.True(t, strings.HasPrefix(sig, "v1,"), sig)
		mac, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(sig, "v1,"))
		require.NoError(t, err)
		require.Len(t, mac, 32)
	}
}

// verifyCase is one request presented to a Verifier at verifyNow.
type verifyCase struct {
	name      string
	edit      func(h http.Header, body *[]byte) // changes the signed request
	verifiers []webhook.Secret                  // nil: the signing secret
	tolerance time.Duration
	want      error // nil: accepted
}

var verifyNow = time.Unix(1_700_000_000, 500_000_000)

func TestVerify(t *testing.T) {
	t.Parallel()
	signing, other := webhook.NewSecret(), webhook.NewSecret()
	resign := func(at time.Time, secrets ...webhook.Secret) func(http.Header, *[]byte) {
		return func(h http.Header, body *[]byte) {
			require.NoError(t, webhook.Sign(h, h.Get("webhook-id"), at, *body, secrets...))
		}
	}
	set := func(name, value string) func(http.Header, *[]byte) {
		return func(h http.Header, _ *[]byte) { h.Set(name, value) }
	}
	tests := []verifyCase{
		{name: "valid"},
		{name: "tampered body", edit: func(_ http.Header, b *[]byte) { *b = []byte(`{"state":"failed"}`) }, want: webhook.ErrNoMatchingSignature},
		{name: "body with a byte appended", edit: func(_ http.Header, b *[]byte) { *b = append(*b, ' ') }, want: webhook.ErrNoMatchingSignature},
		{name: "tampered id", edit: set("webhook-id", "exec_2"), want: webhook.ErrNoMatchingSignature},
		{name: "tampered timestamp", edit: set("webhook-timestamp", "1700000001"), want: webhook.ErrNoMatchingSignature},
		{name: "wrong secret", verifiers: []webhook.Secret{other}, want: webhook.ErrNoMatchingSignature},
		{name: "several secrets, one right", verifiers: []webhook.Secret{other, signing}},
		{name: "rotation: signed with both, old one known", edit: resign(verifyNow, other, signing), verifiers: []webhook.Secret{signing}},
		{name: "rotation: signed with both, new one known", edit: resign(verifyNow, other, signing), verifiers: []webhook.Secret{other}},
		{name: "rotation: signed with neither", edit: resign(verifyNow, other, webhook.NewSecret()), verifiers: []webhook.Secret{signing}, want: webhook.ErrNoMatchingSignature},
		{name: "signature with its last character cut", edit: func(h http.Header, _ *[]byte) {
			s := h.Get("webhook-signature")
			h.Set("webhook-signature", s[:len(s)-2]+"=")
		}, want: webhook.ErrNoMatchingSignature},
		{name: "signature not base64", edit: set("webhook-signature", "v1,***"), want: webhook.ErrNoMatchingSignature},
		{name: "signature without version", edit: func(h http.Header, _ *[]byte) {
			h.Set("webhook-signature", strings.TrimPrefix(h.Get("webhook-signature"), "v1,"))
		}, want: webhook.ErrInvalidSignature},
		{name: "only other versions", edit: set("webhook-signature", "v1a,AAAA v2,BBBB"), want: webhook.ErrInvalidSignature},
		{name: "unknown versions are skipped", edit: func(h http.Header, _ *[]byte) {
			h.Set("webhook-signature", "v1a,AAAA  "+h.Get("webhook-signature")+" v2,x")
		}},
		{name: "signatures on two header lines", edit: func(h http.Header, b *[]byte) {
			resign(verifyNow, other, signing)(h, b)
			h["Webhook-Signature"] = strings.Fields(h.Get("webhook-signature"))
		}, verifiers: []webhook.Secret{signing}},
		{name: "lower-case header keys", edit: func(h http.Header, _ *[]byte) {
			for _, name := range []string{"Webhook-Id", "Webhook-Timestamp", "Webhook-Signature"} {
				h[strings.ToLower(name)] = h[name]
				delete(h, name)
			}
		}},
		{name: "missing id", edit: func(h http.Header, _ *[]byte) { h.Del("webhook-id") }, want: webhook.ErrMissingHeader},
		{name: "missing timestamp", edit: func(h http.Header, _ *[]byte) { h.Del("webhook-timestamp") }, want: webhook.ErrMissingHeader},
		{name: "missing signature", edit: func(h http.Header, _ *[]byte) { h.Del("webhook-signature") }, want: webhook.ErrMissingHeader},
		{name: "blank signature", edit: set("webhook-signature", "  "), want: webhook.ErrMissingHeader},
		{name: "id with a dot", edit: set("webhook-id", "exec.1"), want: webhook.ErrInvalidID},
		{name: "timestamp in milliseconds", edit: set("webhook-timestamp", "1700000000000"), want: webhook.ErrTimestampTooNew},
		{name: "timestamp not a number", edit: set("webhook-timestamp", "yesterday"), want: webhook.ErrInvalidTimestamp},
		{name: "timestamp with a sign", edit: set("webhook-timestamp", "+1700000000"), want: webhook.ErrInvalidTimestamp},
		{name: "negative timestamp", edit: set("webhook-timestamp", "-1"), want: webhook.ErrInvalidTimestamp},
		{name: "fractional timestamp", edit: set("webhook-timestamp", "1700000000.5"), want: webhook.ErrInvalidTimestamp},
		{name: "huge timestamp", edit: set("webhook-timestamp", "99999999999999999999"), want: webhook.ErrInvalidTimestamp},
		{name: "exactly 5 minutes old", edit: resign(verifyNow.Add(-5*time.Minute), signing)},
		{name: "5 minutes 1 second old", edit: resign(verifyNow.Add(-5*time.Minute-time.Second), signing), want: webhook.ErrTimestampTooOld},
		{name: "a day old", edit: resign(verifyNow.Add(-24*time.Hour), signing), want: webhook.ErrTimestampTooOld},
		{name: "exactly 5 minutes ahead", edit: resign(verifyNow.Add(5*time.Minute), signing)},
		{name: "5 minutes 1 second ahead", edit: resign(verifyNow.Add(5*time.Minute+time.Second), signing), want: webhook.ErrTimestampTooNew},
		{name: "custom tolerance, inside", edit: resign(verifyNow.Add(-10*time.Second), signing), tolerance: 10 * time.Second},
		{name: "custom tolerance, outside", edit: resign(verifyNow.Add(-11*time.Second), signing), tolerance: 10 * time.Second, want: webhook.ErrTimestampTooOld},
		{name: "no secrets", verifiers: []webhook.Secret{}, want: webhook.ErrNoSecrets},
		{name: "zero secret", verifiers: []webhook.Secret{signing, {}}, want: webhook.ErrInvalidSecret},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			body := []byte(`{"execution_id":"exec_1","state":"succeeded"}`)
			h := http.Header{}
			require.NoError(t, webhook.Sign(h, "exec_1", verifyNow, body, signing))
			if tt.edit != nil {
				tt.edit(h, &body)
			}
			secrets := tt.verifiers
			if secrets == nil {
				secrets = []webhook.Secret{signing}
			}
			v := webhook.Verifier{Secrets: secrets, Tolerance: tt.tolerance, Now: func() time.Time { return verifyNow }}
			msg, err := v.Verify(h, body)
			if tt.want != nil {
				require.ErrorIs(t, err, tt.want)
				require.Zero(t, msg)
				return
			}
			require.NoError(t, err)
			require.Equal(t, "exec_1", msg.ID)
		})
	}
}

func TestVerifyDefaultsToNowAndFiveMinutes(t *testing.T) {
	t.Parallel()
	secret := webhook.NewSecret()
	body := []byte("{}")
	h := http.Header{}
	require.NoError(t, webhook.Sign(h, "exec_1", time.Now(), body, secret))
	_, err := webhook.Verify(h, body, secret)
	require.NoError(t, err)

	require.NoError(t, webhook.Sign(h, "exec_1", time.Now().Add(-6*time.Minute), body, secret))
	_, err = webhook.Verify(h, body, secret)
	require.ErrorIs(t, err, webhook.ErrTimestampTooOld)
	require.ErrorContains(t, err, "the tolerance is 5m0s")
}

func TestMiddleware(t *testing.T) {
	t.Parallel()
	secret := webhook.NewSecret()
	type seen struct {
		msg  webhook.Message
		ok   bool
		body string
	}
	got := make(chan seen, 1)
	v := &webhook.Verifier{Secrets: []webhook.Secret{secret}, MaxBodyBytes: 64}
	srv := httptest.NewServer(v.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		msg, ok := webhook.MessageFromContext(r.Context())
		body, _ := io.ReadAll(r.Body)
		got <- seen{msg, ok, string(body)}
		w.WriteHeader(http.StatusNoContent)
	})))
	t.Cleanup(srv.Close)

	post := func(body string, sign func(h http.Header)) (int, string) {
		req, err := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(body))
		require.NoError(t, err)
		sign(req.Header)
		resp, err := srv.Client().Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		text, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(text)
	}
	signed := func(body string) func(http.Header) {
		return func(h http.Header) { require.NoError(t, webhook.Sign(h, "exec_1", time.Now(), []byte(body), secret)) }
	}

	status, _ := post(`{"ok":true}`, signed(`{"ok":true}`))
	require.Equal(t, http.StatusNoContent, status)
	s := <-got
	require.True(t, s.ok, "the handler finds the message in its context")
	require.Equal(t, "exec_1", s.msg.ID)
	require.Equal(t, `{"ok":true}`, s.body, "the handler reads the body again")

	status, text := post(`{"ok":false}`, signed(`{"ok":true}`))
	require.Equal(t, http.StatusUnauthorized, status)
	require.Contains(t, text, "no matching signature")

	status, text = post(`{}`, func(http.Header) {})
	require.Equal(t, http.StatusUnauthorized, status)
	require.Contains(t, text, "missing header: webhook-id")

	big := strings.Repeat("x", 65)
	status, _ = post(big, signed(big))
	require.Equal(t, http.StatusRequestEntityTooLarge, status)

	require.Empty(t, got, "refused requests must not reach the handler")
}

func TestMiddlewareWithoutSecrets(t *testing.T) {
	t.Parallel()
	v := &webhook.Verifier{}
	h := v.Middleware(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		t.Error("handler reached")
	}))
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader("{}"))
	require.NoError(t, webhook.Sign(req.Header, "exec_1", time.Now(), []byte("{}"), webhook.NewSecret()))
	h.ServeHTTP(rec, req)
	require.Equal(t, http.StatusInternalServerError, rec.Code)
	require.Equal(t, "webhook: receiver misconfigured\n", rec.Body.String())
}
