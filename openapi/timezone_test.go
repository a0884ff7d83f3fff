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
	// Every other slash count and every eighth ./ count, up to the longest
	// spelling: 144 spellings. Any number past the 20 allowed below shows
	// a cache keyed by spelling; 1750 (every count) cost seconds of CPU
	// under -race and showed nothing more.
	for _, zone := range [][2]string{{"Europe", "Paris"}, {"America", "Santiago"}} {
		for slashes := 1; slashes <= 35; slashes += 2 {
			for dots := 0; dots <= 24; dots += 8 {
				name := zone[0] + strings.Repeat("/", slashes) + strings.Repeat("./", dots) + zone[1]
				body := map[string]any{"cron": "0 0 8 * * ?", "timezone": name, "count": 1}
				out := env.call("POST", "/v1/cron/preview", env.admin, body).must(t, http.StatusOK)
				require.Equal(t, zone[0]+"/"+zone[1], out["timezone"], name)
				sent++
			}
		}
	}
	require.Equal(t, 144, sent)
	// Other tests of the package load a few zones meanwhile; the spellings
	// add at most the two canonical names.
	grown := cron.CachedZoneCount() - before
	require.LessOrEqual(t, grown, 20, "the cache grew by %d entries for %d spellings of 2 zones", grown, sent)
	require.LessOrEqual(t, cron.CachedZoneCount(), cron.MaxCachedZones)
}

// The preview gives each fire its wall time, offset and zone abbreviation
// in the job's timezone: 08:00 in London is 08:00 UTC in winter (GMT) and
// 07:00 UTC in summer (BST), and the reader sees 08:00 both times.
func TestCronPreviewShowsLocalWallTime(t *testing.T) {
	t.Parallel()
	env := setup(t)
	out := env.call("POST", "/v1/cron/preview", env.admin, map[string]any{
		"cron": "0 0 8 * * ?", "timezone": "Europe/London", "count": 2, "after": "2026-03-28T12:00:00Z",
	}).must(t, http.StatusOK)
	fires := out["fires"].([]any)
	require.Len(t, fires, 2)
	want := []map[string]any{
		{"utc": "2026-03-29T07:00:00Z", "local": "2026-03-29T08:00:00+01:00", "offset": "+01:00", "zone": "BST"},
		{"utc": "2026-03-30T07:00:00Z", "local": "2026-03-30T08:00:00+01:00", "offset": "+01:00", "zone": "BST"},
	}
	for i, w := range want {
		require.Equal(t, w, fires[i], i)
	}
	out = env.call("POST", "/v1/cron/preview", env.admin, map[string]any{
		"cron": "0 0 8 * * ?", "timezone": "Europe/London", "count": 1, "after": "2026-03-27T12:00:00Z",
	}).must(t, http.StatusOK)
	require.Equal(t, map[string]any{"utc": "2026-03-28T08:00:00Z", "local": "2026-03-28T08:00:00+00:00",
		"offset": "+00:00", "zone": "GMT"}, out["fires"].([]any)[0], "winter time: UTC itself")
	require.Equal(t, []any{"2026-03-28T08:00:00Z"}, out["next"], "next keeps its UTC times")
}
