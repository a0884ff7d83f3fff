package axtype

import (
	"errors"
	"fmt"
)

// The errors package db maps driver errors to, so that callers test for
// them without importing the store.
var (
	// ErrNotFound means the row asked for does not exist.
	ErrNotFound = errors.New("not found")
	// ErrConflict means a unique constraint refused the write.
	ErrConflict = errors.New("conflict")
	// ErrRemoved means the row asked for existed and was removed by
	// history retention (see db.ExecutionRemoved).
	ErrRemoved = errors.New("removed by history retention")
	// ErrBusy means a write would have waited for other transactions and
	// did not: try again.
	ErrBusy = errors.New("busy")
)

// ConstraintError is a check constraint that refused a write; Constraint
// names it (the names read as sentences: job_interval_positive…).
type ConstraintError struct {
	Constraint string
	// Detail is the database's detail: a foreign key's names the key.
	Detail string
	Err    error
}

func (e *ConstraintError) Error() string {
	return fmt.Sprintf("constraint %s violated", e.Constraint)
}

func (e *ConstraintError) Unwrap() error { return e.Err }

// FieldError is one thing wrong with a definition: Field names it as the
// API spells it, from the definition's root ("trigger.cron").
type FieldError struct {
	Field   string
	Message string
	Value   any
}

func (e *FieldError) Error() string { return e.Field + " " + e.Message }

// InvalidError refuses a definition whose fields do not fit together
// (queue.ValidateJob); nothing was written.
type InvalidError struct {
	Fields []FieldError
}

func (e *InvalidError) Error() string {
	msg := "invalid definition"
	for i, f := range e.Fields {
		sep := ", "
		if i == 0 {
			sep = ": "
		}
		msg += sep + f.Error()
	}
	return msg
}
