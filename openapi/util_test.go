package openapi_test

import (
	"encoding/json"
	"io"
	"strings"
)

func stringsReader(s string) io.Reader { return strings.NewReader(s) }

func jsonOf(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}
