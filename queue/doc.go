// Package queue is ax's engine: job lifecycle, the trigger loop, the lease
// broker, the reaper and flow control. It owns scheduling decisions; the
// db package owns how they are stored.
package queue
