package openapi

import (
	"bytes"
	"fmt"

	"github.com/danielgtaylor/huma/v2"

	"github.com/ax-scheduler/ax/queue/axtype"
)

// MaxParamsDepth is how deeply params may nest: the params object is level
// 1 and each object or array inside adds one. Deeper documents break
// ordinary JSON tools (jq, Python's json, most decoders stop near 1000).
const MaxParamsDepth = 64

// MaxParamsBytes bounds params as sent: a job's, and a run's overlay of
// them (trigger, ad-hoc and delayed runs, each run of a batch, each job
// of a declaration). Params travel with every lease of every task and
// into the HTTP body and callback of every run.
const MaxParamsBytes = axtype.MaxParamsBytes

// maxBodyDepth refuses a request body before it is decoded at all:
// params at their limit sit two levels down in the deepest body, and
// nothing else in the API nests.
const maxBodyDepth = 2 * MaxParamsDepth

// Params is a JSON object kept as the client sent it: ax stores it as
// jsonb and hands it to agents, HTTP targets and callbacks without ever
// decoding its numbers into float64, so 12345678901234567890 stays that
// number (Postgres keeps numbers exactly; spacing and key order are its).
type Params []byte

// MarshalJSON writes the object as stored.
func (p Params) MarshalJSON() ([]byte, error) {
	if len(p) == 0 {
		return []byte("{}"), nil
	}
	return p, nil
}

// UnmarshalJSON keeps the raw object; Huma has already checked it is one.
// null is no params, as an absent field.
func (p *Params) UnmarshalJSON(b []byte) error {
	if string(bytes.TrimSpace(b)) == "null" {
		*p = nil
		return nil
	}
	*p = append((*p)[:0], b...)
	return nil
}

// Schema describes params as any JSON object.
func (Params) Schema(huma.Registry) *huma.Schema {
	return &huma.Schema{Type: huma.TypeObject, AdditionalProperties: true}
}

// validate checks the size and nesting bounds, naming the field at.
func (p Params) validate(at string, errs *fieldErrors) {
	if len(p) > MaxParamsBytes {
		errs.add(at, fmt.Sprintf("is %d bytes; params may be at most %d bytes (256 KiB)", len(p), MaxParamsBytes), nil)
		return
	}
	if d := jsonDepth(p); d > MaxParamsDepth {
		errs.add(at, fmt.Sprintf("nests %d levels deep; at most %d are allowed", d, MaxParamsDepth), nil)
	}
}

// jsonDepth is how deeply a JSON document nests (see scanJSON).
func jsonDepth(b []byte) int {
	return scanJSON(b)
}

// scanJSON finds how deeply a JSON document nests, by one scan of its
// brackets outside strings, without decoding it; it stops once past
// maxBodyDepth (the depth is then maxBodyDepth+1). What Postgres cannot
// store is storableBodies' to refuse (axtype.CheckStorableJSON).
func scanJSON(b []byte) (deepest int) {
	depth, inString := 0, false
	for i := 0; i < len(b); i++ {
		c := b[i]
		if inString {
			switch c {
			case '\\':
				i++
			case '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
		case '{', '[':
			depth++
			if depth > deepest {
				deepest = depth
				if deepest > maxBodyDepth {
					return deepest
				}
			}
		case '}', ']':
			depth--
		}
	}
	return deepest
}

// errTooDeep refuses a body before decoding it.
var errTooDeep = fmt.Errorf("the JSON document nests deeper than %d levels (params may nest %d)", maxBodyDepth, MaxParamsDepth)

// checkBody is run on every JSON body before it is decoded: nesting at
// most maxBodyDepth. (Bodies of operations that store them were checked
// for what Postgres stores before: storableBodies.)
func checkBody(data []byte) error {
	if scanJSON(data) > maxBodyDepth {
		return errTooDeep
	}
	return nil
}
