package axtype

import "time"

// DeclarationSet is the state of one set of declared jobs: the version it
// was last applied at and the last declaration refused as a conflict.
type DeclarationSet struct {
	ManagedBy string
	Version   string
	Source    string
	Jobs      int
	AppliedAt time.Time
	// Conflict is the last declaration of the set that was refused; nil
	// when none was.
	Conflict *DeclarationConflict
	// Owned is false until a declaration of the set is applied.
	Owned bool
	// OwnerGroups are the groups of the key that first applied the set;
	// nil when that key was limited to no groups.
	OwnerGroups []string
}

// DeclarationConflict is a refused declaration: its version, where it
// came from, why it was refused and when.
type DeclarationConflict struct {
	Version, Source, Reason string
	At                      time.Time
}

// JobKey names a job by group and name, as declarations do.
type JobKey struct{ Group, Name string }
