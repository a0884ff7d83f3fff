package openapi_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/openapi"
	"github.com/ax-scheduler/ax/queue"
)

func holidays() map[string]any {
	return map[string]any{"name": "cn-holidays", "timezone": "Asia/Shanghai", "entries": []any{
		map[string]any{"date": "2026-12-25"},
		map[string]any{"from": "2026-10-01", "to": "2026-10-07"},
		map[string]any{"yearly": "01-01"},
	}}
}

// TestCalendarCRUD: create, get, list, replace (version grows) and delete
// a calendar; a read key reads it and cannot change it, a key limited to
// groups cannot change it either.
func TestCalendarCRUD(t *testing.T) {
	t.Parallel()
	env := setup(t)
	read := env.key(openapi.ScopeRead)
	submit := env.key(openapi.ScopeSubmit)

	r := env.call(http.MethodPost, "/v1/calendars", submit, holidays())
	body := r.must(t, http.StatusCreated)
	require.Equal(t, "/v1/calendars/cn-holidays", r.header.Get("Location"))
	require.EqualValues(t, 1, body["version"])
	require.Len(t, body["entries"], 3)
	env.call(http.MethodPost, "/v1/calendars", submit, holidays()).must(t, http.StatusConflict)

	got := env.call(http.MethodGet, "/v1/calendars/cn-holidays", read, nil).must(t, http.StatusOK)
	require.Equal(t, "Asia/Shanghai", got["timezone"])
	list := env.call(http.MethodGet, "/v1/calendars", read, nil).must(t, http.StatusOK)
	require.Len(t, list["calendars"], 1)

	env.call(http.MethodPost, "/v1/calendars", read, map[string]any{"name": "x", "entries": []any{}}).must(t, http.StatusForbidden)
	limited := env.limitedKey(queue.KeyLimits{Groups: []string{"billing"}}, openapi.ScopeSubmit)
	env.call(http.MethodDelete, "/v1/calendars/cn-holidays", limited, nil).must(t, http.StatusForbidden)

	got["entries"] = []any{map[string]any{"date": "2026-12-26"}}
	updated := env.call(http.MethodPut, "/v1/calendars/cn-holidays", submit, got).must(t, http.StatusOK)
	require.EqualValues(t, 2, updated["version"])
	require.Len(t, updated["entries"], 1)
	env.call(http.MethodPut, "/v1/calendars/nope", submit, map[string]any{"name": "nope", "entries": []any{}}).must(t, http.StatusNotFound)

	env.call(http.MethodDelete, "/v1/calendars/cn-holidays", env.admin, nil).must(t, http.StatusNoContent)
	env.call(http.MethodGet, "/v1/calendars/cn-holidays", read, nil).must(t, http.StatusNotFound)
	env.call(http.MethodDelete, "/v1/calendars/cn-holidays", env.admin, nil).must(t, http.StatusNotFound)
}

// TestCalendarValidation: every bad field is named, and nothing is stored.
func TestCalendarValidation(t *testing.T) {
	t.Parallel()
	env := setup(t)
	tooMany := make([]any, 1001)
	for i := range tooMany {
		tooMany[i] = map[string]any{"date": "2026-12-25"}
	}
	cases := map[string]struct {
		body     map[string]any
		location string
	}{
		"bad name":       {map[string]any{"name": "CN Holidays", "entries": []any{}}, "body.name"},
		"bad timezone":   {map[string]any{"name": "a", "timezone": "Mars/Olympus", "entries": []any{}}, "body.timezone"},
		"bad date":       {map[string]any{"name": "a", "entries": []any{map[string]any{"date": "2026-02-30"}}}, "body.entries[0].date"},
		"bad yearly":     {map[string]any{"name": "a", "entries": []any{map[string]any{"date": "2026-01-01"}, map[string]any{"yearly": "13-01"}}}, "body.entries[1].yearly"},
		"range reversed": {map[string]any{"name": "a", "entries": []any{map[string]any{"from": "2026-10-07", "to": "2026-10-01"}}}, "body.entries[0].to"},
		"range half":     {map[string]any{"name": "a", "entries": []any{map[string]any{"from": "2026-10-07"}}}, "body.entries[0].to"},
		"two forms":      {map[string]any{"name": "a", "entries": []any{map[string]any{"date": "2026-10-07", "yearly": "10-07"}}}, "body.entries[0]"},
		"no form":        {map[string]any{"name": "a", "entries": []any{map[string]any{}}}, "body.entries[0]"},
		"too many":       {map[string]any{"name": "a", "entries": tooMany}, "body.entries"},
		"unknown field":  {map[string]any{"name": "a", "entries": []any{map[string]any{"day": "2026-10-07"}}}, "body.entries[0].day"},
	}
	for name, c := range cases {
		r := env.call(http.MethodPost, "/v1/calendars", env.admin, c.body)
		require.Equal(t, http.StatusUnprocessableEntity, r.status, "%s: %s", name, r.raw)
		require.Contains(t, r.errorLocations(), c.location, "%s: %s", name, r.raw)
	}
	list := env.call(http.MethodGet, "/v1/calendars", env.admin, nil).must(t, http.StatusOK)
	require.Empty(t, list["calendars"], "bad input stores nothing")

	env.call(http.MethodPost, "/v1/calendars", env.admin, holidays()).must(t, http.StatusCreated)
	r := env.call(http.MethodPut, "/v1/calendars/cn-holidays", env.admin, map[string]any{"name": "other", "entries": []any{}})
	require.Equal(t, http.StatusUnprocessableEntity, r.status, string(r.raw))
	require.Contains(t, r.errorLocations(), "body.name")
}

// TestJobExclude: a job names calendars in exclude; an unknown one is 422
// naming its index, a malformed or repeated one too; a calendar a job
// excludes cannot be deleted (409 naming the job) until the job lets go.
func TestJobExclude(t *testing.T) {
	t.Parallel()
	env := setup(t)
	env.call(http.MethodPost, "/v1/calendars", env.admin, holidays()).must(t, http.StatusCreated)

	job := cronJob("nightly", "0 0 2 * * *", "Asia/Shanghai")
	job["exclude"] = []any{"cn-holidays", "missing"}
	r := env.call(http.MethodPost, "/v1/jobs", env.admin, job)
	require.Equal(t, http.StatusUnprocessableEntity, r.status, string(r.raw))
	require.Equal(t, []string{"body.exclude[1]"}, r.errorLocations())

	job["exclude"] = []any{"cn-holidays", "Bad Name", "cn-holidays"}
	r = env.call(http.MethodPost, "/v1/jobs", env.admin, job)
	require.Equal(t, http.StatusUnprocessableEntity, r.status, string(r.raw))
	require.ElementsMatch(t, []string{"body.exclude[1]", "body.exclude[2]"}, r.errorLocations())

	job["exclude"] = []any{"cn-holidays"}
	created := env.call(http.MethodPost, "/v1/jobs", env.admin, job).must(t, http.StatusCreated)
	require.Equal(t, []any{"cn-holidays"}, created["exclude"])
	id := created["id"].(string)

	r = env.call(http.MethodDelete, "/v1/calendars/cn-holidays", env.admin, nil)
	require.Equal(t, http.StatusConflict, r.status, string(r.raw))
	require.Contains(t, string(r.raw), "default/nightly")

	created["exclude"] = []any{"missing"}
	r = env.call(http.MethodPut, "/v1/jobs/"+id, env.admin, created)
	require.Equal(t, http.StatusUnprocessableEntity, r.status, string(r.raw))
	require.Equal(t, []string{"body.exclude[0]"}, r.errorLocations())

	created["exclude"] = []any{}
	env.call(http.MethodPut, "/v1/jobs/"+id, env.admin, created).must(t, http.StatusOK)
	env.call(http.MethodDelete, "/v1/calendars/cn-holidays", env.admin, nil).must(t, http.StatusNoContent)

	tooMany := make([]any, 17)
	for i := range tooMany {
		tooMany[i] = fmt.Sprintf("c%d", i)
	}
	job["exclude"] = tooMany
	r = env.call(http.MethodPost, "/v1/jobs", env.admin, job)
	require.Equal(t, http.StatusUnprocessableEntity, r.status, string(r.raw))
	require.True(t, strings.Contains(strings.Join(r.errorLocations(), ","), "body.exclude"), string(r.raw))
}

// TestCronPreviewExclude: a preview with exclude lists the next ticks
// that fire and, apart, the ones a calendar passes over; a missing
// calendar is 422 naming it.
func TestCronPreviewExclude(t *testing.T) {
	t.Parallel()
	env := setup(t)
	env.call(http.MethodPost, "/v1/calendars", env.admin, holidays()).must(t, http.StatusCreated)
	// 18:00 UTC is 02:00 the next day in Shanghai: the tick of the 24th
	// falls on the 25th there.
	body := map[string]any{"cron": "0 0 18 * * *", "timezone": "UTC", "count": 2,
		"after": "2026-12-23T12:00:00Z", "exclude": []any{"cn-holidays"}}
	got := env.call(http.MethodPost, "/v1/cron/preview", env.key(openapi.ScopeRead), body).must(t, http.StatusOK)
	require.Equal(t, []any{"2026-12-23T18:00:00Z", "2026-12-25T18:00:00Z"}, got["next"])
	excluded := got["excluded"].([]any)
	require.Len(t, excluded, 1)
	require.Equal(t, "2026-12-24T18:00:00Z", excluded[0].(map[string]any)["utc"])
	require.Equal(t, "cn-holidays", excluded[0].(map[string]any)["excluded_by"])

	body["exclude"] = []any{"cn-holidays", "missing"}
	r := env.call(http.MethodPost, "/v1/cron/preview", env.admin, body)
	require.Equal(t, http.StatusUnprocessableEntity, r.status, string(r.raw))
	require.Equal(t, []string{"body.exclude[1]"}, r.errorLocations())
}
