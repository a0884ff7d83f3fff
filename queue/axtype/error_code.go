package axtype

// MaxErrorCodeLength is the longest error code a task result may carry
// (see ValidErrorCode).
const MaxErrorCodeLength = 64

// ErrorCodePattern is ValidErrorCode as a regular expression: the check
// task_error_code_format of ax.task and ax.task_history holds the column to
// it (db's TestErrorCodeCheckMatchesRule compares the two).
const ErrorCodePattern = "^[a-z0-9_.-]{1,64}$"

// ValidErrorCode says whether code may be stored as a task's error code:
// 1 to MaxErrorCodeLength characters of a-z, 0-9, '_', '.' and '-'. Codes
// label metrics and group failures, so they stay short and plain. It is
// the one definition of the rule: the server checks results with it, the
// agent drops codes it refuses, and the SQL check is tested against it.
func ValidErrorCode(code string) bool {
	if code == "" || len(code) > MaxErrorCodeLength {
		return false
	}
	for i := 0; i < len(code); i++ {
		c := code[i]
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '_' && c != '.' && c != '-' {
			return false
		}
	}
	return true
}

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
	// ErrorCodeResultTooLarge: the task's result was larger than
	// MaxResultBytes; the attempt failed without it, and is retried as any
	// failure (the SDKs check the same bound before they send, and report
	// the same code).
	ErrorCodeResultTooLarge = "result_too_large"
	// ErrorCodeConcurrencyKeyInvalid: the job's concurrency key did not
	// render for the run's params (a missing param, or longer than
	// MaxConcurrencyKeyBytes); the task failed when the run was made,
	// without running: it could not be held to its key's limit.
	ErrorCodeConcurrencyKeyInvalid = "concurrency_key_invalid"
	// ErrorCodeAgentOffline: the task was pinned to its agent (a broadcast
	// run's), and the agent went offline before it leased the task; no
	// other agent may take it, so it failed without running.
	ErrorCodeAgentOffline = "agent_offline"
)
