package queue

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/queue/axtype"
)

func TestRedactURL(t *testing.T) {
	for raw, want := range map[string]string{
		"https://h.example/cb":                      "https://h.example/cb",
		"https://h.example/cb?token=s3cret&x=1&x=2": "https://h.example/cb?token=ax-redacted&x=ax-redacted&x=ax-redacted",
		"https://u:p@h.example/a?debug":             "https://ax-redacted:ax-redacted@h.example/a?debug",
		"https://tok@h.example/a#frag":              "https://ax-redacted@h.example/a#frag",
		"https://h.example/a?b=1&a=2":               "https://h.example/a?b=ax-redacted&a=ax-redacted",
	} {
		require.Equal(t, want, RedactURL(raw), raw)
	}
}

// What is shown, sent back, gives the stored job again; a placeholder
// with nothing stored behind it is refused, naming the field.
func TestRestoreWriteOnly(t *testing.T) {
	stored := &axtype.Job{CallbackURL: "https://cb.example/hook?token=s3cret&a=1&a=2",
		Executor: axtype.ExecutorConfig{URL: "https://u:p%40ss@api.example/run?sig=abc",
			Headers: map[string]string{"Authorization": "Bearer xyz", "X-Team": "billing"}}}
	shown := RedactJob(stored)
	require.NotContains(t, shown.CallbackURL+shown.Executor.URL, "s3cret")
	require.Equal(t, map[string]string{"Authorization": Redacted, "X-Team": Redacted}, shown.Executor.Headers)
	require.Equal(t, "Bearer xyz", stored.Executor.Headers["Authorization"], "the stored job is not changed")

	back := *shown
	back.Executor.Headers = map[string]string{"authorization": Redacted, "X-Team": "ops", "X-New": "1"}
	require.NoError(t, RestoreWriteOnly(&back, stored))
	require.Equal(t, stored.CallbackURL, back.CallbackURL)
	require.Equal(t, stored.Executor.URL, back.Executor.URL)
	require.Equal(t, map[string]string{"authorization": "Bearer xyz", "X-Team": "ops", "X-New": "1"}, back.Executor.Headers)

	// A changed URL keeps the placeholders' values by name.
	changed := axtype.Job{CallbackURL: "https://cb2.example/new?a=ax-redacted&token=ax-redacted&extra=9"}
	require.NoError(t, RestoreWriteOnly(&changed, stored))
	require.Equal(t, "https://cb2.example/new?a=1&token=s3cret&extra=9", changed.CallbackURL)

	for field, j := range map[string]*axtype.Job{
		"executor.headers.X-Other": {Executor: axtype.ExecutorConfig{Headers: map[string]string{"X-Other": Redacted}}},
		"callback.url":             {CallbackURL: "https://cb.example/hook?nope=ax-redacted"},
		"executor.url":             {Executor: axtype.ExecutorConfig{URL: "https://ax-redacted@api.example/"}},
	} {
		err := RestoreWriteOnly(j, &axtype.Job{})
		var we *WriteOnlyError
		require.ErrorAs(t, err, &we, field)
		require.Equal(t, field, we.Field)
		require.Error(t, RestoreWriteOnly(j, nil), "a new job has nothing stored")
	}
}
