package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/tests/dbtest"
	"github.com/ax-scheduler/ax/tests/e2e/e2ekit"
	"github.com/ax-scheduler/ax/tests/proctest"
)

// selfSigned writes a certificate for 127.0.0.1 and its key as PEM files
// in dir and returns their paths.
func selfSigned(t *testing.T, dir string) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "ax test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	keyDER, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	require.NoError(t, os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600))
	require.NoError(t, os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600))
	return certFile, keyFile
}

func TestServeTLSAndAgentOverHTTPS(t *testing.T) {
	t.Parallel()
	certFile, keyFile := selfSigned(t, t.TempDir())
	dbURL := dbtest.NewURL(t)
	key := "ax_e2e_bootstrap_admin_key_0123456789"
	proc := proctest.Start(t, proctest.Binary(t, "ax"), []string{"DATABASE_URL=" + dbURL, "AX_ADMIN_KEY=" + key,
		"AX_ADDR=127.0.0.1:0"}, "serve", "--tls-cert", certFile, "--tls-key", keyFile)
	addr := proctest.WaitServing(t, proc, 90*time.Second)
	s := &e2ekit.Server{URL: "https://" + addr, DBURL: dbURL, Key: key, Proc: proc, CAFile: certFile}

	pemCert, err := os.ReadFile(certFile)
	require.NoError(t, err)
	roots := x509.NewCertPool()
	require.True(t, roots.AppendCertsFromPEM(pemCert))
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}, Timeout: 2 * time.Second}
	require.Eventually(t, func() bool {
		resp, err := client.Get(s.URL + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 30*time.Second, 50*time.Millisecond, "ax serve answers over TLS")

	// HTTP/2 gets the same limits: a 64 MiB job is refused unread.
	h2 := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}, ForceAttemptHTTP2: true},
		Timeout: 10 * time.Second}
	req, _ := http.NewRequest("POST", s.URL+"/v1/jobs", io.LimitReader(repeatReader("x"), 64*mib))
	req.ContentLength = 64 * mib
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := h2.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, 2, resp.ProtoMajor)
	require.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode)

	// Plain HTTP on the TLS port gets no API.
	resp, err = http.Get("http://" + addr + "/readyz")
	if err == nil {
		resp.Body.Close()
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, "plain HTTP to the TLS port")
	}

	// An agent trusting the certificate registers over https.
	agentKey := keyWithScope(t, s, "agent")
	proctest.Start(t, proctest.Binary(t, "ax-agent"), []string{"AX_SERVER=" + s.URL, "AX_AGENT_KEY=" + agentKey,
		"AX_AGENT_NAME=tls-agent", "SSL_CERT_FILE=" + certFile})
	require.Eventually(t, func() bool {
		req, _ := http.NewRequest("GET", s.URL+"/v1/agents", nil)
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := client.Do(req)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var out struct {
			Agents []struct{ Name, State string }
		}
		if json.NewDecoder(resp.Body).Decode(&out) != nil {
			return false
		}
		return len(out.Agents) == 1 && out.Agents[0].Name == "tls-agent" && out.Agents[0].State == "active"
	}, 20*time.Second, 100*time.Millisecond, "agent registered over https")
}

func TestAgentRefusesPlainHTTPOffLoopback(t *testing.T) {
	t.Parallel()
	env := []string{"AX_SERVER=http://192.0.2.10:8080", "AX_AGENT_KEY=ax_some_agent_key_0123456789"}
	p := proctest.Start(t, proctest.Binary(t, "ax-agent"), env)
	require.Error(t, p.Wait(10*time.Second), "ax-agent must exit at once")
	require.Contains(t, p.Output(), "refusing plain http://")

	// Told otherwise, it starts (and keeps trying to reach the server).
	p = proctest.Start(t, proctest.Binary(t, "ax-agent"), append(env, "AX_AGENT_INSECURE_HTTP=true"))
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	<-ctx.Done()
	require.True(t, p.Running(), "output: %s", p.Output())
}

func TestMetricsKeyRequired(t *testing.T) {
	t.Parallel()
	s := e2ekit.StartServerOn(t, dbtest.NewURL(t), "AX_METRICS_AUTH=true")
	get := func(path, key string) int {
		req, _ := http.NewRequest("GET", s.URL+path, nil)
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	require.Equal(t, http.StatusUnauthorized, get("/metrics", ""))
	require.Equal(t, http.StatusForbidden, get("/metrics", keyWithScope(t, s, "agent")))
	require.Equal(t, http.StatusOK, get("/metrics", keyWithScope(t, s, "read")))
	require.Equal(t, http.StatusOK, get("/readyz", ""), "probes stay open")
	require.Equal(t, http.StatusOK, get("/healthz", ""))

	// By default /metrics is open, as Prometheus expects.
	open := e2ekit.StartServer(t)
	resp, err := http.Get(open.URL + "/metrics")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
}

func TestLongPollOutlivesReadTimeout(t *testing.T) {
	t.Parallel()
	s := e2ekit.StartServerOn(t, dbtest.NewURL(t), "AX_READ_TIMEOUT=1s")
	status, reg := s.API(t, "POST", "/v1/agents/register", map[string]any{"name": "poller", "capacity": 1})
	require.Equal(t, http.StatusCreated, status, reg)
	token := reg["token"].(string)

	// A lease request waits 3 s for work: past the 1 s read timeout and
	// the read deadlines of its body; it must still get its (empty) answer.
	began := time.Now()
	req, _ := http.NewRequest("POST", s.URL+"/v1/agents/"+reg["agent_id"].(string)+"/lease",
		strings.NewReader(`{"max":1,"wait_seconds":3}`))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var out struct{ Tasks []any }
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	require.Empty(t, out.Tasks)
	require.GreaterOrEqual(t, time.Since(began), 3*time.Second, "it waited")
}
