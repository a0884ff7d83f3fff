package openapi

import (
	"encoding/json"
	"testing"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

// TestSpecDefaultsAreFillDefaults: every default the spec documents for a
// job (its default: tags) is what axtype.Job.FillDefaults, the defaults' one
// owner, fills into a job that leaves the field out. TestSpecIsCurrent
// ties the registry read here to the committed openapi.yaml.
func TestSpecDefaultsAreFillDefaults(t *testing.T) {
	t.Parallel()
	_, api := New(Config{})
	schemas := api.OpenAPI().Components.Schemas

	// Kind http, so the executor's method default counts too.
	bare := &Job{Name: "bare", Trigger: &JobTrigger{Kind: "manual"},
		Executor: JobExecutor{Kind: "http", URL: "https://example.com/run"}}
	def, err := jobToDB(bare, uuid.Nil)
	require.NoError(t, err)
	shown, err := jobFromDB(def)
	require.NoError(t, err)
	raw, err := json.Marshal(shown)
	require.NoError(t, err)
	var filled map[string]any
	require.NoError(t, json.Unmarshal(raw, &filled))

	checked := 0
	var walk func(s *huma.Schema, path string, value any)
	walk = func(s *huma.Schema, path string, value any) {
		if s.Ref != "" {
			s = schemas.SchemaFromRef(s.Ref)
		}
		if s.Default != nil {
			checked++
			want, err := json.Marshal(s.Default)
			require.NoError(t, err)
			got, err := json.Marshal(value)
			require.NoError(t, err)
			require.JSONEq(t, string(want), string(got), "the spec's default of %s is not what FillDefaults fills", path)
		}
		object, _ := value.(map[string]any)
		for name, property := range s.Properties {
			walk(property, path+"."+name, object[name])
		}
	}
	walk(schemas.Map()["Job"], "job", filled)
	// group, timezone, method, strategy, shard count, three of retry, three
	// of misfire, concurrency policy and degrade action at least.
	require.GreaterOrEqual(t, checked, 13, "the walk reached the job's documented defaults")
}
