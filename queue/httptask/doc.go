// Package httptask is the one contract of a job of kind http: the request
// that runs one attempt of one shard, and what its answer means. ax serve
// sends it for a job without target labels (agentless), an agent for a job
// with them; both build it here, so adding labels to a job changes who
// sends the request and nothing else.
//
// The request goes to the job's URL with its method (POST by default) and
// headers. Its body is the Envelope as JSON, or the job's body template
// rendered over it; GET and HEAD carry none. ax's headers win over the
// job's: Idempotency-Key (the execution id, or "<execution id>:<shard
// index>" when the run has several shards, the same on every attempt),
// the Standard Webhooks signature under the job's signing secret
// (webhook-id = the idempotency key; see package webhook, the receiver
// kit), Ax-Execution-Id, Ax-Task-Id, Ax-Shard-Index, Ax-Shard-Total,
// Ax-Attempt, Ax-Deadline, Ax-Completion-Url and Ax-Completion-Token, and
// the run's traceparent. Redirects are not followed.
//
// The answer: 202 leaves the task running until the target posts its
// result to the completion URL with the completion token (the task's
// current lease token) before the deadline; any other 2xx succeeds with the
// body as result; anything else, or no answer, fails the attempt (retried
// per the job's policy) with error code http_<status>, connect or timeout.
//
// The package imports neither the database nor the server: agents, which
// never hold database credentials, import it as the server does.
package httptask
