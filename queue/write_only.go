package queue

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/ax-scheduler/ax/queue/axtype"
	"github.com/ax-scheduler/ax/queue/httptask"
)

// Redacted stands in for a write-only value wherever a job is shown: the
// HTTP executor's header values, and the credentials of its URL and of
// the callback URL (userinfo, and every query value). Sent back in a PUT,
// a PATCH or a declaration, it means "keep the stored value".
//
// Every query value counts as a credential, not only those named like
// one (token, sig, key, X-Amz-Signature…): names vary too much for a list
// to catch them all, and a missed name leaks the secret to every read
// key, while a redacted harmless value (?region=eu) costs only a look at
// the job's source. The parameter names, the scheme, host and path stay
// visible. A secret in the path (some webhook URLs) is not recognised:
// put it in a header or the query.
const Redacted = httptask.Redacted

// RedactURL is raw with its userinfo and (non-empty) query values
// replaced by Redacted (httptask.RedactURL).
func RedactURL(raw string) string { return httptask.RedactURL(raw) }

// RedactHeaders is h with every value replaced by Redacted.
func RedactHeaders(h map[string]string) map[string]string {
	if h == nil {
		return nil
	}
	out := make(map[string]string, len(h))
	for k := range h {
		out[k] = Redacted
	}
	return out
}

// RedactJob is j as shown to any key: write-only values replaced by
// Redacted. j itself is not changed.
func RedactJob(j *axtype.Job) *axtype.Job {
	c := *j
	c.Executor.URL = RedactURL(j.Executor.URL)
	c.Executor.Headers = RedactHeaders(j.Executor.Headers)
	c.CallbackURL = RedactURL(j.CallbackURL)
	return &c
}

// WriteOnlyError is a Redacted placeholder with no stored value to stand
// for: in a new job, or for a header or URL part the stored job lacks.
type WriteOnlyError struct {
	Field string // executor.url, executor.headers.<name>, callback.url
	Value string
}

func (e *WriteOnlyError) Error() string {
	return fmt.Sprintf("%s: %q stands for a stored value, and there is none to keep: send the value itself", e.Field, Redacted)
}

// RestoreWriteOnly puts stored's values where job carries Redacted, so a
// job sent back as it was shown keeps its secrets. stored is nil for a new
// job, in which a placeholder is refused.
func RestoreWriteOnly(job, stored *axtype.Job) error {
	var old axtype.Job
	if stored != nil {
		old = *stored
	}
	execURL, err := restoreURL("executor.url", job.Executor.URL, old.Executor.URL)
	if err != nil {
		return err
	}
	callbackURL, err := restoreURL("callback.url", job.CallbackURL, old.CallbackURL)
	if err != nil {
		return err
	}
	if err := restoreHeaders(job.Executor.Headers, old.Executor.Headers); err != nil {
		return err
	}
	job.Executor.URL, job.CallbackURL = execURL, callbackURL
	return nil
}

func restoreHeaders(h, stored map[string]string) error {
	restored := map[string]string{}
	for k, v := range h {
		if v != Redacted {
			continue
		}
		old, ok := stored[k]
		if !ok {
			for sk, sv := range stored {
				if strings.EqualFold(sk, k) {
					old, ok = sv, true
					break
				}
			}
		}
		if !ok {
			return &WriteOnlyError{Field: "executor.headers." + k, Value: v}
		}
		restored[k] = old
	}
	for k, v := range restored {
		h[k] = v
	}
	return nil
}

// restoreURL puts back stored's userinfo and query values where raw has
// Redacted: a query value by its name and position among that name's
// values.
func restoreURL(field, raw, stored string) (string, error) {
	if !strings.Contains(raw, Redacted) {
		return raw, nil
	}
	u, err := url.Parse(raw)
	if err != nil {
		return raw, nil // the URL's own validation names it
	}
	s, _ := url.Parse(stored)
	if s == nil {
		s = &url.URL{}
	}
	missing := false
	if u.User != nil {
		user, redactedUser := u.User.Username(), u.User.Username() == Redacted
		pass, hasPass := u.User.Password()
		if redactedUser || (hasPass && pass == Redacted) {
			if s.User == nil {
				return "", &WriteOnlyError{Field: field, Value: raw}
			}
			if redactedUser {
				user = s.User.Username()
			}
			if hasPass && pass == Redacted {
				pass, _ = s.User.Password()
			}
			if hasPass {
				u.User = url.UserPassword(user, pass)
			} else {
				u.User = url.User(user)
			}
		}
	}
	storedQuery := s.Query()
	u.RawQuery = httptask.MapQuery(u.RawQuery, func(name string, i int, v string) string {
		if v != Redacted {
			return v
		}
		if vs := storedQuery[name]; i < len(vs) {
			return vs[i]
		}
		missing = true
		return v
	})
	if missing || hasRedactedPart(u) {
		return "", &WriteOnlyError{Field: field, Value: raw}
	}
	return u.String(), nil
}

// hasRedactedPart reports whether a placeholder is left in u's userinfo
// or query values.
func hasRedactedPart(u *url.URL) bool {
	if u.User != nil {
		if p, _ := u.User.Password(); p == Redacted || u.User.Username() == Redacted {
			return true
		}
	}
	for _, vs := range u.Query() {
		for _, v := range vs {
			if v == Redacted {
				return true
			}
		}
	}
	return false
}
