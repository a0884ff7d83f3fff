package console

import (
	"fmt"
	"strconv"
	"strings"
)

// cronWords says a cron expression in words for the common shapes
// ("every day at 01:30 Europe/London", "every 2 minutes", "on weekdays at
// 09:00 UTC"); ok is false for any other, which the page shows as the
// expression itself. It reads what the scheduler accepted (the API
// validated it), so it only recognises, never validates.
func cronWords(expr, zone string) (string, bool) {
	f := strings.Fields(expr)
	if len(f) == 6 { // seconds first
		if f[0] != "0" {
			return "", false
		}
		f = f[1:]
	}
	if len(f) != 5 {
		return "", false
	}
	minute, hour, dom, month, dow := f[0], f[1], f[2], f[3], strings.ToUpper(f[4])
	anyDay := (dom == "*" || dom == "?") && (dow == "*" || dow == "?")
	if month != "*" {
		return "", false
	}
	if hour == "*" && anyDay {
		switch {
		case minute == "*":
			return "every minute", true
		case strings.HasPrefix(minute, "*/"):
			n, err := strconv.Atoi(minute[2:])
			if err != nil {
				return "", false
			}
			return "every " + plural(n, "minute"), true
		}
		if m, ok := number(minute, 59); ok {
			return fmt.Sprintf("every hour at minute %d", m), true
		}
		return "", false
	}
	m, ok := number(minute, 59)
	if !ok {
		return "", false
	}
	if strings.HasPrefix(hour, "*/") && anyDay {
		n, err := strconv.Atoi(hour[2:])
		if err != nil {
			return "", false
		}
		return fmt.Sprintf("every %s at minute %d", plural(n, "hour"), m), true
	}
	var times []string
	for _, h := range strings.Split(hour, ",") {
		hh, ok := number(h, 23)
		if !ok {
			return "", false
		}
		times = append(times, fmt.Sprintf("%02d:%02d", hh, m))
	}
	at := "at " + strings.Join(times, " and ") + " " + zone
	switch {
	case anyDay:
		return "every day " + at, true
	case dom == "*" || dom == "?":
		days, ok := weekdays(dow)
		if !ok {
			return "", false
		}
		return days + " " + at, true
	case dow == "*" || dow == "?":
		if dom == "L" {
			return "on the last day of every month " + at, true
		}
		if d, ok := number(dom, 31); ok && d >= 1 {
			return fmt.Sprintf("on day %d of every month %s", d, at), true
		}
	}
	return "", false
}

var dayNames = []string{"Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"}

// weekdays says a day-of-week field of plain days, lists and ranges.
func weekdays(field string) (string, bool) {
	switch field {
	case "1-5", "MON-FRI":
		return "on weekdays", true
	case "0,6", "6,0", "SAT,SUN", "SUN,SAT", "6-7", "SAT-SUN":
		return "on weekends", true
	}
	var names []string
	for _, part := range strings.Split(field, ",") {
		d, ok := dayOf(part)
		if !ok {
			return "", false
		}
		names = append(names, dayNames[d])
	}
	if len(names) == 1 {
		return "every " + names[0], true
	}
	return "on " + strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1], true
}

func dayOf(s string) (int, bool) {
	for i, n := range dayNames {
		if strings.EqualFold(s, n[:3]) {
			return i, true
		}
	}
	d, ok := number(s, 7)
	return d % 7, ok
}

// number reads a plain number from 0 to most.
func number(s string, most int) (int, bool) {
	if s == "" || len(s) > 2 || strings.Trim(s, "0123456789") != "" {
		return 0, false
	}
	n, err := strconv.Atoi(s)
	return n, err == nil && n <= most
}

// intervalWords says an interval in seconds in the largest whole unit.
func intervalWords(secs int64) string {
	switch {
	case secs > 0 && secs%86400 == 0:
		return "every " + plural(int(secs/86400), "day")
	case secs > 0 && secs%3600 == 0:
		return "every " + plural(int(secs/3600), "hour")
	case secs > 0 && secs%60 == 0:
		return "every " + plural(int(secs/60), "minute")
	}
	return "every " + plural(int(secs), "second")
}

// plural is "minute" for 1, "2 minutes" for 2.
func plural(n int, unit string) string {
	if n == 1 {
		return unit
	}
	return strconv.Itoa(n) + " " + unit + "s"
}
