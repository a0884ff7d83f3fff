package openapi_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/openapi"
)

func TestInternalErrorsKeepSQLInside(t *testing.T) {
	t.Parallel()
	env := setup(t)
	env.call("GET", "/v1/classes", env.admin, nil).must(t, http.StatusOK)
	_, err := env.pool.Exec(context.Background(), `ALTER TABLE ax.rate_class RENAME TO rate_class_gone`)
	require.NoError(t, err)

	res := env.call("GET", "/v1/classes", env.admin, nil)
	body := res.must(t, http.StatusInternalServerError)
	require.Equal(t, "application/problem+json", res.header.Get("Content-Type"))
	for _, leak := range []string{"rate_class", "relation", "SQLSTATE", "does not exist"} {
		require.NotContains(t, string(res.raw), leak)
	}
	require.Equal(t, "internal error: the server logged the details", body["detail"])
	require.Nil(t, body["errors"])
}

func TestReadyzKeepsErrorsInside(t *testing.T) {
	t.Parallel()
	env := setupConfig(t, func(c *openapiConfig) {
		c.Ready = func(context.Context) error {
			return fmt.Errorf("database unreachable: %w", errors.New("dial tcp 10.1.2.3:5432: connect: connection refused"))
		}
	})
	res := env.call("GET", "/readyz", "", nil)
	body := res.must(t, http.StatusServiceUnavailable)
	require.Equal(t, "unavailable", body["status"])
	require.NotContains(t, string(res.raw), "10.1.2.3")
	require.NotContains(t, string(res.raw), "dial tcp")
}

func TestReadyzShowsTheReasonOfNotReadyError(t *testing.T) {
	t.Parallel()
	env := setupConfig(t, func(c *openapiConfig) {
		c.Ready = func(context.Context) error {
			return &openapi.NotReadyError{Reason: "database unreachable", Err: errors.New("dial tcp 10.1.2.3:5432")}
		}
	})
	res := env.call("GET", "/readyz", "", nil)
	body := res.must(t, http.StatusServiceUnavailable)
	require.Equal(t, "database unreachable", body["reason"])
	require.NotContains(t, string(res.raw), "10.1.2.3")
}

func TestPatchIsIdempotentAndScoped(t *testing.T) {
	t.Parallel()
	env := setup(t)
	id := env.call("POST", "/v1/jobs", env.admin, cronJob("patched", "0 0 * * * *", "UTC")).must(t, http.StatusCreated)["id"].(string)
	patch := func(key, idem, body string) *response {
		req, err := http.NewRequest("PATCH", env.url+"/v1/jobs/"+id, stringsReader(body))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/merge-patch+json")
		req.Header.Set("Authorization", "Bearer "+key)
		if idem != "" {
			req.Header.Set("Idempotency-Key", idem)
		}
		return env.do(req)
	}
	first := patch(env.admin, "k1", `{"owner":"a"}`).must(t, http.StatusOK)
	require.Equal(t, "a", first["owner"])
	again := patch(env.admin, "k1", `{"owner":"a"}`)
	again.must(t, http.StatusOK)
	require.Equal(t, "true", again.header.Get("Idempotent-Replayed"))
	patch(env.admin, "k1", `{"owner":"b"}`).must(t, http.StatusUnprocessableEntity)

	patch(env.key(openapi.ScopeRead), "", `{"owner":"c"}`).must(t, http.StatusForbidden)
	patch(env.key(openapi.ScopeAgent), "", `{"owner":"c"}`).must(t, http.StatusForbidden)
	patch("", "", `{"owner":"c"}`).must(t, http.StatusUnauthorized)
	require.Equal(t, "a", env.call("GET", "/v1/jobs/"+id, env.admin, nil).must(t, http.StatusOK)["owner"])
}
