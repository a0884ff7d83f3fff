package console

import (
	"bytes"
	"io"
	"net/http"
	"strconv"
)

// inProcess is the generated client's HTTP client: it hands each request
// to the API handler in this process instead of a socket, so the console
// goes through the API's authentication, scopes, group limits, input
// bounds and validation like any client.
type inProcess struct {
	h http.Handler
}

func (p inProcess) Do(req *http.Request) (*http.Response, error) {
	if req.Body == nil {
		req.Body = http.NoBody
	}
	req.RequestURI = req.URL.RequestURI()
	rec := &recorder{header: http.Header{}}
	p.h.ServeHTTP(rec, req)
	if rec.status == 0 {
		rec.status = http.StatusOK
	}
	return &http.Response{
		Status: strconv.Itoa(rec.status) + " " + http.StatusText(rec.status), StatusCode: rec.status,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: rec.header, Body: io.NopCloser(&rec.body), ContentLength: int64(rec.body.Len()), Request: req,
	}, nil
}

// recorder keeps an in-process answer. The API bounds its own answers
// (page sizes, log pages of at most 4 MiB).
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
}

func (r *recorder) Write(p []byte) (int, error) {
	r.WriteHeader(http.StatusOK)
	return r.body.Write(p)
}
