package openapi

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"

	"github.com/ax-scheduler/ax/queue/axtype"
)

// Headers of an HMAC-signed request. A caller that cannot keep a bearer
// key off the wire, or whose requests must not be replayable, signs each
// request instead: the signature covers the method, path, query, body,
// timestamp and a nonce, and the server accepts each nonce once within
// the five-minute window of the timestamp.
const (
	HeaderKeyID     = "Ax-Key-Id"    // the signing key's id
	HeaderTimestamp = "Ax-Timestamp" // Unix seconds
	HeaderNonce     = "Ax-Nonce"     // 16 to 128 of A-Z a-z 0-9 . _ ~ -, never reused
	HeaderSignature = "Ax-Signature" // "v1=" + base64 HMAC-SHA256 of StringToSign, keyed with the secret
)

// SigningScheme starts the string to sign and names the scheme.
const SigningScheme = "AX1-HMAC-SHA256"

// signatureWindow is how far a signed request's timestamp may be from the
// database clock, either way; its nonce is remembered that long after it.
const signatureWindow = 5 * time.Minute

var noncePattern = regexp.MustCompile(`^[A-Za-z0-9._~-]{16,128}$`)

// StringToSign is what a signed request's signature covers, one item per
// line: the scheme, the method, the escaped path, the query with its
// parameters sorted by name (as url.Values.Encode writes it), the
// timestamp, the nonce, and the hex SHA-256 of the body.
func StringToSign(method, path, rawQuery string, timestamp int64, nonce string, body []byte) string {
	sum := sha256.Sum256(body)
	return strings.Join([]string{SigningScheme, method, path, canonicalQuery(rawQuery),
		strconv.FormatInt(timestamp, 10), nonce, hex.EncodeToString(sum[:])}, "\n")
}

func canonicalQuery(raw string) string {
	values, err := url.ParseQuery(raw)
	if err != nil {
		return raw
	}
	return values.Encode()
}

// RequestSignature is the Ax-Signature value for a request.
func RequestSignature(secret, method, path, rawQuery string, timestamp int64, nonce string, body []byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(StringToSign(method, path, rawQuery, timestamp, nonce, body)))
	return "v1=" + base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

// signed authenticates an HMAC-signed request and passes it on with its
// key as principal and its body, already read, still readable.
func (a *authenticator) signed(ctx huma.Context, scope string, next func(huma.Context)) {
	key, body, reason, err := a.verifySigned(ctx)
	switch {
	case errors.Is(err, errBodyTooLarge):
		a.deny(ctx, http.StatusRequestEntityTooLarge, err.Error())
		return
	case err != nil:
		a.logger.ErrorContext(ctx.Context(), "error checking a signed request", "error", err)
		a.deny(ctx, http.StatusServiceUnavailable, "cannot check the signature right now")
		return
	case reason != "":
		a.deny(ctx, http.StatusUnauthorized, "signed request refused: "+reason)
		return
	}
	a.authorize(&bodyContext{humaContext: ctx, body: newHeldBody(body)}, key, scope, next)
}

// verifySigned checks the headers, the signature, then the timestamp and
// nonce (by the database clock). reason says why a request is refused.
func (a *authenticator) verifySigned(ctx huma.Context) (key *axtype.APIKey, body []byte, reason string, err error) {
	h, reason := signedHeaders(ctx)
	if reason != "" {
		return nil, nil, reason, nil
	}
	secret, apiKey, err := a.signing.Get(ctx.Context(), h.keyID)
	if errors.Is(err, axtype.ErrNotFound) {
		return nil, nil, "unknown or revoked signing key " + h.keyID.String(), nil
	}
	if err != nil {
		return nil, nil, "", err
	}
	if body, err = readLimited(ctx); err != nil {
		return nil, nil, "", err
	}
	u := ctx.URL()
	want := RequestSignature(secret, ctx.Method(), u.EscapedPath(), u.RawQuery, h.timestamp, h.nonce, body)
	if !hmac.Equal([]byte(want), []byte(h.signature)) {
		return nil, nil, "the signature does not match the request: Ax-Signature must be v1= and the base64 HMAC-SHA256, " +
			"keyed with the signing secret, of the lines " + SigningScheme + ", method, path, sorted query, Ax-Timestamp, " +
			"Ax-Nonce and the hex SHA-256 of the body", nil
	}
	return apiKey, body, a.freshness(ctx.Context(), h), nil
}

// signedHeaderValues are a signed request's headers, parsed.
type signedHeaderValues struct {
	keyID     uuid.UUID
	timestamp int64
	nonce     string
	signature string
}

func signedHeaders(ctx huma.Context) (signedHeaderValues, string) {
	var h signedHeaderValues
	var err error
	if h.keyID, err = uuid.Parse(ctx.Header(HeaderKeyID)); err != nil {
		return h, HeaderKeyID + " must be the id of a signing key"
	}
	if h.timestamp, err = strconv.ParseInt(ctx.Header(HeaderTimestamp), 10, 64); err != nil {
		return h, HeaderTimestamp + " must be the time of signing in Unix seconds"
	}
	if h.nonce = ctx.Header(HeaderNonce); !noncePattern.MatchString(h.nonce) {
		return h, HeaderNonce + " must be 16 to 128 characters of A-Z a-z 0-9 . _ ~ -, new for every request"
	}
	h.signature = ctx.Header(HeaderSignature)
	return h, ""
}

// freshness records the nonce when the timestamp is within the window and
// says why not otherwise ("" when fresh). A failure to reach the database
// refuses the request too.
func (a *authenticator) freshness(ctx context.Context, h signedHeaderValues) string {
	check, err := a.signing.UseNonce(ctx, h.keyID, h.nonce, h.timestamp, signatureWindow)
	switch {
	case err != nil:
		a.logger.ErrorContext(ctx, "error recording nonce", "error", err)
		return "the nonce could not be recorded; sign the request again"
	case !check.FreshTimestamp:
		return fmt.Sprintf("stale timestamp: signed at %s, the server's time is %s; signed requests are accepted within %s of it",
			time.Unix(h.timestamp, 0).UTC().Format(time.RFC3339), check.ServerTime.Format(time.RFC3339), signatureWindow)
	case !check.FreshNonce:
		return "nonce already used: a signed request is accepted once; sign a retry with a new nonce " +
			"(an Idempotency-Key makes the retry safe)"
	}
	return ""
}

// readLimited reads the request body up to the operation's limit;
// errBodyTooLarge past it. A body a middleware read before is not read
// again, and one of known length is read into a buffer of that size
// (io.ReadAll doubles its buffer as it goes: up to twice the body, and
// as much again in garbage).
func readLimited(ctx huma.Context) ([]byte, error) {
	limit := ctx.Operation().MaxBodyBytes
	if limit <= 0 {
		limit = 1 << 20 // huma's default
	}
	r := ctx.BodyReader()
	if r == nil {
		return nil, nil
	}
	if held, ok := r.(*heldBody); ok && held.off == 0 && held.data != nil {
		return held.data, nil
	}
	size := int64(bytes.MinRead)
	if n, err := strconv.ParseInt(ctx.Header("Content-Length"), 10, 64); err == nil && n >= 0 {
		size += min(n, limit)
	}
	buf := bytes.NewBuffer(make([]byte, 0, size))
	_, err := buf.ReadFrom(io.LimitReader(r, limit+1))
	body := buf.Bytes()
	switch {
	case errors.As(err, new(*http.MaxBytesError)) || int64(len(body)) > limit:
		return nil, fmt.Errorf("%w: limit=%d bytes", errBodyTooLarge, limit)
	case err != nil:
		return nil, fmt.Errorf("error reading request body: %w", err)
	}
	return body, nil
}

// humaContext is huma.Context under a name that can be embedded without
// hiding its Context method.
type humaContext = huma.Context

// bodyContext hands on a request whose body a middleware has read.
type bodyContext struct {
	humaContext
	body io.Reader
}

func (c *bodyContext) BodyReader() io.Reader { return c.body }

// SetReadDeadline ignores huma's body deadline: the body was read to its
// end already, so net/http has cleared the connection's deadline, and one
// set now would never be cleared and would cancel the request's context
// once it passed (golang/go#70834; see bodyGuard) while the handler runs.
func (c *bodyContext) SetReadDeadline(time.Time) error { return nil }
