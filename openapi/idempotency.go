package openapi

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"

	"github.com/danielgtaylor/huma/v2"

	"github.com/ax-scheduler/ax/queue"
	"github.com/ax-scheduler/ax/queue/axtype"
)

// replayedHeaders are the response headers a replay repeats.
var replayedHeaders = []string{"Content-Type", "Location"}

// secretWithheldHeader names, on a replay, the body fields whose secret
// the first answer showed and the replay leaves empty.
const secretWithheldHeader = "Ax-Secret-Withheld"

// notReplayedKey is the operation metadata of an operation whose answer
// is never recorded for replays: a lease is new work on every call, and
// its answer carries the signing secrets of HTTP tasks, which the
// idempotency table must not hold.
const notReplayedKey = "ax-not-replayed"

// notReplayed marks op as one whose Idempotency-Key is ignored.
func notReplayed(op huma.Operation) huma.Operation {
	if op.Metadata == nil {
		op.Metadata = map[string]any{}
	}
	op.Metadata[notReplayedKey] = true
	op.Description += " Idempotency-Key is ignored: every call leases anew, and its answer is never stored."
	return op
}

// secretFieldsKey is the operation metadata listing the top-level body
// fields of its answer that hold a secret shown once.
const secretFieldsKey = "ax-secret-fields"

// showsSecret marks op's answer as carrying secrets in fields (top-level
// JSON names): an Idempotency-Key record keeps that answer with those
// fields emptied, so neither the table (backups, replicas, anyone who may
// read it) nor a replay with the same key hands the secret out again.
func showsSecret(op huma.Operation, fields ...string) huma.Operation {
	if op.Metadata == nil {
		op.Metadata = map[string]any{}
	}
	op.Metadata[secretFieldsKey] = fields
	op.Description += " The secret is shown in this answer only: a retry with the same Idempotency-Key gets the " +
		"answer again with the secret empty and the header " + secretWithheldHeader + " naming the field."
	return op
}

// idempotency gives every authenticated mutating call Stripe's
// Idempotency-Key semantics: the first request with a key runs and its
// response is remembered for 24 hours (per API key); a retry with the same
// key and request gets that response again (marked Idempotent-Replayed),
// one with another request 422, one while the first still runs 409.
// Answers a retry might change (5xx, 429) are not remembered; a request
// holds its key for a minute while it runs. Operations
// that declare the header themselves (trigger, runs) keep the key in the
// transaction of the run they create, and are left to it.
type idempotency struct {
	store  *queue.IdempotencyStore
	api    huma.API
	logger *slog.Logger
}

func (m *idempotency) middleware(ctx huma.Context, next func(huma.Context)) {
	key := ctx.Header("Idempotency-Key")
	principal, _ := ctx.Context().Value(principalKey{}).(*axtype.APIKey)
	if key == "" || principal == nil || !mutating(ctx.Method()) || declaresIdempotencyKey(ctx.Operation()) ||
		ctx.Operation().Metadata[notReplayedKey] == true {
		next(ctx)
		return
	}
	if len(key) > 255 {
		m.refuse(ctx, http.StatusUnprocessableEntity, "Idempotency-Key is longer than 255 characters", key)
		return
	}
	body, err := readLimited(ctx)
	if err != nil {
		m.fail(ctx, err)
		return
	}
	req := &axtype.IdempotentRequest{APIKeyID: principal.ID, Key: key, Method: ctx.Method(), Path: ctx.URL().Path,
		RequestHash: requestHash(ctx, body)}
	prior, claimed, err := m.store.Claim(ctx.Context(), req)
	if err != nil {
		m.fail(ctx, err)
		return
	}
	if !claimed {
		m.answerRetry(ctx, req, prior)
		return
	}
	rec := &recordingContext{humaContext: ctx, body: newHeldBody(body), headers: http.Header{}}
	next(rec)
	m.remember(ctx, req, rec)
}

func mutating(method string) bool {
	switch method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		return true
	}
	return false
}

func declaresIdempotencyKey(op *huma.Operation) bool {
	for _, p := range op.Parameters {
		if p.In == "header" && http.CanonicalHeaderKey(p.Name) == "Idempotency-Key" {
			return true
		}
	}
	return false
}

// requestHash identifies a request: method, path, query, and the body
// (JSON decoded and encoded again, so spacing and key order do not count).
func requestHash(ctx huma.Context, body []byte) []byte {
	u := ctx.URL()
	h := sha256.New()
	h.Write([]byte(ctx.Method() + "\n" + u.Path + "\n" + canonicalQuery(u.RawQuery) + "\n"))
	var v any
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&v); err == nil {
		body, _ = json.Marshal(v)
	}
	h.Write(body)
	return h.Sum(nil)
}

// answerRetry answers a request whose key was used before.
func (m *idempotency) answerRetry(ctx huma.Context, req *axtype.IdempotentRequest, prior *axtype.IdempotentResponse) {
	switch {
	case prior.Method != req.Method || prior.Path != req.Path || !bytes.Equal(prior.RequestHash, req.RequestHash):
		m.refuse(ctx, http.StatusUnprocessableEntity, "Idempotency-Key was used for a different request", req.Key)
	case prior.Status == 0:
		_ = huma.WriteErr(m.api, ctx, http.StatusConflict, "a request with this Idempotency-Key is still running; retry later")
	default:
		replay(ctx, prior)
	}
}

func replay(ctx huma.Context, prior *axtype.IdempotentResponse) {
	var headers map[string]string
	_ = json.Unmarshal(prior.Headers, &headers)
	for name, value := range headers {
		ctx.SetHeader(name, value)
	}
	ctx.SetHeader("Idempotent-Replayed", "true")
	ctx.SetStatus(prior.Status)
	_, _ = ctx.BodyWriter().Write(prior.Body)
}

// remember stores the response, or frees the key when a retry could get
// another answer.
func (m *idempotency) remember(ctx huma.Context, req *axtype.IdempotentRequest, rec *recordingContext) {
	status := rec.Status()
	var err error
	if status >= 500 || status == http.StatusTooManyRequests || status == 0 {
		err = m.store.Release(ctx.Context(), req)
	} else {
		kept, body := rec.kept(), rec.buf.Bytes()
		if fields, _ := ctx.Operation().Metadata[secretFieldsKey].([]string); len(fields) > 0 {
			body = withoutSecrets(body, fields)
			kept[secretWithheldHeader] = strings.Join(fields, ", ")
		}
		headers, _ := json.Marshal(kept)
		err = m.store.Answer(ctx.Context(), req,
			&axtype.IdempotentResponse{Status: status, Body: body, Headers: headers})
	}
	if err != nil {
		m.logger.ErrorContext(ctx.Context(), "error remembering an idempotent response", "error", err,
			"idempotency_key", req.Key, "status", strconv.Itoa(status))
	}
}

// withoutSecrets is a JSON object body with the named fields emptied
// (kept, so clients that require them still decode it). A body that is not
// a JSON object is not stored at all: nothing of it could be told safe.
func withoutSecrets(body []byte, fields []string) []byte {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(body, &obj); err != nil {
		return []byte("{}")
	}
	for _, f := range fields {
		if _, ok := obj[f]; ok {
			obj[f] = json.RawMessage(`""`)
		}
	}
	out, err := json.Marshal(obj)
	if err != nil {
		return []byte("{}")
	}
	return out
}

func (m *idempotency) refuse(ctx huma.Context, status int, msg, key string) {
	_ = huma.WriteErr(m.api, ctx, status, msg,
		&huma.ErrorDetail{Location: "header.Idempotency-Key", Message: msg, Value: key})
}

func (m *idempotency) fail(ctx huma.Context, err error) {
	if errors.Is(err, errBodyTooLarge) {
		_ = huma.WriteErr(m.api, ctx, http.StatusRequestEntityTooLarge, err.Error())
		return
	}
	m.logger.ErrorContext(ctx.Context(), "error handling Idempotency-Key", "error", err)
	_ = huma.WriteErr(m.api, ctx, http.StatusServiceUnavailable, "cannot check the Idempotency-Key right now")
}

// recordingContext passes a request on and records its response.
type recordingContext struct {
	humaContext
	body    io.Reader
	status  int
	headers http.Header
	buf     bytes.Buffer
}

func (c *recordingContext) BodyReader() io.Reader { return c.body }

func (c *recordingContext) SetStatus(code int) {
	c.status = code
	c.humaContext.SetStatus(code)
}

func (c *recordingContext) Status() int { return c.status }

func (c *recordingContext) SetHeader(name, value string) {
	c.headers.Set(name, value)
	c.humaContext.SetHeader(name, value)
}

func (c *recordingContext) BodyWriter() io.Writer {
	return io.MultiWriter(c.humaContext.BodyWriter(), &c.buf)
}

// kept are the recorded headers a replay repeats.
func (c *recordingContext) kept() map[string]string {
	out := map[string]string{}
	for _, name := range replayedHeaders {
		if v := c.headers.Get(name); v != "" {
			out[name] = v
		}
	}
	return out
}
