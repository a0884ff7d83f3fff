package cron

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// field describes one position of an expression: its bounds, the names it
// accepts and whether Quartz's ? may stand for *.
type field struct {
	name     string
	lo, hi   int
	names    map[string]int
	question bool
}

var (
	monthNames = map[string]int{
		"JAN": 1, "FEB": 2, "MAR": 3, "APR": 4, "MAY": 5, "JUN": 6,
		"JUL": 7, "AUG": 8, "SEP": 9, "OCT": 10, "NOV": 11, "DEC": 12,
	}
	dayNames = map[string]int{"SUN": 0, "MON": 1, "TUE": 2, "WED": 3, "THU": 4, "FRI": 5, "SAT": 6}

	second     = &field{name: "second", lo: 0, hi: 59}
	minute     = &field{name: "minute", lo: 0, hi: 59}
	hour       = &field{name: "hour", lo: 0, hi: 23}
	dayOfMonth = &field{name: "day of month", lo: 1, hi: 31, question: true}
	month      = &field{name: "month", lo: 1, hi: 12, names: monthNames}
	dayOfWeek  = &field{name: "day of week", lo: 0, hi: 7, names: dayNames, question: true}

	// fields is the seconds-first order that gronx expects.
	fields = [6]*field{second, minute, hour, dayOfMonth, month, dayOfWeek}
)

// parse validates text and returns it rewritten for gronx (numbers only,
// ? as *) and the set of plain values it matches (bit n for value n).
func (f *field) parse(text string) (string, uint64, error) {
	if text == "?" {
		if !f.question {
			return "", 0, errors.New("? is only allowed in day of month or day of week")
		}
		return "*", f.all(), nil
	}
	items := strings.Split(text, ",")
	var mask uint64
	for i, item := range items {
		canon, m, err := f.parseItem(item)
		if err != nil {
			return "", 0, err
		}
		items[i], mask = canon, mask|m
	}
	return strings.Join(items, ","), mask, nil
}

func (f *field) parseItem(item string) (string, uint64, error) {
	switch {
	case item == "":
		return "", 0, errors.New("empty element in list")
	case strings.Contains(item, "?") && f.question:
		return "", 0, errors.New("? must be the whole field")
	case strings.Contains(item, "?"):
		return "", 0, errors.New("? is only allowed in day of month or day of week")
	case f == dayOfMonth && strings.ContainsAny(strings.ToUpper(item), "LW"):
		// Quartz upper-cases the whole expression, so l and w are L and W.
		canon, err := f.parseMonthDaySpecial(strings.ToUpper(item))
		return canon, 0, err
	case f == dayOfWeek && strings.ContainsAny(strings.ToUpper(item), "L#"):
		canon, err := f.parseWeekDaySpecial(strings.ToUpper(item))
		return canon, 0, err
	}
	return f.parseStep(item)
}

// maxLastDayOffset bounds n in L-n, as in Quartz.
const maxLastDayOffset = 30

// parseMonthDaySpecial handles L (last day), nW (weekday nearest n) and
// Quartz's forms counted from the last day: LW, L-n and L-nW.
func (f *field) parseMonthDaySpecial(item string) (string, error) {
	if item == "L" {
		return "L", nil
	}
	if rest, ok := strings.CutPrefix(item, "L"); ok {
		return parseLastDayOffset(item, rest)
	}
	day, ok := strings.CutSuffix(item, "W")
	if !ok || day == "" || strings.ContainsAny(day, "LW") {
		return "", fmt.Errorf("invalid value %q (use L, LW, L-n, L-nW, or nW like 15W)", item)
	}
	n, err := f.value(day)
	if err != nil {
		return "", err
	}
	return strconv.Itoa(n) + "W", nil
}

// parseLastDayOffset parses what follows the L of LW, L-n and L-nW.
func parseLastDayOffset(item, rest string) (string, error) {
	offset, weekday := strings.CutSuffix(rest, "W")
	if offset == "" {
		return "L" + rest, nil // LW
	}
	n, ok := strings.CutPrefix(offset, "-")
	v, err := strconv.Atoi(n)
	if !ok || !isDigits(n) || err != nil || v < 1 || v > maxLastDayOffset {
		return "", fmt.Errorf("invalid value %q (after L use W, -n or -nW with n from 1 to %d, like L-3)", item, maxLastDayOffset)
	}
	canon := "L-" + strconv.Itoa(v)
	if weekday {
		canon += "W"
	}
	return canon, nil
}

// parseWeekDaySpecial handles nL (last n-day of the month) and n#k (k-th).
func (f *field) parseWeekDaySpecial(item string) (string, error) {
	if day, nth, ok := strings.Cut(item, "#"); ok {
		return f.parseNth(day, nth)
	}
	day, _ := strings.CutSuffix(item, "L")
	if day == "" {
		return "", errors.New(`L alone in day of week (Quartz's Saturday) is not supported: write SAT or 6, or nL like 5L for the last Friday`)
	}
	if strings.ContainsAny(day, "L#") {
		return "", fmt.Errorf("invalid value %q (use nL like 5L for the last Friday)", item)
	}
	n, err := f.value(day)
	if err != nil {
		return "", err
	}
	return strconv.Itoa(n) + "L", nil
}

func (f *field) parseNth(day, nth string) (string, error) {
	n, err := f.value(day)
	if err != nil {
		return "", err
	}
	k, err := strconv.Atoi(nth)
	if err != nil || !isDigits(nth) || k < 1 || k > 5 {
		return "", fmt.Errorf("occurrence %q after # must be 1-5", nth)
	}
	return strconv.Itoa(n) + "#" + strconv.Itoa(k), nil
}

// parseStep handles base and base/step, where base is *, a value or a range.
func (f *field) parseStep(item string) (string, uint64, error) {
	base, stepText, hasStep := strings.Cut(item, "/")
	lo, hi, canon, err := f.parseBase(base, hasStep)
	if err != nil || !hasStep {
		return canon, f.span(lo, hi, 1), err
	}
	step, err := strconv.Atoi(stepText)
	if max := f.hi - f.lo + 1; err != nil || !isDigits(stepText) || step < 1 || step > max {
		return "", 0, fmt.Errorf("step %q out of range 1-%d", stepText, max)
	}
	return canon + "/" + strconv.Itoa(step), f.span(lo, hi, step), nil
}

// parseBase returns the bounds of *, a value or a range. A lone value
// followed by a step runs up to the field's maximum, as gronx reads "10/15".
func (f *field) parseBase(base string, hasStep bool) (lo, hi int, canon string, err error) {
	if base == "*" {
		return f.lo, f.hi, "*", nil
	}
	first, last, isRange := strings.Cut(base, "-")
	if lo, err = f.value(first); err != nil {
		return 0, 0, "", err
	}
	if !isRange {
		hi = lo
		if hasStep {
			hi = f.hi
		}
		return lo, hi, strconv.Itoa(lo), nil
	}
	if hi, err = f.rangeEnd(lo, last); err != nil {
		return 0, 0, "", err
	}
	return lo, hi, strconv.Itoa(lo) + "-" + strconv.Itoa(hi), nil
}

// rangeEnd parses the end of a range; in day of week a Sunday end (0 or
// SUN) means 7 so that "FRI-SUN" reads as people mean it.
func (f *field) rangeEnd(lo int, text string) (int, error) {
	hi, err := f.value(text)
	if err != nil {
		return 0, err
	}
	if f == dayOfWeek && hi == 0 && lo > 0 {
		hi = 7
	}
	if hi < lo {
		return 0, fmt.Errorf("range %d-%d is reversed (start must not exceed end)", lo, hi)
	}
	return hi, nil
}

// value parses a number or, where the field allows, a name.
func (f *field) value(text string) (int, error) {
	if n, ok := f.names[strings.ToUpper(text)]; ok {
		return n, nil
	}
	if text == "" {
		return 0, errors.New("missing value")
	}
	if !isDigits(text) {
		if f.names != nil && isLetters(text) {
			return 0, fmt.Errorf("unknown name %q", text)
		}
		return 0, fmt.Errorf("invalid value %q", text)
	}
	n, err := strconv.Atoi(text)
	if err != nil || n < f.lo || n > f.hi {
		return 0, fmt.Errorf("value %s out of range %d-%d", text, f.lo, f.hi)
	}
	return n, nil
}

// all is the set of every value of the field.
func (f *field) all() uint64 { return f.span(f.lo, f.hi, 1) }

// span is the set lo, lo+step, ... up to hi.
func (f *field) span(lo, hi, step int) uint64 {
	var mask uint64
	for v := lo; v <= hi; v += step {
		mask |= 1 << v
	}
	return mask
}

func isDigits(s string) bool {
	return s != "" && strings.Trim(s, "0123456789") == ""
}

func isLetters(s string) bool {
	return s != "" && strings.Trim(strings.ToUpper(s), "ABCDEFGHIJKLMNOPQRSTUVWXYZ") == ""
}
