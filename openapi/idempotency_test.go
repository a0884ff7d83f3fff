package openapi_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestIdempotentReplayWithholdsSecrets: a retry with the Idempotency-Key of
// a call whose answer showed a secret (a job's whsec_ signing secret when
// made, rotated or submitted as a run; an agent's token) gets the same
// answer with the secret empty and Ax-Secret-Withheld naming the field;
// the idempotency table holds no secret either. The secrets still work.
func TestIdempotentReplayWithholdsSecrets(t *testing.T) {
	t.Parallel()
	env := setup(t)
	agentKey := env.key("agent")
	post := func(path, bearer, key string, body any) *response {
		req, err := http.NewRequest("POST", env.url+path, strings.NewReader(jsonOf(body)))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+bearer)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", key)
		return env.do(req)
	}
	var secrets []string
	check := func(name, path, bearer string, body any, status int, field string, secretOf func(map[string]any) string) map[string]any {
		t.Helper()
		first := post(path, bearer, "key-"+name, body).must(t, status)
		secret := secretOf(first)
		require.NotEmpty(t, secret, name)
		secrets = append(secrets, secret)
		again := post(path, bearer, "key-"+name, body)
		replayed := again.must(t, status)
		require.NotContains(t, string(again.raw), secret, "%s: a replay does not hand the secret out again", name)
		require.Equal(t, "", secretOf(replayed), name)
		require.Equal(t, field, again.header.Get("Ax-Secret-Withheld"), name)
		return first
	}

	job := check("create-job", "/v1/jobs", env.admin, cronJob("signed", "0 0 * * *", "UTC"), http.StatusCreated,
		"signing_secret", func(b map[string]any) string { s, _ := b["signing_secret"].(string); return s })
	require.True(t, strings.HasPrefix(secrets[0], "whsec_"))
	check("rotate", "/v1/jobs/"+job["id"].(string)+"/signing-secret/rotate", env.admin, map[string]any{}, http.StatusOK,
		"signing_secret", func(b map[string]any) string { s, _ := b["signing_secret"].(string); return s })
	check("run", "/v1/runs", env.admin, map[string]any{"executor": map[string]any{"kind": "shell", "command": "true"}},
		http.StatusAccepted, "signing_secret", func(b map[string]any) string { s, _ := b["signing_secret"].(string); return s })
	agent := check("register", "/v1/agents/register", agentKey, map[string]any{"name": "a", "capacity": 1, "version": "test"},
		http.StatusCreated, "token", func(b map[string]any) string { s, _ := b["token"].(string); return s })

	rows, err := env.pool.Query(context.Background(),
		`SELECT key, coalesce(response_body::text, '') || response_headers::text FROM ax.idempotency_key`)
	require.NoError(t, err)
	stored := 0
	for rows.Next() {
		var key, row string
		require.NoError(t, rows.Scan(&key, &row))
		stored++
		for _, secret := range secrets {
			require.NotContains(t, row, secret, "the record of %s holds no secret", key)
		}
		require.NotContains(t, row, "whsec_", key)
	}
	require.NoError(t, rows.Err())
	require.Equal(t, 4, stored)

	// The token shown the first time is the agent's.
	r := env.call("POST", "/v1/agents/"+agent["agent_id"].(string)+"/heartbeat", agent["token"].(string),
		map[string]any{"tasks": []any{}, "running": 0, "ready": true})
	r.must(t, http.StatusOK)
}
