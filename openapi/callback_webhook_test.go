package openapi_test

import (
	"reflect"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/openapi"
	"github.com/ax-scheduler/ax/queue/delivery"
)

// jsonTags lists a struct's JSON field tags, nested structs' under their
// field's name: what the body looks like on the wire.
func jsonTags(t reflect.Type, prefix string) []string {
	var out []string
	for f := range t.Fields() {
		tag := prefix + f.Tag.Get("json")
		out = append(out, tag)
		if f.Type.Kind() == reflect.Struct && f.Type.PkgPath() != "time" {
			out = append(out, jsonTags(f.Type, tag+".")...)
		}
	}
	return out
}

// The callback the spec documents is the one delivery sends: the same
// fields, each required (no omitempty) or not alike.
func TestCallbackSpecMatchesPayload(t *testing.T) {
	t.Parallel()
	require.Equal(t, jsonTags(reflect.TypeFor[delivery.CallbackPayload](), ""), jsonTags(reflect.TypeFor[openapi.CallbackBody](), ""))
	require.Equal(t, jsonTags(reflect.TypeFor[delivery.CallbackShard](), ""), jsonTags(reflect.TypeFor[openapi.CallbackShard](), ""))

	v31, v30, err := openapi.Spec()
	require.NoError(t, err)
	require.Contains(t, string(v31), "\nwebhooks:\n  execution.ended:\n")
	require.NotContains(t, string(v30), "\nwebhooks:", "OpenAPI 3.0 has no webhooks")
}
