package cron

// FieldError says which input of Parse is wrong and why, so an API can point
// at the offending field. Field is "expr" or "timezone".
type FieldError struct {
	Field  string
	Reason string
}

func (e *FieldError) Error() string {
	return "invalid " + e.Field + ": " + e.Reason
}
