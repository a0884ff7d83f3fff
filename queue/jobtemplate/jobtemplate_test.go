package jobtemplate_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/queue/jobtemplate"
)

func TestJobTemplateSubset(t *testing.T) {
	t.Parallel()
	allowed := []string{
		"plain",
		"customer_id={{.params.customer_id}}",
		"{{.shard.param}}-{{.job.name}}",
		`{{if eq .params.kind "a"}}A{{else if .params.kind}}B{{else}}C{{end}}`,
		`{{with .params.region}}{{.}}{{end}}`,
		`{{if and (eq .shard.index 0) (not (eq .params.x "y"))}}first{{end}}`,
		`{{index .params "customer id"}}{{len .params}}{{slice .job.name 0 1}}{{$.job.id}}`,
		`{{/* a comment */}}x`,
	}
	for _, text := range allowed {
		_, err := jobtemplate.RouteKey.Parse(text)
		require.NoError(t, err, text)
	}
	require.NoError(t, parseBody(`{"p": {{json .params}}, "s": {{.shard.param | json}}, "e": {{json .execution_id}}}`))

	refused := map[string]string{
		`{{range 1000000000}}x{{end}}`:                   "range",
		`{{range .params}}{{.}}{{end}}`:                  "range",
		`{{define "a"}}x{{end}}{{template "a"}}`:         "define",
		`{{block "a" .}}x{{end}}`:                        "define",
		`{{$x := .params}}{{$x}}`:                        "variables",
		`{{printf "%999999d" 1}}`:                        "printf",
		`{{print .params .params}}`:                      "print",
		`{{js .params.x}}`:                               "js",
		`{{call .params.f}}`:                             "call",
		`{{html (html .params.x)}}`:                      "html",
		`{{json .params}}`:                               "json", // route keys have no json
		`{{if (eq .params.x (printf "%s" "a"))}}{{end}}`: "printf",
		`{{.params.x`:                                    "not a valid template",
	}
	for text, want := range refused {
		_, err := jobtemplate.RouteKey.Parse(text)
		require.ErrorContains(t, err, want, text)
	}
	bodyRefused := map[string]string{
		`{{json (json .params)}}`:      "json",
		`{{json .params | json}}`:      "json",
		`{{.params | json | json}}`:    "json",
		`{{if json .params}}x{{end}}`:  "condition",
		`{{json .params | len}}`:       "last",
		`{{len (json .params)}}`:       "condition",
		`{{range 3}}{{json $}}{{end}}`: "range",
	}
	for text, want := range bodyRefused {
		require.ErrorContains(t, parseBody(text), want, text)
	}
}

func TestJobTemplateOutputCap(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("x", 3000)
	key, err := render(t, jobtemplate.RouteKey, `{{.params.s}}{{.params.s}}`, map[string]any{"params": map[string]any{"s": big}})
	require.ErrorContains(t, err, "exceeds 4096 bytes")
	require.Empty(t, key)

	// The rendering stops at the write that passes the cap, not after all
	// 20 values: counted in marshals, not in time, which a loaded machine
	// stretches.
	value := &countedJSON{text: strings.Repeat("<", 200<<10)}
	_, err = render(t, jobtemplate.Body, strings.Repeat("{{json .params}}", 20),
		map[string]any{"params": map[string]any{"s": value}})
	require.ErrorContains(t, err, "exceeds 2097152 bytes")
	require.Equal(t, 2, value.marshals, "1.2 MB each: the second passes 2 MiB")
}

// countedJSON marshals to its text and counts how often it was marshalled.
type countedJSON struct {
	text     string
	marshals int
}

func (c *countedJSON) MarshalJSON() ([]byte, error) {
	c.marshals++
	return json.Marshal(c.text)
}

func TestJobTemplateMissingKeyIsAnError(t *testing.T) {
	t.Parallel()
	_, err := render(t, jobtemplate.RouteKey, `{{.params.missing}}`, map[string]any{"params": map[string]any{}})
	require.ErrorContains(t, err, "error rendering the route key")
}

func parseBody(text string) error {
	_, err := jobtemplate.Body.Parse(text)
	return err
}

func render(t *testing.T, k *jobtemplate.Kind, text string, data any) ([]byte, error) {
	t.Helper()
	tmpl, err := k.Parse(text)
	require.NoError(t, err)
	return k.Execute(tmpl, data)
}
