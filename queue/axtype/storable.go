package axtype

import (
	"cmp"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// MaxStorableJSONDepth is how deeply a JSON value may nest to be stored:
// Postgres parses jsonb recursively and stops with "stack depth limit
// exceeded" somewhere past a few thousand levels with the default 2 MB
// max_stack_depth (5,000 levels parsed, 200,000 did not, Postgres 15).
const MaxStorableJSONDepth = 1000

// Postgres's numeric, which jsonb stores numbers as, holds at most this
// many digits before the decimal point and this many after it
// (NUMERIC_DSCALE_MAX; "value overflows numeric format" past them).
const (
	maxNumericIntegerDigits  = 131072
	maxNumericFractionDigits = 16383
	// numeric_in refuses an exponent this large even on zero.
	maxNumericExponent = 1<<30 - 1
)

// UnstorableError says what in a value Postgres would refuse to store, and
// where: Pointer is an RFC 6901 JSON pointer into the document ("" for the
// whole value), so a caller can name the field ("body.params" + Pointer).
type UnstorableError struct {
	Pointer string
	Reason  string
}

func (e *UnstorableError) Error() string {
	if e.Pointer == "" {
		return e.Reason
	}
	return fmt.Sprintf("at %s: %s", e.Pointer, e.Reason)
}

// CheckStorableText returns an *UnstorableError when Postgres's text (in a
// UTF8 database) cannot hold s: invalid UTF-8, or a NUL character.
func CheckStorableText(s string) error {
	if !utf8.ValidString(s) {
		return &UnstorableError{Reason: "is not valid UTF-8"}
	}
	if strings.IndexByte(s, 0) >= 0 {
		return &UnstorableError{Reason: "holds a NUL character, which Postgres text cannot store"}
	}
	return nil
}

// MaxResultBytes bounds a task's result as an agent reports it: a request
// of results may be 8 MiB, and without a bound of its own one result of
// that size per shard made a run of 1,000 shards hold 8 GB, read whole by
// every callback delivery, explain and re-run of it. The SDKs refuse
// larger results before they send them (result_too_large).
const MaxResultBytes = 1 << 20

// CheckStorableJSON returns an *UnstorableError when b is not a JSON value
// that Postgres's jsonb stores. Go's decoder accepts more than jsonb does:
// a lone UTF-16 surrogate escape (\ud800), \u0000, numbers beyond
// numeric's range, and invalid UTF-8 inside strings. Such a value reaching
// an INSERT fails the whole statement, and with it every row the
// statement carried, so it is checked first, in one pass without decoding.
func CheckStorableJSON(b []byte) error {
	if !json.Valid(b) {
		return &UnstorableError{Reason: "is not valid JSON"}
	}
	if !utf8.Valid(b) {
		return &UnstorableError{Reason: "is not valid UTF-8"}
	}
	s := jsonScanner{b: b}
	s.value()
	return s.err
}

// jsonScanner walks a document that json.Valid has accepted, keeping the
// path to the value it is in, and stops at the first thing jsonb refuses.
type jsonScanner struct {
	b     []byte
	i     int
	path  []string
	depth int
	err   error
}

func (s *jsonScanner) fail(reason string) {
	if s.err != nil {
		return
	}
	var p strings.Builder
	for _, seg := range s.path {
		p.WriteByte('/')
		p.WriteString(strings.NewReplacer("~", "~0", "/", "~1").Replace(seg))
	}
	s.err = &UnstorableError{Pointer: p.String(), Reason: reason}
}

func (s *jsonScanner) skipSpace() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

func (s *jsonScanner) value() {
	s.skipSpace()
	if s.err != nil || s.i >= len(s.b) {
		return
	}
	switch c := s.b[s.i]; {
	case c == '{':
		s.object()
	case c == '[':
		s.array()
	case c == '"':
		s.str(nil)
	case c == '-' || (c >= '0' && c <= '9'):
		s.number()
	default: // true, false, null
		for s.i < len(s.b) && s.b[s.i] >= 'a' && s.b[s.i] <= 'z' {
			s.i++
		}
	}
}

// open counts an object or array opened, refusing one past the bound.
func (s *jsonScanner) open() bool {
	s.depth++
	if s.depth > MaxStorableJSONDepth {
		s.fail(fmt.Sprintf("nests deeper than %d levels", MaxStorableJSONDepth))
		return false
	}
	return true
}

func (s *jsonScanner) enter(seg string) { s.path = append(s.path, seg) }

func (s *jsonScanner) leave() { s.path = s.path[:len(s.path)-1] }

func (s *jsonScanner) object() {
	s.i++ // {
	if !s.open() {
		return
	}
	defer func() { s.depth-- }()
	for s.err == nil {
		s.skipSpace()
		if s.b[s.i] == '}' {
			s.i++
			return
		}
		if s.b[s.i] == ',' {
			s.i++
			s.skipSpace()
		}
		var key strings.Builder
		s.str(&key)
		s.skipSpace()
		s.i++ // :
		s.enter(key.String())
		s.value()
		s.leave()
	}
}

func (s *jsonScanner) array() {
	s.i++ // [
	if !s.open() {
		return
	}
	defer func() { s.depth-- }()
	for n := 0; s.err == nil; n++ {
		s.skipSpace()
		if s.b[s.i] == ']' {
			s.i++
			return
		}
		if s.b[s.i] == ',' {
			s.i++
		}
		s.enter(strconv.Itoa(n))
		s.value()
		s.leave()
	}
}

// str checks a string's escapes and, when out is not nil, writes its
// text there as far as the path needs it (an object key; escapes other
// than \" and \\ are left as written). Values are only checked: copying
// each into a builder cost four times the document in allocations.
func (s *jsonScanner) str(out *strings.Builder) {
	s.i++ // opening quote
	pendingHigh := false
	for s.err == nil {
		c := s.b[s.i]
		if c == '"' {
			s.i++
			break
		}
		if c != '\\' {
			if pendingHigh {
				s.fail(`holds a lone UTF-16 surrogate escape (\uD800-\uDBFF not followed by a low surrogate), which Postgres jsonb cannot store`)
			}
			if out != nil {
				out.WriteByte(c)
			}
			s.i++
			continue
		}
		esc := s.b[s.i+1]
		if esc != 'u' {
			if pendingHigh {
				s.fail(`holds a lone UTF-16 surrogate escape (\uD800-\uDBFF not followed by a low surrogate), which Postgres jsonb cannot store`)
			}
			if out != nil {
				out.WriteByte(esc)
			}
			s.i += 2
			continue
		}
		r, _ := strconv.ParseUint(string(s.b[s.i+2:s.i+6]), 16, 32)
		s.i += 6
		switch {
		case r == 0:
			s.fail(`holds \u0000, which Postgres jsonb cannot store`)
		case r >= 0xD800 && r <= 0xDBFF:
			if pendingHigh {
				s.fail(`holds a lone UTF-16 surrogate escape (\uD800-\uDBFF not followed by a low surrogate), which Postgres jsonb cannot store`)
			}
			pendingHigh = true
		case r >= 0xDC00 && r <= 0xDFFF:
			if !pendingHigh {
				s.fail(`holds a lone UTF-16 surrogate escape (\uDC00-\uDFFF without a high surrogate before it), which Postgres jsonb cannot store`)
			}
			pendingHigh = false
		default:
			if pendingHigh {
				s.fail(`holds a lone UTF-16 surrogate escape (\uD800-\uDBFF not followed by a low surrogate), which Postgres jsonb cannot store`)
			}
			if out != nil {
				out.WriteRune(rune(r))
			}
		}
	}
	if pendingHigh {
		s.fail(`holds a lone UTF-16 surrogate escape (\uD800-\uDBFF not followed by a low surrogate), which Postgres jsonb cannot store`)
	}
}

// number checks that numeric can hold the number: at most
// maxNumericIntegerDigits significant digits before the point (zero has
// none) and at most maxNumericFractionDigits after it, trailing zeros
// included (jsonb keeps 1.50 as 1.50).
func (s *jsonScanner) number() {
	start := s.i
	for s.i < len(s.b) && strings.IndexByte("+-0123456789.eE", s.b[s.i]) >= 0 {
		s.i++
	}
	num := string(s.b[start:s.i])
	mantissa, expText, _ := strings.Cut(strings.ToLower(num), "e")
	mantissa = strings.TrimPrefix(mantissa, "-")
	intPart, fracPart, _ := strings.Cut(mantissa, ".")
	exp := int64(0)
	if expText != "" {
		// Exponents past ±10^12 are clamped: either way far outside numeric.
		digits := strings.TrimLeft(strings.TrimLeft(expText, "+-"), "0")
		if len(digits) > 12 {
			digits = "999999999999"
		}
		exp, _ = strconv.ParseInt(cmp.Or(digits, "0"), 10, 64)
		if strings.HasPrefix(expText, "-") {
			exp = -exp
		}
	}
	if exp >= maxNumericExponent || exp <= -maxNumericExponent {
		s.fail("has a number whose exponent is beyond Postgres's numeric")
		return
	}
	if scale := int64(len(fracPart)) - exp; scale > maxNumericFractionDigits {
		s.fail(fmt.Sprintf("has a number with more than %d digits after the decimal point, beyond Postgres's numeric", maxNumericFractionDigits))
		return
	}
	var intDigits int64
	if trimmed := strings.TrimLeft(intPart, "0"); trimmed != "" {
		intDigits = int64(len(trimmed)) + exp
	} else if k := strings.IndexFunc(fracPart, func(r rune) bool { return r != '0' }); k >= 0 {
		intDigits = exp - int64(k)
	} else {
		return // zero
	}
	if intDigits > maxNumericIntegerDigits {
		s.fail(fmt.Sprintf("has a number with more than %d digits before the decimal point, beyond Postgres's numeric", maxNumericIntegerDigits))
	}
}
