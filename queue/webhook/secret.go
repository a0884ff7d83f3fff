package webhook

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// SecretPrefix starts every encoded secret, so a secret is recognisable in a
// configuration file and cannot be mistaken for another kind of key.
const SecretPrefix = "whsec_"

const (
	// secretSize is how many random bytes NewSecret draws: 256 bits, the
	// HMAC-SHA256 block's worth of entropy.
	secretSize = 32

	// minSecretSize and maxSecretSize are the bounds of the specification
	// (192 to 512 bits); ParseSecret refuses anything else.
	minSecretSize = 24
	maxSecretSize = 64
)

// ErrInvalidSecret means a secret is malformed, too short or too long.
var ErrInvalidSecret = errors.New("webhook: invalid secret")

// Secret is a key that signs and verifies messages. Its zero value is not a
// usable key: make one with NewSecret or ParseSecret.
//
// String and fmt print a redacted form, so a Secret put in a log line or an
// error by mistake does not leak; Text gives the full encoded form that is
// shown to a user once and stored by the receiver.
type Secret struct {
	key []byte
}

// NewSecret returns a fresh secret of 32 random bytes.
func NewSecret() Secret {
	key := make([]byte, secretSize)
	_, _ = rand.Read(key) // never fails: crypto/rand crashes the program instead
	return Secret{key: key}
}

// ParseSecret decodes an encoded secret: "whsec_" followed by the standard
// base64 (padded or not) of 24 to 64 bytes. Surrounding spaces, common when
// a secret is pasted into a configuration file, are ignored.
func ParseSecret(s string) (Secret, error) {
	s = strings.TrimSpace(s)
	encoded, ok := strings.CutPrefix(s, SecretPrefix)
	if !ok {
		return Secret{}, fmt.Errorf("%w: it must start with %q", ErrInvalidSecret, SecretPrefix)
	}
	key, err := decodeBase64(encoded)
	if err != nil {
		return Secret{}, fmt.Errorf("%w: the part after %q is not standard base64: %v", ErrInvalidSecret, SecretPrefix, err)
	}
	if err := checkKeySize(len(key)); err != nil {
		return Secret{}, err
	}
	return Secret{key: key}, nil
}

// ParseSecrets parses each of encoded, for a receiver that accepts several
// secrets while its sender rotates them.
func ParseSecrets(encoded ...string) ([]Secret, error) {
	secrets := make([]Secret, 0, len(encoded))
	for i, s := range encoded {
		secret, err := ParseSecret(s)
		if err != nil {
			return nil, fmt.Errorf("secret %d: %w", i+1, err)
		}
		secrets = append(secrets, secret)
	}
	return secrets, nil
}

// Text returns the encoded secret, "whsec_" and the padded base64 of its
// key, which ParseSecret reads back.
func (s Secret) Text() string {
	return SecretPrefix + base64.StdEncoding.EncodeToString(s.key)
}

// String returns a redacted form, safe for logs: the prefix and a short
// SHA-256 fingerprint that tells secrets apart without revealing any of the
// key.
func (s Secret) String() string {
	if s.IsZero() {
		return SecretPrefix + "(none)"
	}
	sum := sha256.Sum256(s.key)
	return SecretPrefix + "…(redacted, sha256:" + hex.EncodeToString(sum[:4]) + ")"
}

// IsZero reports whether s holds no key, as a Secret{} does.
func (s Secret) IsZero() bool {
	return len(s.key) == 0
}

// valid says why s cannot sign or verify, or nil when it can.
func (s Secret) valid() error {
	if s.IsZero() {
		return fmt.Errorf("%w: empty secret (make one with NewSecret or ParseSecret)", ErrInvalidSecret)
	}
	return checkKeySize(len(s.key))
}

func checkKeySize(n int) error {
	if n < minSecretSize || n > maxSecretSize {
		return fmt.Errorf("%w: it decodes to %d bytes; %d to %d are required", ErrInvalidSecret, n, minSecretSize, maxSecretSize)
	}
	return nil
}

// decodeBase64 reads standard base64 with or without its padding.
func decodeBase64(s string) ([]byte, error) {
	if strings.HasSuffix(s, "=") {
		return base64.StdEncoding.DecodeString(s)
	}
	return base64.RawStdEncoding.DecodeString(s)
}
