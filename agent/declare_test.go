package agent

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestJobSpecWire(t *testing.T) {
	t.Parallel()
	spec := JobSpec{Name: "nightly", Group: "billing", Cron: "0 0 2 * * ?", Timezone: "Europe/Paris", Shards: 2,
		ShardParams: []string{"a", "b"}, Timeout: 90 * time.Second, Priority: 5, Route: "consistent_hash",
		RouteKey: "{{.shard.param}}", RateClass: "batch", Callback: "https://example.com/cb",
		CallbackOrdered: true, Retry: &RetryPolicy{MaxAttempts: 3, Backoff: 2 * time.Second}, Params: json.RawMessage(`{"n":12345678901234567890}`)}
	raw, err := spec.wireJob(map[string]string{"pool": "billing"})
	require.NoError(t, err)
	require.JSONEq(t, `{"name":"nightly","group":"billing",
		"executor":{"kind":"handler","handler":"nightly"},
		"trigger":{"kind":"cron","cron":"0 0 2 * * ?","timezone":"Europe/Paris"},
		"shards":{"count":2,"params":["a","b"]},"timeout_seconds":90,"priority":5,
		"retry":{"max_attempts":3,"backoff_seconds":2},
		"route":{"strategy":"consistent_hash","key":"{{.shard.param}}"},"rate_limit_class":"batch",
		"callback":{"url":"https://example.com/cb","ordered":true},"target":{"labels":{"pool":"billing"}},
		"params":{"n":12345678901234567890}}`, string(raw))
	require.Contains(t, string(raw), "12345678901234567890", "params are copied, not decoded")

	every, err := JobSpec{Name: "tick", Handler: "h", Every: time.Minute, Labels: map[string]string{}}.wireJob(map[string]string{"pool": "x"})
	require.NoError(t, err)
	require.JSONEq(t, `{"name":"tick","executor":{"kind":"handler","handler":"h"},
		"trigger":{"kind":"interval","interval_seconds":60}}`, string(every), "empty Labels: any agent")
	manual, err := JobSpec{Name: "by-hand"}.wireJob(nil)
	require.NoError(t, err)
	require.Contains(t, string(manual), `"trigger":{"kind":"manual"}`)
}

func TestCheckJobs(t *testing.T) {
	t.Parallel()
	require.NoError(t, checkJobs([]JobSpec{{Name: "a", Every: time.Second}, {Name: "a", Group: "other"}}))
	err := checkJobs([]JobSpec{{Name: ""}, {Name: "a"}, {Name: "a", Group: "default"},
		{Name: "b", Cron: "* * * * *", Every: time.Second}, {Name: "c", Every: 1500 * time.Millisecond}})
	require.ErrorContains(t, err, "jobs[0]: no name")
	require.ErrorContains(t, err, "jobs[2]: default/a declared twice")
	require.ErrorContains(t, err, "jobs[3] (b): give one of Cron, Every, At")
	require.ErrorContains(t, err, "jobs[4] (c): durations are whole seconds, not 1.5s")

	_, err = New(Config{URL: "http://127.0.0.1:1", Key: "k", Server: &struct{ Server }{}, Jobs: []JobSpec{{Name: "a"}}})
	require.ErrorContains(t, err, "no Declarer")
}
