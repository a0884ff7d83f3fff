package openapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/danielgtaylor/shorthand/v2"
	jsonpatch "github.com/evanphx/json-patch/v5"
)

// Content types a PATCH takes.
const (
	mergePatchJSON      = "application/merge-patch+json"
	mergePatchShorthand = "application/merge-patch+shorthand"
	jsonPatchJSON       = "application/json-patch+json"
)

// defaultBodyReadTimeout is how long a body may take to arrive when its
// operation sets no BodyReadTimeout (huma's own default).
const defaultBodyReadTimeout = 5 * time.Second

// jsonPatchOp is one RFC 6902 JSON Patch operation.
type jsonPatchOp struct {
	Op    string `json:"op" enum:"add,remove,replace,move,copy,test" doc:"Operation name"`
	From  string `json:"from,omitempty" doc:"JSON Pointer for the source of a move or copy"`
	Path  string `json:"path" doc:"JSON Pointer to the field being operated on, or the destination of a move/copy operation"`
	Value any    `json:"value,omitempty" doc:"The value to set"`
}

// registerPatches adds PATCH to every resource that has a GET and a PUT
// of an object: what huma's autopatch does (GET, apply the patch, PUT the
// result), but as an operation of the API like any other. It goes through
// the API's middleware (authentication with the PUT's scope before a byte
// of the body is read, Idempotency-Key), takes the PUT's body limit and
// read timeout, and a patch may not grow the document past that limit
// either (JSON Patch copy operations double a document each).
func registerPatches(api huma.API) {
	for _, item := range api.OpenAPI().Paths {
		if item.Get != nil && item.Put != nil && item.Patch == nil && objectBody(api, item.Put) {
			registerPatch(api, item.Get, item.Put)
		}
	}
}

func objectBody(api huma.API, put *huma.Operation) bool {
	if put.RequestBody == nil || put.RequestBody.Content["application/json"] == nil {
		return false
	}
	return putSchema(api, put).Type == "object"
}

func putSchema(api huma.API, put *huma.Operation) *huma.Schema {
	s := put.RequestBody.Content["application/json"].Schema
	if s != nil && s.Ref != "" {
		s = api.OpenAPI().Components.Schemas.SchemaFromRef(s.Ref)
	}
	if s == nil {
		return &huma.Schema{}
	}
	return s
}

func registerPatch(api huma.API, get, put *huma.Operation) {
	name := strings.TrimPrefix(get.OperationID, "get-")
	optional := optionalSchema(putSchema(api, put))
	op := &huma.Operation{
		OperationID: "patch-" + name, Method: http.MethodPatch, Path: put.Path,
		Summary: "Patch " + name,
		Description: "Partial update operation supporting both JSON Merge Patch & JSON Patch updates. " +
			"Needs an API key with scope `" + fmt.Sprint(put.Metadata[scopeMetadataKey]) + "`.",
		Tags: put.Tags, Deprecated: put.Deprecated, Parameters: put.Parameters,
		MaxBodyBytes: cmpPositive(put.MaxBodyBytes, 1<<20), BodyReadTimeout: cmpPositive(put.BodyReadTimeout, defaultBodyReadTimeout),
		RequestBody: &huma.RequestBody{Required: true, Content: map[string]*huma.MediaType{
			mergePatchJSON:      {Schema: optional},
			mergePatchShorthand: {Schema: optional},
			jsonPatchJSON:       {Schema: api.OpenAPI().Components.Schemas.Schema(reflect.TypeFor[[]jsonPatchOp](), true, "")},
		}},
		Responses: maps.Clone(put.Responses),
		Errors: append(append([]int{}, put.Errors...), http.StatusNotModified, http.StatusBadRequest,
			http.StatusRequestTimeout, http.StatusRequestEntityTooLarge, http.StatusUnsupportedMediaType),
		Security:   put.Security,
		Metadata:   map[string]any{scopeMetadataKey: put.Metadata[scopeMetadataKey]},
		Extensions: map[string]any{scopeExtension: put.Metadata[scopeMetadataKey]},
	}
	api.OpenAPI().AddOperation(op)
	p := &patcher{api: api, op: op}
	api.Adapter().Handle(op, api.Middlewares().Handler(p.serve))
}

func cmpPositive[T int64 | time.Duration](v, fallback T) T {
	if v > 0 {
		return v
	}
	return fallback
}

// patcher serves the PATCH of one resource.
type patcher struct {
	api huma.API
	op  *huma.Operation
}

func (p *patcher) serve(ctx huma.Context) {
	patch, ok := p.readBody(ctx)
	if !ok {
		return
	}
	path := ctx.URL()
	current := p.inner(ctx, http.MethodGet, path.EscapedPath(), nil)
	if current.Code >= 300 {
		copyResponse(ctx, current)
		return
	}
	patched, err := p.apply(ctx.Header("Content-Type"), current.Body.Bytes(), patch)
	if err != nil {
		var se huma.StatusError
		var model *huma.ErrorModel
		if errors.As(err, &model) && len(model.Errors) > 0 {
			details := make([]error, len(model.Errors))
			for i, d := range model.Errors {
				details[i] = d
			}
			_ = huma.WriteErr(p.api, ctx, model.Status, model.Detail, details...)
			return
		}
		if errors.As(err, &se) {
			_ = huma.WriteErr(p.api, ctx, se.GetStatus(), se.Error())
			return
		}
		_ = huma.WriteErr(p.api, ctx, http.StatusUnprocessableEntity, "unable to apply the patch: "+err.Error())
		return
	}
	if jsonpatch.Equal(patched, current.Body.Bytes()) {
		ctx.SetStatus(http.StatusNotModified)
		return
	}
	// The PUT gets the PATCH's query (?force=true for a declared job).
	put := path.EscapedPath()
	if path.RawQuery != "" {
		put += "?" + path.RawQuery
	}
	copyResponse(ctx, p.inner(ctx, http.MethodPut, put, patched))
}

// readBody reads the patch within the operation's limit and read timeout.
func (p *patcher) readBody(ctx huma.Context) ([]byte, bool) {
	_ = ctx.SetReadDeadline(time.Now().Add(p.op.BodyReadTimeout))
	body, err := io.ReadAll(io.LimitReader(ctx.BodyReader(), p.op.MaxBodyBytes+1))
	var netErr net.Error
	switch {
	case errors.As(err, &netErr) && netErr.Timeout():
		_ = huma.WriteErr(p.api, ctx, http.StatusRequestTimeout, "request body read timeout")
		return nil, false
	case errors.As(err, new(*http.MaxBytesError)) || int64(len(body)) > p.op.MaxBodyBytes:
		_ = huma.WriteErr(p.api, ctx, http.StatusRequestEntityTooLarge,
			fmt.Sprintf("request body is too large limit=%d bytes", p.op.MaxBodyBytes))
		return nil, false
	case err != nil:
		_ = huma.WriteErr(p.api, ctx, http.StatusBadRequest, "cannot read request body")
		return nil, false
	}
	return body, true
}

// apply patches doc. The result, like the patch, may be no larger than
// the operation's body limit; JSON Patch copies stop at that limit.
func (p *patcher) apply(contentType string, doc, patch []byte) ([]byte, error) {
	var patched []byte
	var err error
	switch ct, _, _ := strings.Cut(contentType, ";"); strings.TrimSpace(ct) {
	case jsonPatchJSON:
		var ops jsonpatch.Patch
		if ops, err = jsonpatch.DecodePatch(patch); err != nil {
			return nil, err
		}
		opts := jsonpatch.NewApplyOptions()
		opts.AccumulatedCopySizeLimit = p.op.MaxBodyBytes
		patched, err = ops.ApplyWithOptions(doc, opts)
	case mergePatchJSON, "application/json", "":
		patched, err = jsonpatch.MergePatch(doc, patch)
	case mergePatchShorthand:
		patched, err = applyShorthand(doc, patch)
	default:
		return nil, huma.Error415UnsupportedMediaType("Content-Type must be " + mergePatchJSON + ", " +
			jsonPatchJSON + " or " + mergePatchShorthand)
	}
	var tooBig *jsonpatch.AccumulatedCopySizeError
	if errors.As(err, &tooBig) || int64(len(patched)) > p.op.MaxBodyBytes {
		return nil, huma.Error413RequestEntityTooLarge(fmt.Sprintf(
			"the patched document would be larger than the %d bytes a %s may be", p.op.MaxBodyBytes, strings.TrimPrefix(p.op.OperationID, "patch-")))
	}
	return patched, err
}

// maxShorthandIndex bounds the array indexes of a shorthand patch, which
// the library grows an array to one element at a time: `{x[4000000000]:
// 1}`, 20 bytes, asked for 64 GB and the process was killed. No list of a
// resource has more than 1,000 entries.
const maxShorthandIndex = 10_000

func applyShorthand(doc, patch []byte) (_ []byte, err error) {
	var v any
	if err := json.Unmarshal(doc, &v); err != nil {
		return nil, err
	}
	d := shorthand.NewDocument(shorthand.ParseOptions{ForceStringKeys: true})
	if err := d.Parse(string(patch)); err != nil {
		return nil, err
	}
	for _, op := range d.Operations {
		if err := checkShorthandIndexes(op.Path); err != nil {
			return nil, err
		}
		if from, ok := op.Value.(string); ok && op.Kind == shorthand.OpSwap {
			if err := checkShorthandIndexes(from); err != nil {
				return nil, err
			}
		}
	}
	defer func() {
		if r := recover(); r != nil { // an index before its array's start: the library indexes out of range
			err = huma.Error422UnprocessableEntity("unable to apply the patch",
				&huma.ErrorDetail{Location: "body", Message: fmt.Sprintf("an array index is out of range: %v", r)})
		}
	}()
	v, perr := d.Apply(v)
	if perr != nil {
		return nil, perr
	}
	return json.Marshal(v)
}

// checkShorthandIndexes refuses a shorthand path with an array index
// (x[5], x[^5], x[-5]) beyond maxShorthandIndex either way. (A quoted key
// that looks like one is refused too.)
func checkShorthandIndexes(path string) error {
	for rest := path; ; {
		_, after, ok := strings.Cut(rest, "[")
		if !ok {
			return nil
		}
		inside, tail, _ := strings.Cut(after, "]")
		rest = tail
		n, err := strconv.ParseInt(strings.TrimPrefix(inside, "^"), 10, 64)
		if err != nil && !errors.Is(err, strconv.ErrRange) {
			continue // not an index: a filter or a slice, or the library's error to give
		}
		if err != nil || n > maxShorthandIndex || n < -maxShorthandIndex {
			return huma.Error422UnprocessableEntity("unable to apply the patch", &huma.ErrorDetail{Location: "body",
				Message: fmt.Sprintf("array index %s is beyond %d", inside, maxShorthandIndex), Value: path})
		}
	}
}

// inner runs the resource's GET or PUT on the API itself as the caller:
// the request's context carries the authenticated key, which the
// authenticator accepts (checking scope) in place of credentials.
func (p *patcher) inner(ctx huma.Context, method, path string, body []byte) *httptest.ResponseRecorder {
	req, err := http.NewRequestWithContext(ctx.Context(), method, path, bytes.NewReader(body))
	rec := httptest.NewRecorder()
	if err != nil {
		rec.Code = http.StatusInternalServerError
		return rec
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if tp := ctx.Header("traceparent"); tp != "" {
		req.Header.Set("traceparent", tp)
	}
	p.api.Adapter().ServeHTTP(rec, req)
	return rec
}

func copyResponse(ctx huma.Context, rec *httptest.ResponseRecorder) {
	for name, values := range rec.Header() {
		for _, v := range values {
			ctx.AppendHeader(name, v)
		}
	}
	ctx.SetStatus(rec.Code)
	_, _ = ctx.BodyWriter().Write(rec.Body.Bytes())
}

// optionalSchema is s with no property required at any depth: a merge
// patch names only what it changes. It keeps what documents a value
// (as huma's autopatch does, so the spec reads the same).
func optionalSchema(s *huma.Schema) *huma.Schema {
	if s == nil {
		return nil
	}
	c := &huma.Schema{Type: s.Type, Title: s.Title, Description: s.Description, Format: s.Format,
		ContentEncoding: s.ContentEncoding, Default: s.Default, Examples: s.Examples,
		AdditionalProperties: s.AdditionalProperties, Enum: s.Enum, Minimum: s.Minimum,
		ExclusiveMinimum: s.ExclusiveMinimum, Maximum: s.Maximum, ExclusiveMaximum: s.ExclusiveMaximum,
		MultipleOf: s.MultipleOf, MinLength: s.MinLength, MaxLength: s.MaxLength, Pattern: s.Pattern,
		PatternDescription: s.PatternDescription, MinItems: s.MinItems, MaxItems: s.MaxItems,
		UniqueItems: s.UniqueItems, MinProperties: s.MinProperties, MaxProperties: s.MaxProperties,
		ReadOnly: s.ReadOnly, WriteOnly: s.WriteOnly, Deprecated: s.Deprecated, Extensions: s.Extensions,
		DependentRequired: s.DependentRequired, Discriminator: s.Discriminator,
		Items: optionalSchema(s.Items), Not: optionalSchema(s.Not),
		OneOf: optionalSchemas(s.OneOf), AnyOf: optionalSchemas(s.AnyOf), AllOf: optionalSchemas(s.AllOf)}
	if s.Properties != nil {
		c.Properties = make(map[string]*huma.Schema, len(s.Properties))
		for k, v := range s.Properties {
			c.Properties[k] = optionalSchema(v)
		}
	}
	return c
}

func optionalSchemas(in []*huma.Schema) []*huma.Schema {
	if in == nil {
		return nil
	}
	out := make([]*huma.Schema, len(in))
	for i, s := range in {
		out[i] = optionalSchema(s)
	}
	return out
}
