package axtype

import "cmp"

// Job defaults: what FillDefaults gives a setting a definition leaves zero.
const (
	DefaultGroup                  = "default"
	DefaultTimezone               = "UTC"
	DefaultHTTPMethod             = "POST"
	DefaultShardCount             = 1
	DefaultShardRangeTo           = 1 << 32 // the default shard range is the 32-bit hash space [0, 2^32)
	DefaultTimeoutSeconds         = 3600
	DefaultRetryMaxAttempts       = 4 // the first and 3 retries: after 5, 10 and 20 s (base 2 from DefaultRetryBackoffSeconds)
	DefaultRetryBackoffSeconds    = 5
	DefaultRetryBackoffMaxSeconds = 600 // or the backoff, when that is longer
	DefaultMisfireWindowSeconds   = 86400
	DefaultMisfireMaxFires        = 100
)

// MaxAgentlessTimeoutSeconds caps the timeout of an agentless job, and is
// its default: ax serve holds one of its HTTP workers while the request
// runs. Longer work runs on an agent, or answers 202 and posts its result.
const MaxAgentlessTimeoutSeconds = 900

// FillDefaults gives every setting that j leaves zero its default. It is
// the one place job defaults are decided: the API calls it for every
// definition it stores (create, replace, PATCH, ad-hoc runs); the spec's
// default: tags and the columns' SQL defaults are tests' copies of it.
// JobInsert and JobUpdate store what they are given.
func (j *Job) FillDefaults() {
	j.Group = cmp.Or(j.Group, DefaultGroup)
	j.Timezone = cmp.Or(j.Timezone, DefaultTimezone)
	if j.ExecutorKind == ExecutorHTTP {
		j.Executor.Method = cmp.Or(j.Executor.Method, DefaultHTTPMethod)
	}
	j.RouteStrategy = cmp.Or(j.RouteStrategy, RouteRoundRobin)
	j.ShardCount = cmp.Or(j.ShardCount, DefaultShardCount)
	if j.ShardRangeFrom == 0 && j.ShardRangeTo == 0 {
		j.ShardRangeTo = DefaultShardRangeTo
	}
	j.TimeoutSeconds = cmp.Or(j.TimeoutSeconds, j.defaultTimeoutSeconds())
	j.TimeoutMode = cmp.Or(j.TimeoutMode, TimeoutFixed)
	j.RetryMaxAttempts = cmp.Or(j.RetryMaxAttempts, DefaultRetryMaxAttempts)
	j.RetryBackoffSeconds = cmp.Or(j.RetryBackoffSeconds, DefaultRetryBackoffSeconds)
	j.RetryBackoffMaxSeconds = cmp.Or(j.RetryBackoffMaxSeconds, max(DefaultRetryBackoffMaxSeconds, j.RetryBackoffSeconds))
	j.ConcurrencyPolicy = cmp.Or(j.ConcurrencyPolicy, ConcurrencyAllow)
	j.MisfirePolicy = cmp.Or(j.MisfirePolicy, MisfireFireOnce)
	j.MisfireWindowSeconds = cmp.Or(j.MisfireWindowSeconds, DefaultMisfireWindowSeconds)
	j.MisfireMaxFires = cmp.Or(j.MisfireMaxFires, DefaultMisfireMaxFires)
	j.DegradeAction = cmp.Or(j.DegradeAction, DegradeWait)
}

// defaultTimeoutSeconds is the job's timeout when it names none: an hour,
// or the most an agentless task may take.
func (j *Job) defaultTimeoutSeconds() int {
	if j.Agentless() {
		return MaxAgentlessTimeoutSeconds
	}
	return DefaultTimeoutSeconds
}
