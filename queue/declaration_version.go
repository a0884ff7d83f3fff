package queue

import (
	"strings"
)

// CompareVersions orders declaration versions: -1 when a is older than b,
// 0 when they are equal, 1 when newer. Versions compare in natural order:
// runs of digits by their number and everything else byte by byte, so
// "1.10.0" is newer than "1.9.3", "v2" than "v1" and "20260301" than
// "20260228". "" (no version) is older than any version.
func CompareVersions(a, b string) int {
	for a != "" && b != "" {
		ra, restA := versionRun(a)
		rb, restB := versionRun(b)
		if c := compareRuns(ra, rb); c != 0 {
			return c
		}
		a, b = restA, restB
	}
	switch {
	case a == b:
		return 0
	case a == "":
		return -1
	}
	return 1
}

// versionRun splits off the leading run of digits or of non-digits.
func versionRun(s string) (run, rest string) {
	digit := isDigit(s[0])
	i := 1
	for i < len(s) && isDigit(s[i]) == digit {
		i++
	}
	return s[:i], s[i:]
}

// compareRuns compares two runs: numbers by value (leading zeros aside,
// however long), a number before text, text byte by byte.
func compareRuns(a, b string) int {
	da, db := isDigit(a[0]), isDigit(b[0])
	switch {
	case da && db:
		a, b = strings.TrimLeft(a, "0"), strings.TrimLeft(b, "0")
		if len(a) != len(b) {
			if len(a) < len(b) {
				return -1
			}
			return 1
		}
		return strings.Compare(a, b)
	case da:
		return -1
	case db:
		return 1
	}
	return strings.Compare(a, b)
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }
