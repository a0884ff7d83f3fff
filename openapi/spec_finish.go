package openapi

import (
	"cmp"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/danielgtaylor/huma/v2"
)

// tagDescriptions describes every tag the operations use: the spec lists
// them at the top level, and /docs heads its sections with them.
var tagDescriptions = map[string]string{
	"Jobs":           "Job definitions (trigger, executor, target, retry and callback) and what they did: runs, skipped ticks, explanations.",
	"Executions":     "Runs: one per fire, trigger or submission, with its tasks (one per shard), logs and callback.",
	"Declarations":   "Jobs declared by code or files as a set: apply, diff and prune by owner.",
	"Agents":         "The agents that run tasks, as an operator sees them: list, drain, resume.",
	"Agent protocol": "What ax-agent calls: register, long-poll leases, heartbeat, report logs and results, deregister.",
	"Calendars":      "Named lists of excluded days (dates, ranges, yearly month-days) that jobs name in exclude: their ticks on those days are skipped.",
	"Flow control":   "Rate classes (token buckets per class, priority floors) and the server's history retention.",
	"Operations":     "Liveness and readiness of a replica, for load balancers and orchestrators.",
	"Callbacks":      "The signed request ax sends to a job's callback URL when a run ends.",
	"HTTP tasks":     "The signed request ax sends to the target of an HTTP job, and how the target answers.",
	"Backfills":      "Runs of a job's past ticks over a range that have none yet, released in tick order: create, follow, cancel.",
	"Notices":        "Failure notices to Slack or a signed webhook, one per incident: targets per job, and the notices sent.",
	"Keys":           "API keys, for admins: create (the secret is shown once), list, revoke, and keys for signed requests.",
}

// finishSpec completes the document once every operation is registered:
// the top-level tags, an explicit empty security on what needs no key,
// and an example on every request and response body (built from the
// example, default and enum tags of the Go types where an operation has
// none of its own).
func finishSpec(oa *huma.OpenAPI) {
	used := map[string]bool{}
	eachOperation(oa, func(op *huma.Operation) {
		for _, t := range op.Tags {
			used[t] = true
		}
		if op.Security == nil {
			op.Security = []map[string][]string{}
		}
		addExamples(oa, op)
	})
	oa.Tags = nil
	for _, name := range sortedKeys(used) {
		oa.Tags = append(oa.Tags, &huma.Tag{Name: name, Description: tagDescriptions[name]})
	}
}

// eachOperation calls fn on every operation and webhook of oa, in a
// stable order.
func eachOperation(oa *huma.OpenAPI, fn func(*huma.Operation)) {
	for _, items := range []map[string]*huma.PathItem{oa.Paths, oa.Webhooks} {
		for _, key := range sortedKeys(items) {
			for _, m := range operationsOf(items[key]) {
				fn(m.op)
			}
		}
	}
}

// addExamples gives each JSON request and response body of op an example
// unless it has one.
func addExamples(oa *huma.OpenAPI, op *huma.Operation) {
	if op.RequestBody != nil {
		for _, ct := range sortedKeys(op.RequestBody.Content) {
			mt := op.RequestBody.Content[ct]
			if mt.Schema != nil && mt.Example == nil && len(mt.Examples) == 0 {
				mt.Example = exampleOf(oa, mt.Schema, exampleRequest, 0)
			}
		}
	}
	for _, status := range sortedKeys(op.Responses) {
		code, _ := strconv.Atoi(status)
		for _, ct := range sortedKeys(op.Responses[status].Content) {
			mt := op.Responses[status].Content[ct]
			if mt.Schema == nil || mt.Example != nil || len(mt.Examples) > 0 {
				continue
			}
			if code >= 400 && strings.HasSuffix(mt.Schema.Ref, "/ErrorModel") {
				// Responses are shared between operations: one example per status.
				mt.Example = problemExample(code)
				continue
			}
			mt.Example = overlay(exampleOf(oa, mt.Schema, exampleResponse, 0), responseOverlays[op.OperationID+" "+status])
		}
	}
}

// exampleExecutionID is the id of the run in the examples.
const exampleExecutionID = "0190a6c4-8c1e-7b3a-9f00-3c2d1e0f4a5b"

// responseOverlays correct fields of the built examples of the most read
// answers ("operation-id status"), so that they tell one consistent
// story; a nil value removes the field.
var responseOverlays = map[string]map[string]any{
	"trigger-job 202": {"cause": "manual", "state": "pending", "scheduled_for": "2026-12-04T08:00:00Z",
		"status_url": "/v1/executions/" + exampleExecutionID, "error_codes": nil},
	"get-execution 200": {"cause": "manual", "state": "succeeded", "status_url": "/v1/executions/" + exampleExecutionID,
		"error_codes": map[string]any{}},
}

// overlay sets fields of example, an object, from fields.
func overlay(example any, fields map[string]any) any {
	obj, ok := example.(map[string]any)
	if !ok || fields == nil {
		return example
	}
	for k, v := range fields {
		if v == nil {
			delete(obj, k)
		} else {
			obj[k] = v
		}
	}
	return obj
}

type exampleSide int

const (
	exampleRequest exampleSide = iota
	exampleResponse
)

// typeExamples are whole examples of types whose fields belong to one
// kind or another (an executor's command is for kind shell, its url for
// http): built field by field they would mix kinds.
var typeExamples = map[string]any{
	"JobExecutor": map[string]any{"kind": "shell", "command": "./report.sh --day yesterday"},
	"JobTrigger":  map[string]any{"kind": "cron", "cron": "0 0 8 * * ?", "timezone": "Asia/Shanghai"},
	// A trigger's body is optional; the example shows what it may say.
	"TriggerRequest": map[string]any{"params": map[string]any{"day": "2026-12-03"}},
}

// problemDetails are the detail of the example error of each status.
var problemDetails = map[int]string{
	http.StatusBadRequest:            "the request body is not valid JSON",
	http.StatusUnauthorized:          "missing API key: send the header `Authorization: Bearer <key>`",
	http.StatusForbidden:             "API key ci lacks scope admin (it has read)",
	http.StatusNotFound:              "job 0190a6c4-8c1e-7b3a-9f00-3c2d1e0f4a5b not found",
	http.StatusConflict:              "the resource changed meanwhile: read it again",
	http.StatusRequestTimeout:        "the request body took too long to arrive",
	http.StatusGone:                  "execution removed: it ended longer ago than its job's history retention",
	http.StatusRequestEntityTooLarge: "request body is too large",
	http.StatusUnprocessableEntity:   "validation failed",
	http.StatusTooManyRequests:       "too many requests: retry after the Retry-After header's seconds",
	http.StatusServiceUnavailable:    "the database is not reachable: retry later",
}

// problemExample is an RFC 9457 problem document for status.
func problemExample(status int) map[string]any {
	p := map[string]any{"title": http.StatusText(status), "status": status,
		"detail": cmp.Or(problemDetails[status], strings.ToLower(http.StatusText(status)))}
	if status == http.StatusUnprocessableEntity {
		p["errors"] = []any{map[string]any{"location": "body.trigger.cron",
			"message": "expression never fires: 0 0 30 2 *", "value": "0 0 30 2 *"}}
	}
	return p
}

// maxExampleDepth stops recursive schemas (a JSON value holding values).
const maxExampleDepth = 16

// exampleOf builds a value valid for s: the schema's own example, default
// or first enum value when it has one; for an object its required
// properties and those with examples (fields a side never sees, readOnly
// in requests and writeOnly in responses, left out); for an array one
// item.
func exampleOf(oa *huma.OpenAPI, s *huma.Schema, side exampleSide, depth int) any {
	if s == nil || depth > maxExampleDepth {
		return nil
	}
	if s.Ref != "" {
		if v, ok := typeExamples[s.Ref[strings.LastIndex(s.Ref, "/")+1:]]; ok {
			return v
		}
		return exampleOf(oa, oa.Components.Schemas.SchemaFromRef(s.Ref), side, depth+1)
	}
	if len(s.Properties) > 0 || (s.Type == "array" && hasProperties(oa, s.Items)) {
		// Built from the fields, so that a partial example on the type
		// (a few fields of interest) still gives a valid whole.
		return structuredExample(oa, s, side, depth)
	}
	switch {
	case len(s.Examples) > 0:
		return s.Examples[0]
	case s.Default != nil:
		return s.Default
	case len(s.Enum) > 0:
		return s.Enum[0]
	}
	switch s.Type {
	case "object":
		return objectExample(oa, s, side, depth)
	case "array":
		item := exampleOf(oa, s.Items, side, depth+1)
		if item == nil {
			return []any{}
		}
		return []any{item}
	case "string":
		return stringExample(s)
	case "integer":
		return numberExample(s, 1)
	case "number":
		return numberExample(s, 1.5)
	case "boolean":
		return false
	}
	if len(s.OneOf) > 0 {
		return exampleOf(oa, s.OneOf[0], side, depth+1)
	}
	if len(s.AnyOf) > 0 {
		return exampleOf(oa, s.AnyOf[0], side, depth+1)
	}
	return map[string]any{}
}

// hasProperties reports whether s (or the schema it names) has fields.
func hasProperties(oa *huma.OpenAPI, s *huma.Schema) bool {
	if s != nil && s.Ref != "" {
		s = oa.Components.Schemas.SchemaFromRef(s.Ref)
	}
	return s != nil && len(s.Properties) > 0
}

// structuredExample builds an object from its fields, overlaid with the
// fields of the type's own example, or an array of one such object.
func structuredExample(oa *huma.OpenAPI, s *huma.Schema, side exampleSide, depth int) any {
	if s.Type == "array" {
		return []any{exampleOf(oa, s.Items, side, depth+1)}
	}
	out := objectExample(oa, s, side, depth)
	if len(s.Examples) > 0 {
		if given, ok := s.Examples[0].(map[string]any); ok {
			for k, v := range given {
				out[k] = v
			}
		}
	}
	return out
}

func objectExample(oa *huma.OpenAPI, s *huma.Schema, side exampleSide, depth int) map[string]any {
	out := map[string]any{}
	for _, name := range sortedKeys(s.Properties) {
		p := s.Properties[name]
		resolved := p
		if p.Ref != "" {
			resolved = oa.Components.Schemas.SchemaFromRef(p.Ref)
		}
		if resolved == nil || (side == exampleRequest && resolved.ReadOnly) ||
			(side == exampleResponse && resolved.WriteOnly) {
			continue
		}
		if !slices.Contains(s.Required, name) && len(p.Examples) == 0 && len(resolved.Examples) == 0 {
			continue
		}
		if v := exampleOf(oa, p, side, depth+1); v != nil {
			out[name] = v
		}
	}
	return out
}

// stringExample is a string of s's format and length bounds.
func stringExample(s *huma.Schema) string {
	var v string
	switch s.Format {
	case "uuid":
		v = exampleExecutionID
	case "date-time":
		v = "2026-12-04T08:00:00Z"
	case "date":
		v = "2026-12-04"
	case "uri", "url":
		v = "https://example.com/ax"
	case "email":
		v = "ops@example.com"
	case "duration":
		v = "30s"
	default:
		v = "example"
	}
	if s.MinLength != nil && len(v) < *s.MinLength {
		v += strings.Repeat("x", *s.MinLength-len(v))
	}
	if s.MaxLength != nil && len(v) > *s.MaxLength {
		v = v[:*s.MaxLength]
	}
	return v
}

// numberExample is fallback moved into s's bounds.
func numberExample[T int | float64](s *huma.Schema, fallback T) T {
	v := fallback
	if s.Minimum != nil && float64(v) < *s.Minimum {
		v = T(*s.Minimum)
	}
	if s.Maximum != nil && float64(v) > *s.Maximum {
		v = T(*s.Maximum)
	}
	return v
}

// checkSpecComplete reports the operations of oa without a description
// or without an example on a body, and tags without a description.
func checkSpecComplete(oa *huma.OpenAPI) []string {
	var problems []string
	eachOperation(oa, func(op *huma.Operation) {
		if strings.TrimSpace(op.Description) == "" {
			problems = append(problems, op.OperationID+": no description")
		}
		if op.RequestBody != nil {
			for ct, mt := range op.RequestBody.Content {
				if mt.Example == nil && len(mt.Examples) == 0 {
					problems = append(problems, fmt.Sprintf("%s: request %s without an example", op.OperationID, ct))
				}
			}
		}
		for status, r := range op.Responses {
			for ct, mt := range r.Content {
				if mt.Example == nil && len(mt.Examples) == 0 {
					problems = append(problems, fmt.Sprintf("%s: response %s %s without an example", op.OperationID, status, ct))
				}
			}
		}
	})
	for _, t := range oa.Tags {
		if t.Description == "" {
			problems = append(problems, "tag "+t.Name+": no description")
		}
	}
	slices.Sort(problems)
	return problems
}
