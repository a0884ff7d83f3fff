package axtype

import "time"

// RateClass is a token bucket that caps how fast a class of tasks is
// leased, with the priority floors that degrade it under pressure.
type RateClass struct {
	Name        string
	Description string
	Rate        float64 // tokens per second
	Burst       float64 // bucket size
	// ManualMinPriority is an operator's floor: tasks below it wait.
	ManualMinPriority *int
	// AutoMinPriority applies while the class is degraded: its waiting
	// depth is above AutoDepth or its oldest wait above AutoAge.
	AutoMinPriority *int
	AutoDepth       *int
	AutoAge         *time.Duration
	DegradedSince   *time.Time
	// Groups are the job groups whose jobs may name the class (migration
	// 00080); nil: any, but not through a key limited to groups.
	Groups    []string
	CreatedAt time.Time
	UpdatedAt time.Time

	// Read by RateClassList.
	TokensNow     float64       // the bucket's level now
	Waiting       int64         // ready tasks waiting, at most db.RateClassWaitingCap
	WaitingCapped bool          // more than Waiting wait
	OldestWait    time.Duration // how long the oldest has waited
}

// DegradeChange is a class whose automatic degradation turned on or off.
type DegradeChange struct {
	Name        string
	Degraded    bool
	MinPriority int
}
