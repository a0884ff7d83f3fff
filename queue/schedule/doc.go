// Package schedule decides when jobs fire: the trigger loop claims due
// triggers, plans each fire (misfire and overlap policies, skipped ticks)
// and writes it through dispatch, once per tick across replicas; next-fire
// times come from cron (in the job's time zone) or the interval.
package schedule
