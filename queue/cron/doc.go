// Package cron parses ax's cron dialect and computes fire times in a job's
// IANA timezone, correct across daylight-saving transitions. Matching is
// delegated to gronx on naive wall-clock times; this package adds the dialect
// checks and the mapping from wall time to instants. When the date fields are
// all *, the next time of day comes from the second, minute and hour fields'
// value sets alone (tests check them against gronx).
//
// # Fields
//
// An expression has 5 or 6 fields separated by spaces:
//
//	5 fields:          minute hour day-of-month month day-of-week
//	6 fields:   second minute hour day-of-month month day-of-week
//
// Six fields always start with seconds: a trailing four-digit field is not
// taken for a year, so "0 0 * * * 2026" is rejected (2026 is not a day of
// week). Seven fields (with a year) are rejected.
//
//	field          values   names     special
//	second         0-59
//	minute         0-59
//	hour           0-23
//	day of month   1-31               ?  L (last day)  15W (weekday nearest the 15th)
//	month          1-12     JAN-DEC
//	day of week    0-7      SUN-SAT   ?  5L (last Friday)  MON#2 (second Monday)
//
// Day of week counts from Sunday = 0, like Vixie cron and unlike Quartz
// (where Sunday is 1): 1 is Monday, 6 is Saturday and 7 is Sunday again, so
// "0 0 12 * * 1" fires at noon on Mondays. A range may end on Sunday written
// as 0, 7 or SUN ("FRI-SUN" is Friday to Sunday). Names are case-insensitive.
//
// Every field takes * (any), a value, a range "1-5", a step "*/15", "10/15"
// (from 10 to the maximum) or "1-30/7", and comma-separated lists of those.
// Steps run from 1 to the number of values in the field. nW never leaves its
// month and skips months shorter than n; LW and a bare L in day of week are
// not supported.
//
// ? is accepted in day of month or day of week, where it means *; it must be
// the whole field and cannot appear in both (as in Quartz), nor in any other
// field. When both day of month and day of week are restricted (neither is *,
// ? or starts with *), a date matches when either matches, as in Vixie cron:
// "0 0 1 * MON" fires on the 1st and on every Monday.
//
// # Macros
//
//	@yearly, @annually   0 0 1 1 *
//	@monthly             0 0 1 * *
//	@weekly              0 0 * * 0
//	@daily, @midnight    0 0 * * *
//	@hourly              0 * * * *
//
// Other macros, including gronx's @everysecond and @5minutes and the
// "@every 5m" interval syntax, are rejected: write "* * * * * *" or
// "*/5 * * * *" so every schedule reads as a cron expression.
//
// # Validity
//
// Parse rejects wrong field counts, out-of-range or unknown values, reversed
// ranges, garbage and expressions that never fire ("0 0 30 2 *"): an
// expression must match a date within 50 years, which is more than the
// longest Gregorian gap between two matches of any expression (a Monday
// February 29th can be 40 years away). The timezone is an IANA name; ""
// means UTC; "Local" is rejected because it depends on the machine. A
// schedule's Location is named canonically (see CanonicalZone), the form
// Postgres accepts in AT TIME ZONE.
//
// # Daylight saving time
//
// The expression is evaluated in its timezone, Vixie-cron style:
//
//   - When the hour field matches every hour (*, */1, 0-23), the schedule
//     follows the real timeline: an instant fires when its local wall time
//     matches. A skipped local hour is never reached and a repeated one is
//     reached twice, so "0 */15 * * * *" fires every 15 minutes through
//     any transition.
//   - Otherwise it fires once per local date and matching wall time. A wall
//     time inside a spring-forward gap fires at the end of the gap, and
//     several wall times of one gap fire once there; a wall time repeated by
//     a fall-back fires at its first occurrence only.
//
// Next is computed from a reference instant (the previous scheduled time),
// never from the clock, and is strictly increasing.
package cron
