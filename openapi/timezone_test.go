package openapi_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/queue/cron"
)

// A zone spelled with path noise is stored canonical, so Postgres can use
// it in AT TIME ZONE; a relative or machine-dependent one is refused.
func TestJobTimezoneStoredCanonical(t *testing.T) {
	t.Parallel()
	env := setup(t)
	job := env.call("POST", "/v1/jobs", env.admin, cronJob("tz", "0 0 8 * * ?", "Europe//./Paris")).must(t, http.StatusCreated)
	require.Equal(t, "Europe/Paris", job["trigger"].(map[string]any)["timezone"])

	var stored string
	require.NoError(t, env.pool.QueryRow(context.Background(),
		"SELECT timezone FROM ax.job WHERE id = $1 AND (now() AT TIME ZONE timezone) IS NOT NULL", job["id"]).Scan(&stored))
	require.Equal(t, "Europe/Paris", stored)

	for _, bad := range []string{"Europe/../Europe/Paris", "localtime", "posix/Europe/Paris", "Europe\\Paris"} {
		resp := env.call("POST", "/v1/jobs", env.admin, cronJob("tz-bad", "0 0 8 * * ?", bad))
		resp.must(t, http.StatusUnprocessableEntity)
		require.Contains(t, resp.errorLocations(), "body.trigger.timezone", bad)
	}
	require.Equal(t, 1, env.countJobs())
}

// Many spellings of a few zones do not grow the zone cache: it holds
// canonical names only.
func TestZoneCacheBoundedUnderSpellings(t *testing.T) {
	t.Parallel()
	env := setup(t)
	before := cron.CachedZoneCount()
	sent := 0
	for _, zone := range [][2]string{{"Europe", "Paris"}, {"America", "Santiago"}} {
		for slashes := 1; slashes <= 35; slashes++ {
			for dots := 0; dots <= 24; dots++ {
				name := zone[0] + strings.Repeat("/", slashes) + strings.Repeat("./", dots) + zone[1]
				body := map[string]any{"cron": "0 0 8 * * ?", "timezone": name, "count": 1}
				out := env.call("POST", "/v1/cron/preview", env.admin, body).must(t, http.StatusOK)
				require.Equal(t, zone[0]+"/"+zone[1], out["timezone"], name)
				sent++
			}
		}
	}
	require.Equal(t, 1750, sent)
	// Other tests of the package load a few zones meanwhile; the spellings
	// add at most the two canonical names.
	grown := cron.CachedZoneCount() - before
	require.LessOrEqual(t, grown, 20, "the cache grew by %d entries for %d spellings of 2 zones", grown, sent)
	require.LessOrEqual(t, cron.CachedZoneCount(), cron.MaxCachedZones)
}
