package axtype

// MaxErrorCodeLength is the longest error code a task result may carry:
// 1 to 64 of a-z, 0-9, '_', '.' and '-' (queue.ValidErrorCode). The check
// task_error_code_format holds the column to the same rule.
const MaxErrorCodeLength = 64

// Error codes the server itself gives. Agents and HTTP targets report
// their own (exit_3, signal_killed, http_503…).
const (
	// ErrorCodeTimeout: the task ran past its timeout (or its request got
	// no answer within it).
	ErrorCodeTimeout = "timeout"
	// ErrorCodeLeaseExpired: its agent, still heartbeating, stopped
	// renewing the lease.
	ErrorCodeLeaseExpired = "lease_expired"
	// ErrorCodeLost: the lease was lost with its agent (offline or
	// silent); the task runs again on the same attempt, and fails with
	// this code after the server's cap of lost leases.
	ErrorCodeLost = "lost"
	// ErrorCodeConnect: an agentless HTTP request got no complete answer
	// (refused, name not found, address not allowed, TLS, or the
	// connection broke); one that ran out of time is ErrorCodeTimeout.
	ErrorCodeConnect = "connect"
	// ErrorCodeBadResult: the task's result (or error text) is something
	// Postgres cannot store (a lone UTF-16 surrogate, NUL, invalid UTF-8,
	// a number beyond numeric…); the task failed with the reason instead,
	// and is not retried: the same run gives the same answer, and a retry
	// would repeat the task's side effects for nothing.
	ErrorCodeBadResult = "bad_result"
)
