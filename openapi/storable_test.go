package openapi

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// unstorable names the field as huma does, telling array indexes from
// keys that look like them by the document, unescaping ~0 and ~1.
func TestUnstorableNamesTheField(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ body, location string }{
		{`{"params":{"x":"\ud800"}}`, "body.params.x"},
		{`{"runs":[{},{"params":{"3":["a","\udc00"]}}]}`, "body.runs[1].params.3[1]"},
		{`{"a~b":{"c/d":"\u0000"}}`, "body.a~b.c/d"},
		{`{"s":"x\\y\"","t":{"u":1e99999999}}`, "body.t.u"},
		{`[1,[2,"\u0000"]]`, "body[1][1]"},
		{`"\u0000"`, "body"},
		{`{"a":` + "\"\x01\"}", "body"},
	} {
		d := unstorable([]byte(tc.body))
		require.NotNil(t, d, tc.body)
		require.Equal(t, tc.location, d.Location, tc.body)
	}
	require.Nil(t, unstorable([]byte(`{"x":"\ud83d\ude00","n":1.5e300,"s":"\\u0000"}`)))
	d := unstorable([]byte(`{"a": `))
	require.Equal(t, "body", d.Location)
	require.Contains(t, d.Message, "is not valid JSON")
}
