package openapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/ax-scheduler/ax/queue"
	"github.com/ax-scheduler/ax/queue/axtype"
)

// checksOwnValuesKey in an operation's Metadata exempts its body from
// storableBodies: the operation checks each value it stores itself (an
// agent's results, where one bad result must not refuse the others and
// fails alone as bad_result; log chunks, made storable per chunk).
const checksOwnValuesKey = "ax-checks-own-values"

// checksOwnValues marks op as checking the values it stores itself.
func checksOwnValues(op huma.Operation) huma.Operation {
	if op.Metadata == nil {
		op.Metadata = map[string]any{}
	}
	op.Metadata[checksOwnValuesKey] = true
	return op
}

// storableBodies refuses a JSON body holding anything Postgres will not
// store (axtype.CheckStorableJSON: invalid UTF-8, NUL, a lone UTF-16
// surrogate escape, a number beyond numeric, raw control characters),
// before it is decoded and so before anything is written. Go's decoder
// takes all of these, and params are stored byte for byte: an insert
// failed with a 500 on every path that stores a body (jobs, runs,
// triggers, batches, declarations, PUT and PATCH). The problem names the
// field (body.runs[3].params.x). This is the one such check: params,
// names, descriptions, headers and labels all come through it.
func storableBodies(api huma.API) func(huma.Context, func(huma.Context)) {
	return func(ctx huma.Context, next func(huma.Context)) {
		op := ctx.Operation()
		if op.RequestBody == nil || op.Metadata[checksOwnValuesKey] == true ||
			!jsonContent(ctx.Header("Content-Type")) {
			next(ctx)
			return
		}
		if op.BodyReadTimeout > 0 { // as huma would, reading it
			_ = ctx.SetReadDeadline(time.Now().Add(op.BodyReadTimeout))
		}
		body, err := readLimited(ctx)
		var netErr net.Error
		switch {
		case errors.Is(err, errBodyTooLarge):
			_ = huma.WriteErr(api, ctx, http.StatusRequestEntityTooLarge, err.Error())
			return
		case errors.As(err, &netErr) && netErr.Timeout():
			_ = huma.WriteErr(api, ctx, http.StatusRequestTimeout, "request body read timeout")
			return
		case err != nil:
			_ = huma.WriteErr(api, ctx, http.StatusBadRequest, "cannot read request body")
			return
		}
		if len(bytes.TrimSpace(body)) > 0 {
			if detail := unstorable(body); detail != nil {
				_ = huma.WriteErr(api, ctx, http.StatusBadRequest, "the body holds a value that cannot be stored", detail)
				return
			}
		}
		next(&bodyContext{humaContext: ctx, body: newHeldBody(body)})
	}
}

// jsonContent says whether a Content-Type is JSON (absent is: huma then
// takes the operation's, JSON).
func jsonContent(contentType string) bool {
	if contentType == "" {
		return true
	}
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && (mt == "application/json" || strings.HasSuffix(mt, "+json"))
}

// unstorable checks a body, naming the field at fault; nil when Postgres
// stores every value of it. A document nesting deeper than the API
// allows is refused first, in one cheap scan.
func unstorable(body []byte) *huma.ErrorDetail {
	if jsonDepth(body) > maxBodyDepth {
		return &huma.ErrorDetail{Location: "body", Message: errTooDeep.Error()}
	}
	err := queue.CheckStorableJSON(body)
	var ue *axtype.UnstorableError
	if !errors.As(err, &ue) {
		return nil
	}
	if ue.Pointer == "" && !json.Valid(body) {
		// Say where: json.Valid does not. (A raw control character in a
		// string is one: Go's decoders let it through.)
		var syntax *json.SyntaxError
		if errors.As(json.Unmarshal(body, new(json.RawMessage)), &syntax) {
			return &huma.ErrorDetail{Location: "body",
				Message: fmt.Sprintf("is not valid JSON: %s (at byte %d)", syntax.Error(), syntax.Offset)}
		}
	}
	return &huma.ErrorDetail{Location: fieldLocation(body, ue.Pointer), Message: ue.Reason}
}

// fieldLocation turns an RFC 6901 pointer into body into a location as
// huma writes them: /runs/3/params/x is body.runs[3].params.x. Whether
// a segment indexes an array or names a key is read from the document.
func fieldLocation(body []byte, pointer string) string {
	loc := "body"
	if pointer == "" {
		return loc
	}
	segs := strings.Split(pointer[1:], "/")
	for i, s := range segs {
		segs[i] = strings.ReplaceAll(strings.ReplaceAll(s, "~1", "/"), "~0", "~")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	for i, seg := range segs {
		step, ok := descend(dec, seg)
		if !ok {
			// Not found as written (a key with an escape the decoder
			// reads otherwise): name the rest as keys.
			return loc + "." + strings.Join(segs[i:], ".")
		}
		loc += step
	}
	return loc
}

// descend moves dec into the value seg names in the object or array that
// comes next, returning it as a location step ("[3]", ".x").
func descend(dec *json.Decoder, seg string) (string, bool) {
	tok, err := dec.Token()
	if err != nil {
		return "", false
	}
	switch tok {
	case json.Delim('['):
		n, err := strconv.Atoi(seg)
		if err != nil || n < 0 {
			return "", false
		}
		for range n {
			if !dec.More() || dec.Decode(new(json.RawMessage)) != nil {
				return "", false
			}
		}
		return "[" + seg + "]", dec.More()
	case json.Delim('{'):
		for dec.More() {
			key, err := dec.Token()
			if err != nil {
				return "", false
			}
			if key == seg {
				return "." + seg, true
			}
			if dec.Decode(new(json.RawMessage)) != nil {
				return "", false
			}
		}
	}
	return "", false
}

// heldBody is a body a middleware has read, handed on: readLimited takes
// its bytes as they are instead of copying them again, and once read to
// the end (by huma, into its own buffer) it lets them go, so that a large
// body is not held twice while its request is served.
type heldBody struct {
	data []byte
	off  int
}

func newHeldBody(data []byte) *heldBody { return &heldBody{data: data} }

func (b *heldBody) Read(p []byte) (int, error) {
	if b.off >= len(b.data) {
		b.data, b.off = nil, 0
		return 0, io.EOF
	}
	n := copy(p, b.data[b.off:])
	b.off += n
	return n, nil
}
