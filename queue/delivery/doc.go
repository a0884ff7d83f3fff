// Package delivery is what ax sends out: River jobs inserted in the
// transaction that causes them (the outbox), callbacks to the job's URL
// (retries, breaker, signatures, redelivery) and agentless HTTP tasks
// (requests, slots per host, completion by token).
package delivery
