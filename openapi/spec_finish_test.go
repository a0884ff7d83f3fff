package openapi

import (
	"testing"

	"github.com/danielgtaylor/huma/v2"
	"github.com/stretchr/testify/require"
)

// TestSpecComplete: every operation and webhook has a description and an
// example on each body, every tag a description, and what needs a key
// says which scope (the linters of `make lint-spec` read the same).
func TestSpecComplete(t *testing.T) {
	t.Parallel()
	_, api := New(Config{})
	oa := api.OpenAPI()
	require.Empty(t, checkSpecComplete(oa))
	require.NotEmpty(t, oa.Servers)
	eachOperation(oa, func(op *huma.Operation) {
		require.NotNil(t, op.Security, op.OperationID)
		for _, req := range op.Security {
			for scheme, scopes := range req {
				require.Empty(t, scopes, "%s: bearer takes no scopes in OpenAPI", op.OperationID)
				require.Equal(t, securitySchemeName, scheme)
				require.Contains(t, []string{ScopeAdmin, ScopeSubmit, ScopeRead, ScopeAgent},
					op.Extensions[scopeExtension], op.OperationID)
			}
		}
	})
}

func TestExampleOfKeepsBounds(t *testing.T) {
	t.Parallel()
	minLen, maxLen, minimum := 12, 3, 5.0
	oa := &huma.OpenAPI{Components: &huma.Components{Schemas: huma.NewMapRegistry("#/components/schemas/", huma.DefaultSchemaNamer)}}
	require.Equal(t, "examplexxxxx", exampleOf(oa, &huma.Schema{Type: "string", MinLength: &minLen}, exampleRequest, 0))
	require.Equal(t, "exa", exampleOf(oa, &huma.Schema{Type: "string", MaxLength: &maxLen}, exampleRequest, 0))
	require.Equal(t, 5, exampleOf(oa, &huma.Schema{Type: "integer", Minimum: &minimum}, exampleRequest, 0))
	obj := &huma.Schema{Type: "object", Required: []string{"id"}, Properties: map[string]*huma.Schema{
		"id":     {Type: "string", Format: "uuid", ReadOnly: true},
		"name":   {Type: "string"},
		"secret": {Type: "string", WriteOnly: true, Examples: []any{"whsec_x"}},
	}}
	require.Equal(t, map[string]any{"secret": "whsec_x"}, exampleOf(oa, obj, exampleRequest, 0),
		"a request leaves read-only and optional fields without examples out")
	require.Equal(t, map[string]any{"id": "0190a6c4-8c1e-7b3a-9f00-3c2d1e0f4a5b"}, exampleOf(oa, obj, exampleResponse, 0))
}

// The run a trigger answers with is a pending manual run, not whatever
// the Execution type's field examples say.
func TestTriggerExampleIsAPendingManualRun(t *testing.T) {
	t.Parallel()
	_, api := New(Config{})
	op := api.OpenAPI().Paths["/v1/jobs/{id}/trigger"].Post
	ex, ok := op.Responses["202"].Content["application/json"].Example.(map[string]any)
	require.True(t, ok)
	require.Equal(t, "pending", ex["state"])
	require.Equal(t, "manual", ex["cause"])
	require.NotContains(t, ex, "error_codes")
}
