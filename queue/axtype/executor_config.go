package axtype

// ExecutorConfig is what a job's executor does, as ax.job.executor stores
// it: the fields of its kind are set, the others empty (and left out of
// the stored JSON).
type ExecutorConfig struct {
	Command string            `json:"command,omitempty"` // shell: run with /bin/sh -c
	URL     string            `json:"url,omitempty"`     // http
	Method  string            `json:"method,omitempty"`  // http
	Headers map[string]string `json:"headers,omitempty"` // http
	Body    string            `json:"body,omitempty"`    // http: body template
	Handler string            `json:"handler,omitempty"` // handler: registered name
}
