// Package routing decides which agent a task prefers among a job's live
// candidates. It is pure: no I/O, no clocks, no hidden randomness. Every
// decision is a function of its inputs (the candidates, the request's key,
// sequence number and caller-supplied random value), so the scheduler can
// replay and test it, and every replica reaches the same answer.
//
// Two objects carry the work so that hot decisions stay cheap:
//
//   - A Ring is the consistent-hash table for one membership (a set of agent
//     IDs). Build it when agents join or leave and share it freely: it is
//     immutable and safe for concurrent use.
//   - A Pool is a snapshot of a job's candidates (health and load) for one
//     batch of decisions. Build it per lease round from fresh agent rows,
//     optionally with the Ring of that membership, then call Pick per task
//     and Assigned after placing one. A Pool is not safe for concurrent use.
package routing
