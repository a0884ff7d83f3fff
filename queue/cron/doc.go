// Package cron parses ax's cron dialect and computes fire times in a job's
// IANA timezone, correct across daylight-saving transitions. Matching is
// delegated to gronx on naive wall-clock times; this package adds the dialect
// checks and the mapping from wall time to instants. When the date fields are
// all *, the next time of day comes from the second, minute and hour fields'
// value sets alone (tests check them against gronx). Quartz's LW, L-n and
// L-nW, which gronx does not know, are matched here date by date.
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
//	                                     LW (last weekday)  L-3 (3 days before the last)
//	                                     L-3W (weekday nearest L-3)
//	month          1-12     JAN-DEC
//	day of week    0-7      SUN-SAT   ?  5L or FRIL (last Friday)  MON#2 (second Monday)
//
// Day of week counts from Sunday = 0, like Vixie cron and unlike Quartz
// (where Sunday is 1): 1 is Monday, 6 is Saturday and 7 is Sunday again, so
// "0 0 12 * * 1" fires at noon on Mondays. A range may end on Sunday written
// as 0, 7 or SUN ("FRI-SUN" is Friday to Sunday). Names are case-insensitive.
//
// Every field takes * (any), a value, a range "1-5", a step "*/15", "10/15"
// (from 10 to the maximum) or "1-30/7", and comma-separated lists of those.
// Steps run from 1 to the number of values in the field. The letters L, W
// and the names may be written in either case ("l-3", "15w", "5l"), as
// Quartz, which upper-cases the whole expression, accepts them.
//
// # Quartz's day forms
//
// nW never leaves its month and skips months shorter than n. L-n takes n
// from 1 to 30 and, likewise, skips months with n days or fewer (February
// for L-28 and beyond; Quartz there steps into the previous month or
// stops). A W after L or L-n moves a Saturday back to Friday (or, on the
// 1st, on to Monday the 3rd) and a Sunday on to Monday (or, on the last
// day, back to Friday). All of these may stand in a list ("1,L-3").
// Tests check LW, lw, L-1, L-3, l-3, L-3W, L-27, L, 15W, 1w, 5L, 5l, FRIL,
// 0L and 1L against the fire times Quartz's own CronExpression computes
// for 2026 to 2028, leap February included (testdata/quartz-day-forms.json).
//
// Quartz forms accepted: ? in one day field; L, LW, L-n, L-nW, nW in day of
// month; nL, dayL (FRIL), n#k, day#k in day of week; lists mixing them
// with plain values (also where Quartz refuses "6L,2" in day of week).
//
// Quartz forms refused, each with an error naming the field: the seventh
// (year) field; Quartz's day-of-week numbers, where Sunday is 1 (ax reads
// a number as Vixie cron does, so Quartz's "6L" is written "5L" here: the
// number is refused only when out of 0-7, otherwise it means another day);
// L alone in day of week (Quartz's Saturday: write SAT or 6); L-n with n
// above 30 or 0; L or # in any other field; a W after a range or list
// ("1-5W"); # with an occurrence above 5.
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
