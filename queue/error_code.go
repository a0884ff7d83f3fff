package queue

import (
	"github.com/ax-scheduler/ax/queue/axtype"
)

// ValidErrorCode says whether code may be stored as a task's error code:
// 1 to axtype.MaxErrorCodeLength characters of a-z, 0-9, '_', '.' and '-'.
// Codes label metrics and group failures, so they stay short and plain.
func ValidErrorCode(code string) bool {
	if code == "" || len(code) > axtype.MaxErrorCodeLength {
		return false
	}
	for i := 0; i < len(code); i++ {
		c := code[i]
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '_' && c != '.' && c != '-' {
			return false
		}
	}
	return true
}
