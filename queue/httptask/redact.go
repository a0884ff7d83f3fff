package httptask

import (
	"errors"
	"net/url"
	"strings"
)

// Redacted stands in for a write-only value of a job wherever it is shown
// (queue.Redacted documents which): header values and URL credentials.
const Redacted = "ax-redacted"

// RedactURL is raw with its userinfo and (non-empty) query values
// replaced by Redacted; raw itself when it has neither or is not a URL.
func RedactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || (u.User == nil && u.RawQuery == "") {
		return raw
	}
	if u.User != nil {
		if _, ok := u.User.Password(); ok {
			u.User = url.UserPassword(Redacted, Redacted)
		} else {
			u.User = url.User(Redacted)
		}
	}
	if u.RawQuery != "" {
		u.RawQuery = MapQuery(u.RawQuery, func(_ string, _ int, v string) string {
			if v == "" {
				return v
			}
			return Redacted
		})
	}
	return u.String()
}

// RedactURLError hides the credentials of the URL a *url.Error (what
// http.Client.Do returns) quotes, so a task's or callback's error text,
// shown to read keys, does not carry them.
func RedactURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		ue.URL = RedactURL(ue.URL)
	}
	return err
}

// MapQuery rewrites each value of a raw query with f(name, index among
// the name's values, value), keeping the parameters' order (url.Values
// would sort them).
func MapQuery(raw string, f func(name string, i int, value string) string) string {
	seen := map[string]int{}
	parts := strings.Split(raw, "&")
	for n, p := range parts {
		if p == "" {
			continue
		}
		k, v, _ := strings.Cut(p, "=")
		name, err1 := url.QueryUnescape(k)
		value, err2 := url.QueryUnescape(v)
		if err1 != nil || err2 != nil {
			name, value = k, v
		}
		nv := f(name, seen[name], value)
		seen[name]++
		if nv != value {
			parts[n] = k + "=" + url.QueryEscape(nv)
		}
	}
	return strings.Join(parts, "&")
}
