package main

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/queue/webhook"
)

// syncBuffer is written by the server's goroutines and read by the test.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestReceiverPrintsVerifiedCallbacks: a callback signed with the job's
// secret is printed and answered 204, one signed with another secret is
// refused with 401 and not printed, and -count 1 ends the receiver after
// the first verified one.
func TestReceiverPrintsVerifiedCallbacks(t *testing.T) {
	t.Parallel()
	secret := webhook.NewSecret()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	var out syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- run(context.Background(), addr, secret.Text(), 1, &out, slog.New(slog.DiscardHandler))
	}()
	body := []byte(`{"type":"execution.ended","job_group":"tour","job_name":"hello","state":"succeeded","sequence":1}`)
	post := func(secrets ...webhook.Secret) int {
		req, err := http.NewRequest(http.MethodPost, "http://"+addr+"/callbacks", bytes.NewReader(body))
		require.NoError(t, err)
		require.NoError(t, webhook.Sign(req.Header, "0190a6c4-8c1e-7b3a-9f00-3c2d1e0f4a5b", time.Now(), body, secrets...))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0 // not listening yet
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	require.Eventually(t, func() bool { return post(webhook.NewSecret()) == http.StatusUnauthorized },
		5*time.Second, 10*time.Millisecond)
	require.Empty(t, out.String(), "a refused callback is not printed")
	require.Equal(t, http.StatusNoContent, post(secret))
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("the receiver did not stop after -count 1 callback")
	}
	first, _, _ := strings.Cut(out.String(), "\n")
	require.Regexp(t, `^verified callback 0190a6c4-8c1e-7b3a-9f00-3c2d1e0f4a5b \(sent \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\): `+
		`job tour/hello succeeded, sequence 1$`, first)
	require.Contains(t, out.String(), `"state": "succeeded"`)
}

func TestReceiverNeedsASecret(t *testing.T) {
	t.Parallel()
	err := run(context.Background(), "127.0.0.1:0", "", 0, &bytes.Buffer{}, slog.New(slog.DiscardHandler))
	require.ErrorContains(t, err, "WEBHOOK_SECRETS is not set")
}
