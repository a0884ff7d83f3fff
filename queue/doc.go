// Package queue is ax's engine, seen from the API: the services the HTTP
// operations call (jobs, executions, runs, waits, job secrets, rate
// classes, API keys, signing keys, idempotency keys); the API calls no
// database function itself. Each moving part below them has its own
// package, imported one way:
//
//   - notify: the one LISTEN connection per process and every NOTIFY
//     channel name;
//   - metrics: the engine's Prometheus metrics and state gauges;
//   - jobtemplate: the bounded template subset of route keys and bodies;
//   - delivery: what ax sends out — River, the outbox, callbacks,
//     agentless HTTP tasks;
//   - dispatch: which agent runs which task — the lease broker, the task
//     router, rate-class admission, the reaper;
//   - schedule: when jobs fire — the trigger loop, fire planning,
//     next-fire times;
//   - cron, outbound, webhook, monitoring: the cron dialect, safe outbound
//     HTTP, the callback contract for receivers, alert rules;
//   - clock: the settable time tests hand dispatch and schedule instead of
//     the database's now(), to move past leases and ticks without sleeping.
//
// clock, notify, metrics and jobtemplate → delivery → dispatch → schedule
// → queue.
package queue
