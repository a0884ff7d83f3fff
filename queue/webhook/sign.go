package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The headers of a signed message, lower-case as the specification writes
// them (HTTP header names are case-insensitive; http.Header canonicalizes).
const (
	HeaderID        = "webhook-id"
	HeaderTimestamp = "webhook-timestamp"
	HeaderSignature = "webhook-signature"
)

// signatureVersion marks an HMAC-SHA256 signature; the specification
// reserves "v1a" for asymmetric ones, which this package does not make.
const signatureVersion = "v1"

// ErrInvalidID means a message id is empty or holds characters the
// contract forbids.
var ErrInvalidID = errors.New("webhook: invalid message id")

// Sign sets the three webhook headers on h for a message with id, sent at
// at with body, signed with every one of secrets: one while a secret is in
// use, two while it is rotated. body must be the exact bytes sent.
func Sign(h http.Header, id string, at time.Time, body []byte, secrets ...Secret) error {
	timestamp, err := formatTimestamp(at)
	if err != nil {
		return err
	}
	sig, err := signature(id, timestamp, body, secrets)
	if err != nil {
		return err
	}
	h.Set(HeaderID, id)
	h.Set(HeaderTimestamp, timestamp)
	h.Set(HeaderSignature, sig)
	return nil
}

// Signature returns the webhook-signature header value for a message with
// id, sent at at with body: "v1,<base64 HMAC-SHA256>" for each of secrets,
// separated by spaces.
func Signature(id string, at time.Time, body []byte, secrets ...Secret) (string, error) {
	timestamp, err := formatTimestamp(at)
	if err != nil {
		return "", err
	}
	return signature(id, timestamp, body, secrets)
}

// formatTimestamp writes at in Unix seconds; a time before 1970 (a zero
// time.Time by mistake) has no valid form.
func formatTimestamp(at time.Time) (string, error) {
	if at.Unix() < 0 {
		return "", fmt.Errorf("%w: %s is before 1970", ErrInvalidTimestamp, at)
	}
	return strconv.FormatInt(at.Unix(), 10), nil
}

func signature(id, timestamp string, body []byte, secrets []Secret) (string, error) {
	if err := checkID(id); err != nil {
		return "", err
	}
	if len(secrets) == 0 {
		return "", ErrNoSecrets
	}
	parts := make([]string, 0, len(secrets))
	for _, secret := range secrets {
		if err := secret.valid(); err != nil {
			return "", err
		}
		mac := signedContentMAC(secret, id, timestamp, body)
		parts = append(parts, signatureVersion+","+base64.StdEncoding.EncodeToString(mac))
	}
	return strings.Join(parts, " "), nil
}

// signedContentMAC is the HMAC-SHA256 of "id.timestamp.body" under secret.
func signedContentMAC(secret Secret, id, timestamp string, body []byte) []byte {
	mac := hmac.New(sha256.New, secret.key)
	mac.Write([]byte(id))
	mac.Write([]byte{'.'})
	mac.Write([]byte(timestamp))
	mac.Write([]byte{'.'})
	mac.Write(body)
	return mac.Sum(nil)
}

// checkID enforces what the signed content needs of an id: present, and
// free of the "." that separates the id from the timestamp (so no id and
// timestamp pair can be shifted into another with the same signature), and
// of spaces and control characters, which a header cannot carry intact.
func checkID(id string) error {
	if id == "" {
		return fmt.Errorf("%w: empty", ErrInvalidID)
	}
	for _, r := range id {
		if r == '.' || r <= ' ' || r == 0x7f {
			return fmt.Errorf("%w: %q holds %q", ErrInvalidID, id, r)
		}
	}
	return nil
}
