package webhook

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
)

// messageKey is the context key of the Message that Middleware verified.
type messageKey struct{}

// Middleware verifies each request before next sees it. A request that
// fails is answered 401 with the reason (413 when its body is over
// MaxBodyBytes, 500 when the Verifier has no usable secret) and never
// reaches next. next gets the verified Message through MessageFromContext
// and the body, already read, in r.Body as usual.
func (v *Verifier) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, v.maxBodyBytes()))
		if err != nil {
			v.refuse(w, r, readErrorStatus(err), err)
			return
		}
		msg, err := v.Verify(r.Header, body)
		if err != nil {
			v.refuse(w, r, verifyErrorStatus(err), err)
			return
		}
		r = r.WithContext(context.WithValue(r.Context(), messageKey{}, msg))
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		next.ServeHTTP(w, r)
	})
}

// MessageFromContext returns the Message that Middleware verified for the
// request whose context is ctx.
func MessageFromContext(ctx context.Context) (Message, bool) {
	msg, ok := ctx.Value(messageKey{}).(Message)
	return msg, ok
}

func (v *Verifier) refuse(w http.ResponseWriter, r *http.Request, status int, err error) {
	if v.Logger != nil {
		v.Logger.WarnContext(r.Context(), "webhook: request refused",
			"status", status, "webhook_id", headerValue(r.Header, HeaderID), "error", err)
	}
	text := err.Error()
	if status == http.StatusInternalServerError {
		text = "webhook: receiver misconfigured" // the sender cannot fix it; keep details in the log
	}
	http.Error(w, text, status)
}

func (v *Verifier) maxBodyBytes() int64 {
	if v.MaxBodyBytes > 0 {
		return v.MaxBodyBytes
	}
	return defaultMaxBodyBytes
}

func readErrorStatus(err error) int {
	if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
		return http.StatusRequestEntityTooLarge
	}
	return http.StatusBadRequest
}

func verifyErrorStatus(err error) int {
	if errors.Is(err, ErrNoSecrets) || errors.Is(err, ErrInvalidSecret) {
		return http.StatusInternalServerError
	}
	return http.StatusUnauthorized
}
