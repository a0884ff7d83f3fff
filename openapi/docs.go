package openapi

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"html/template"
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/danielgtaylor/huma/v2"
)

// The API reference at /docs is rendered here from the spec, with our own
// template and styles: huma's built-in page loads its viewer from a CDN,
// so it was blank offline and behind strict egress.

//go:embed docs.html
var docsHTML string

var docsTemplate = template.Must(template.New("docs").Funcs(template.FuncMap{
	"anchor": func(s string) string { return strings.NewReplacer("/", "-", "{", "", "}", "", " ", "-").Replace(s) },
}).Parse(docsHTML))

// docsPage is what the template shows.
type docsPage struct {
	Title, Version, Description string
	Guides                      []*guidePage
	Tags                        []docsTag
	Webhooks                    []docsOperation
	Schemas                     []docsSchema
}

type docsTag struct {
	Name, Description string
	Operations        []docsOperation
}

type docsOperation struct {
	ID, Method, Path, Summary, Description string
	Params                                 []docsField
	Body                                   string // the request body's type
	BodyExample                            string // the request body's example, as indented JSON
	Responses                              []docsResponse
}

type docsResponse struct {
	Status, Description, Type, Example string
}

type docsField struct {
	Name, In, Type, Description string
	Required                    bool
}

type docsSchema struct {
	Name, Description string
	Fields            []docsField
}

// docsHandler renders the reference once, on first use (when every
// operation has been registered).
func docsHandler(api huma.API) http.Handler {
	var once sync.Once
	var page []byte
	var err error
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		once.Do(func() { page, err = renderDocs(api.OpenAPI()) })
		if err != nil {
			http.Error(w, "error rendering the API reference", http.StatusInternalServerError)
			return
		}
		setDocsHeaders(w)
		_, _ = w.Write(page)
	})
}

func renderDocs(spec *huma.OpenAPI) ([]byte, error) {
	page := docsPageOf(spec)
	book, err := guides()
	if err != nil {
		return nil, err
	}
	page.Guides = book.Pages
	var buf bytes.Buffer
	if err := docsTemplate.Execute(&buf, page); err != nil {
		return nil, fmt.Errorf("error rendering the API reference: %w", err)
	}
	return buf.Bytes(), nil
}

// docsPageOf is what /docs shows of spec (search reads it too).
func docsPageOf(spec *huma.OpenAPI) docsPage {
	page := docsPage{Title: spec.Info.Title, Version: spec.Info.Version, Description: spec.Info.Description}
	byTag := map[string][]docsOperation{}
	for path, item := range spec.Paths {
		for _, op := range operationsOf(item) {
			tag := "Other"
			if len(op.op.Tags) > 0 {
				tag = op.op.Tags[0]
			}
			byTag[tag] = append(byTag[tag], docsOperationOf(op.method, path, op.op))
		}
	}
	for _, name := range sortedKeys(byTag) {
		ops := byTag[name]
		slices.SortFunc(ops, func(a, b docsOperation) int { return strings.Compare(a.Path+a.Method, b.Path+b.Method) })
		page.Tags = append(page.Tags, docsTag{Name: name, Description: tagDescriptions[name], Operations: ops})
	}
	for _, name := range sortedKeys(spec.Webhooks) {
		for _, op := range operationsOf(spec.Webhooks[name]) {
			page.Webhooks = append(page.Webhooks, docsOperationOf(op.method, name, op.op))
		}
	}
	if spec.Components != nil && spec.Components.Schemas != nil {
		schemas := spec.Components.Schemas.Map()
		for _, name := range sortedKeys(schemas) {
			s := schemas[name]
			ds := docsSchema{Name: name, Description: s.Description}
			for _, prop := range sortedKeys(s.Properties) {
				p := s.Properties[prop]
				ds.Fields = append(ds.Fields, docsField{Name: prop, Type: typeOf(p), Description: p.Description,
					Required: slices.Contains(s.Required, prop)})
			}
			page.Schemas = append(page.Schemas, ds)
		}
	}
	return page
}

type methodOp struct {
	method string
	op     *huma.Operation
}

func operationsOf(item *huma.PathItem) []methodOp {
	var out []methodOp
	for _, m := range []methodOp{{"GET", item.Get}, {"POST", item.Post}, {"PUT", item.Put}, {"PATCH", item.Patch},
		{"DELETE", item.Delete}} {
		if m.op != nil && !m.op.Hidden {
			out = append(out, m)
		}
	}
	return out
}

func docsOperationOf(method, path string, op *huma.Operation) docsOperation {
	d := docsOperation{ID: op.OperationID, Method: method, Path: path, Summary: op.Summary, Description: op.Description}
	for _, p := range op.Parameters {
		d.Params = append(d.Params, docsField{Name: p.Name, In: p.In, Type: typeOf(p.Schema), Description: p.Description,
			Required: p.Required})
	}
	if op.RequestBody != nil {
		// application/json first: a PATCH also takes merge and JSON patches.
		for _, ct := range slices.Backward(sortedKeys(op.RequestBody.Content)) {
			mt := op.RequestBody.Content[ct]
			if d.Body == "" || ct == "application/json" {
				d.Body, d.BodyExample = typeOf(mt.Schema), exampleJSON(mt.Example)
			}
		}
	}
	for _, status := range sortedKeys(op.Responses) {
		resp := op.Responses[status]
		r := docsResponse{Status: status, Description: resp.Description}
		for _, mt := range resp.Content {
			r.Type, r.Example = typeOf(mt.Schema), exampleJSON(mt.Example)
		}
		d.Responses = append(d.Responses, r)
	}
	return d
}

// typeOf says a schema's type in a few words: a named schema by name, an
// array of them, or the JSON type with its format and values.
func typeOf(s *huma.Schema) string {
	switch {
	case s == nil:
		return ""
	case s.Ref != "":
		return s.Ref[strings.LastIndex(s.Ref, "/")+1:]
	case s.Type == "array":
		return typeOf(s.Items) + "[]"
	}
	t := s.Type
	if s.Format != "" {
		t += " (" + s.Format + ")"
	}
	if len(s.Enum) > 0 {
		vals := make([]string, len(s.Enum))
		for i, v := range s.Enum {
			vals[i] = fmt.Sprint(v)
		}
		t += ": " + strings.Join(vals, ", ")
	}
	return t
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// exampleJSON is an example as indented JSON; empty for none.
func exampleJSON(v any) string {
	if v == nil {
		return ""
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return ""
	}
	return string(b)
}
