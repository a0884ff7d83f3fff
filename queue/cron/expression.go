package cron

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// macros are the @ shorthands of the dialect, as 5-field expressions.
var macros = map[string]string{
	"@yearly":   "0 0 1 1 *",
	"@annually": "0 0 1 1 *",
	"@monthly":  "0 0 1 * *",
	"@weekly":   "0 0 * * 0",
	"@daily":    "0 0 * * *",
	"@midnight": "0 0 * * *",
	"@hourly":   "0 * * * *",
}

const macroList = "@yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly"

// horizonYears bounds every search. The longest gap between two matches of
// any expression is 40 years (a Monday February 29th across 2100).
const horizonYears = 50

// validationRef is the fixed start of the never-fires check, so that Parse
// does not depend on the clock; any start works within horizonYears.
var validationRef = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// expression is a validated cron expression in gronx's form.
type expression struct {
	gronx    string // 7 fields, seconds first, year *, numbers only
	timeline bool   // the hour field matches every hour
	everyDay bool   // the date fields are *: the clock fields alone decide

	// lastDayForms is set when day of month holds LW, L-n or L-nW, which
	// gronx does not know: dates are then matched by dateDue, from the
	// canonical day-of-month, month and day-of-week fields below.
	lastDayForms  bool
	dom, mon, dow string

	// clock holds the values of the second, minute and hour fields (bit n
	// for value n); they let nextWall skip times of day gronx would step
	// through one unit at a time.
	clock [3]uint64
}

// compile validates text in our dialect and rewrites it for gronx.
func compile(text string) (expression, error) {
	parts, err := split(text)
	if err != nil {
		return expression{}, err
	}
	seconds := len(parts) == 6
	if !seconds {
		parts = append([]string{"0"}, parts...)
	}
	e, err := compileFields(parts, seconds)
	if err != nil {
		return expression{}, err
	}
	return e, e.checkFires()
}

// split expands a macro and splits the fields, checking their count.
func split(text string) ([]string, error) {
	text = strings.TrimSpace(text)
	if text == "" {
		return nil, errors.New("expression is empty")
	}
	if strings.HasPrefix(text, "@") {
		m, ok := macros[strings.ToLower(text)]
		if !ok {
			return nil, fmt.Errorf("unknown macro %q (supported: %s)", text, macroList)
		}
		text = m
	}
	parts := strings.Fields(text)
	switch n := len(parts); n {
	case 5, 6:
		return parts, nil
	case 7:
		return nil, errors.New("7 fields (with a year) are not supported: use 5 fields (minute first) or 6 (second first)")
	default:
		return nil, fmt.Errorf("expected 5 fields (minute hour day-of-month month day-of-week) or 6 (second first), got %d", n)
	}
}

// compileFields parses the six seconds-first fields. Errors number the
// fields as the user wrote them.
func compileFields(parts []string, seconds bool) (expression, error) {
	var e expression
	canon := make([]string, 0, 7)
	for i, text := range parts {
		c, mask, err := fields[i].parse(text)
		if err != nil {
			return expression{}, fieldErr(i, seconds, text, err)
		}
		if i < len(e.clock) {
			e.clock[i] = mask
		}
		canon = append(canon, c)
	}
	if parts[3] == "?" && parts[5] == "?" {
		return expression{}, errors.New("? may be used in day of month or day of week, not both")
	}
	canon = append(canon, "*") // an explicit year keeps gronx from guessing one
	e.gronx = strings.Join(canon, " ")
	e.timeline = e.clock[2] == hour.all()
	e.everyDay = canon[3] == "*" && canon[4] == "*" && canon[5] == "*"
	e.dom, e.mon, e.dow = distinctItems(canon[3]), canon[4], canon[5]
	e.lastDayForms = hasLastDayForm(e.dom)
	return e, nil
}

// distinctItems drops repeated items of a list field: each is tried on
// each date the search for the next fire looks at.
func distinctItems(field string) string {
	items := strings.Split(field, ",")
	kept := items[:0]
	for _, item := range items {
		if !slices.Contains(kept, item) {
			kept = append(kept, item)
		}
	}
	return strings.Join(kept, ",")
}

func fieldErr(i int, seconds bool, text string, err error) error {
	pos := i
	if seconds {
		pos++
	}
	reason := fmt.Sprintf("field %d (%s): %v", pos, fields[i].name, err)
	if seconds && fields[i] == dayOfWeek && len(text) == 4 && isDigits(text) {
		reason += "; 6 fields are second minute hour day-of-month month day-of-week, a year field is not supported"
	}
	return errors.New(reason)
}

// checkFires rejects expressions that match no date, like February 30th.
func (e expression) checkFires() error {
	limit := validationRef.AddDate(horizonYears, 0, 0)
	if w, ok := e.nextWall(validationRef); !ok || w.After(limit) {
		return fmt.Errorf("expression never fires: no matching date within %d years", horizonYears)
	}
	return nil
}
