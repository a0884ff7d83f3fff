package webhook

import (
	"crypto/hmac"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// DefaultTolerance is how far a message's timestamp may be from the
// receiver's clock, either way, unless a Verifier says otherwise.
const DefaultTolerance = 5 * time.Minute

// defaultMaxBodyBytes caps what Middleware reads of a body: ax's callbacks
// are a few kilobytes.
const defaultMaxBodyBytes = 1 << 20

// Errors of verification. Each is returned wrapped with the details, so
// test them with errors.Is.
var (
	// ErrNoSecrets means there was no secret to sign or verify with: a
	// configuration error on the side that got it, not the peer's fault.
	ErrNoSecrets = errors.New("webhook: no secrets configured")

	// ErrMissingHeader means webhook-id, webhook-timestamp or
	// webhook-signature is absent or empty.
	ErrMissingHeader = errors.New("webhook: missing header")

	// ErrInvalidTimestamp means webhook-timestamp is not Unix seconds, or
	// that Sign was given a time before 1970.
	ErrInvalidTimestamp = errors.New("webhook: invalid timestamp")

	// ErrTimestampTooOld means the message was sent longer ago than the
	// tolerance: a replay, or a sender or receiver clock far off.
	ErrTimestampTooOld = errors.New("webhook: timestamp too old")

	// ErrTimestampTooNew means the message claims to be sent further in the
	// future than the tolerance.
	ErrTimestampTooNew = errors.New("webhook: timestamp too new")

	// ErrInvalidSignature means webhook-signature holds no v1 signature.
	ErrInvalidSignature = errors.New("webhook: no v1 signature in header")

	// ErrNoMatchingSignature means no v1 signature matches the message under
	// any of the secrets: a wrong secret, or a body, id or timestamp changed
	// on the way.
	ErrNoMatchingSignature = errors.New("webhook: no matching signature")
)

// Message is what a verified request tells about itself.
type Message struct {
	// ID is webhook-id, stable across retries of one message: the key to
	// deduplicate on.
	ID string

	// Timestamp is webhook-timestamp, the time of this attempt.
	Timestamp time.Time
}

// Verifier checks signed messages. Its zero value with Secrets set is ready
// to use; it is safe for concurrent use once configured.
type Verifier struct {
	// Secrets are the secrets a valid signature may be made with. Keep the
	// old and the new one here while the sender rotates.
	Secrets []Secret

	// Tolerance is how far a timestamp may be from Now, either way.
	// Defaults to DefaultTolerance (5 minutes).
	Tolerance time.Duration

	// MaxBodyBytes caps the body Middleware reads; a larger one is answered
	// 413. Defaults to 1 MiB.
	MaxBodyBytes int64

	// Now is the receiver's clock. Defaults to time.Now.
	Now func() time.Time

	// Logger, when set, records each request Middleware refuses and why, at
	// warn level.
	Logger *slog.Logger
}

// Verify checks a message's headers h and its raw body under secrets with
// the default tolerance, as a Verifier with only Secrets set would.
func Verify(h http.Header, body []byte, secrets ...Secret) (Message, error) {
	v := Verifier{Secrets: secrets}
	return v.Verify(h, body)
}

// Verify checks a message's headers h and its raw body: the three headers
// are present, the timestamp is within the tolerance, and one v1 signature
// matches one of the secrets. body must be the bytes received, before any
// parsing: re-encoded JSON does not verify.
func (v *Verifier) Verify(h http.Header, body []byte) (Message, error) {
	if err := v.checkSecrets(); err != nil {
		return Message{}, err
	}
	id, timestamp, signatures, err := messageHeaders(h)
	if err != nil {
		return Message{}, err
	}
	if err := checkID(id); err != nil {
		return Message{}, err
	}
	at, err := v.checkTimestamp(timestamp)
	if err != nil {
		return Message{}, err
	}
	if err := v.checkSignatures(signatures, id, timestamp, body); err != nil {
		return Message{}, err
	}
	return Message{ID: id, Timestamp: at}, nil
}

func (v *Verifier) checkSecrets() error {
	if len(v.Secrets) == 0 {
		return ErrNoSecrets
	}
	for _, secret := range v.Secrets {
		if err := secret.valid(); err != nil {
			return err
		}
	}
	return nil
}

// messageHeaders reads the three headers. Several webhook-signature lines
// count as one space-separated list.
func messageHeaders(h http.Header) (id, timestamp, signatures string, err error) {
	id = headerValue(h, HeaderID)
	timestamp = headerValue(h, HeaderTimestamp)
	signatures = strings.Join(headerValues(h, HeaderSignature), " ")
	for _, header := range [...]struct{ name, value string }{
		{HeaderID, id}, {HeaderTimestamp, timestamp}, {HeaderSignature, signatures},
	} {
		if strings.TrimSpace(header.value) == "" {
			return "", "", "", fmt.Errorf("%w: %s", ErrMissingHeader, header.name)
		}
	}
	return id, timestamp, signatures, nil
}

// checkTimestamp parses timestamp and compares it with Now in whole seconds,
// as the reference implementations do: exactly Tolerance away is accepted.
func (v *Verifier) checkTimestamp(timestamp string) (time.Time, error) {
	if len(timestamp) > 18 || strings.Trim(timestamp, "0123456789") != "" {
		return time.Time{}, fmt.Errorf("%w: %q is not Unix seconds", ErrInvalidTimestamp, timestamp)
	}
	sent, err := strconv.ParseInt(timestamp, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("%w: %q: %v", ErrInvalidTimestamp, timestamp, err)
	}
	now := v.now().Unix()
	tolerance := int64(v.tolerance() / time.Second)
	at := time.Unix(sent, 0)
	switch {
	case now-sent > tolerance:
		return time.Time{}, fmt.Errorf("%w: sent at %s, %ds ago; the tolerance is %s", ErrTimestampTooOld, at.UTC().Format(time.RFC3339), now-sent, v.tolerance())
	case sent-now > tolerance:
		return time.Time{}, fmt.Errorf("%w: sent at %s, %ds ahead; the tolerance is %s", ErrTimestampTooNew, at.UTC().Format(time.RFC3339), sent-now, v.tolerance())
	}
	return at, nil
}

// checkSignatures looks for one v1 signature equal, in constant time, to
// the MAC of the message under one of the secrets. Entries of other
// versions are skipped, as the specification asks.
func (v *Verifier) checkSignatures(header, id, timestamp string, body []byte) error {
	expected := make([][]byte, len(v.Secrets))
	for i, secret := range v.Secrets {
		expected[i] = signedContentMAC(secret, id, timestamp, body)
	}
	candidates := 0
	for _, entry := range strings.Fields(header) {
		version, encoded, ok := strings.Cut(entry, ",")
		if !ok || version != signatureVersion {
			continue
		}
		candidates++
		got, err := base64.StdEncoding.DecodeString(encoded)
		if err != nil {
			continue
		}
		for _, mac := range expected {
			if hmac.Equal(got, mac) {
				return nil
			}
		}
	}
	if candidates == 0 {
		return ErrInvalidSignature
	}
	return fmt.Errorf("%w: %d v1 signature(s) checked against %d secret(s)", ErrNoMatchingSignature, candidates, len(v.Secrets))
}

func (v *Verifier) tolerance() time.Duration {
	if v.Tolerance > 0 {
		return v.Tolerance
	}
	return DefaultTolerance
}

func (v *Verifier) now() time.Time {
	if v.Now != nil {
		return v.Now()
	}
	return time.Now()
}

// headerValue is h.Get that also finds a name not in canonical form, as in
// an http.Header built by hand from a framework's lower-case map.
func headerValue(h http.Header, name string) string {
	if values := headerValues(h, name); len(values) > 0 {
		return values[0]
	}
	return ""
}

func headerValues(h http.Header, name string) []string {
	if values := h.Values(name); len(values) > 0 {
		return values
	}
	for key, values := range h {
		if strings.EqualFold(key, name) {
			return values
		}
	}
	return nil
}
