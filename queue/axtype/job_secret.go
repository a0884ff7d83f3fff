package axtype

import "time"

// JobSecrets are the secrets that sign a job's messages now.
type JobSecrets struct {
	Current           string
	Previous          string     // "" unless a rotation lasts
	PreviousExpiresAt *time.Time // when the previous one stops signing
}

// List returns the secrets to sign with, current first.
func (s JobSecrets) List() []string {
	var out []string
	for _, secret := range []string{s.Current, s.Previous} {
		if secret != "" {
			out = append(out, secret)
		}
	}
	return out
}
