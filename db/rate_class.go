package db

import (
	"context"
	"fmt"
	"time"

	"github.com/ax-scheduler/ax/db/internal/dbsqlc"
	"github.com/ax-scheduler/ax/queue/axtype"
)

// RateClassInsert creates a class with a full bucket.
func RateClassInsert(ctx context.Context, e Executor, c *axtype.RateClass) (*axtype.RateClass, error) {
	r, err := queries.RateClassInsert(ctx, e, dbsqlc.RateClassInsertParams{
		Name: c.Name, Description: c.Description, Rate: c.Rate, Burst: c.Burst,
		ManualMinPriority: int32Ptr(c.ManualMinPriority), AutoMinPriority: int32Ptr(c.AutoMinPriority),
		AutoDepth: int32Ptr(c.AutoDepth), AutoAgeSeconds: secondsPtr(c.AutoAge), Groups: c.Groups})
	if err != nil {
		return nil, fmt.Errorf("error inserting rate class %q: %w", c.Name, mapErr(err))
	}
	return rateClassFromRow(r), nil
}

// RateClassUpdate changes a class's settings; its bucket keeps its level
// (capped at the new burst).
func RateClassUpdate(ctx context.Context, e Executor, c *axtype.RateClass) (*axtype.RateClass, error) {
	r, err := queries.RateClassUpdate(ctx, e, dbsqlc.RateClassUpdateParams{
		Name: c.Name, Description: c.Description, Rate: c.Rate, Burst: c.Burst,
		ManualMinPriority: int32Ptr(c.ManualMinPriority), AutoMinPriority: int32Ptr(c.AutoMinPriority),
		AutoDepth: int32Ptr(c.AutoDepth), AutoAgeSeconds: secondsPtr(c.AutoAge), Groups: c.Groups})
	if IsLockTimeout(err) {
		// A change of groups does not wait for jobs being written that
		// name the class (migration 00083).
		return nil, fmt.Errorf("error updating rate class %q: jobs naming it are being written: %w", c.Name, axtype.ErrBusy)
	}
	if err != nil {
		return nil, fmt.Errorf("error updating rate class %q: %w", c.Name, mapErr(err))
	}
	return rateClassFromRow(r), nil
}

// RateClassSetManualFloor switches an operator's floor on (minPriority) or
// off (nil).
func RateClassSetManualFloor(ctx context.Context, e Executor, name string, minPriority *int) (*axtype.RateClass, error) {
	r, err := queries.RateClassSetManualFloor(ctx, e, dbsqlc.RateClassSetManualFloorParams{
		Name: name, MinPriority: int32Ptr(minPriority)})
	if err != nil {
		return nil, fmt.Errorf("error setting the floor of rate class %q: %w", name, mapErr(err))
	}
	return rateClassFromRow(r), nil
}

// RateClassGroups returns the job groups class name is kept to (nil:
// any); axtype.ErrNotFound when there is no such class.
func RateClassGroups(ctx context.Context, e Executor, name string) ([]string, error) {
	groups, err := queries.RateClassGroups(ctx, e, name)
	if err != nil {
		return nil, fmt.Errorf("error reading the groups of rate class %q: %w", name, mapErr(err))
	}
	return groups, nil
}

// RateClassDelete removes a class; jobs that name it block the delete
// (ErrConflict-like constraint error).
func RateClassDelete(ctx context.Context, e Executor, name string) error {
	n, err := queries.RateClassDelete(ctx, e, name)
	if err != nil {
		return fmt.Errorf("error deleting rate class %q: %w", name, mapErr(err))
	}
	if n == 0 {
		return fmt.Errorf("error deleting rate class %q: %w", name, axtype.ErrNotFound)
	}
	return nil
}

// RateClassWaitingCap is how far RateClassList counts a class's ready
// tasks: past it, the class says "more than this" (WaitingCapped).
const RateClassWaitingCap = 10_000

// RateClassList returns every class (or the one named) with its bucket
// level and backlog now, counted to RateClassWaitingCap.
func RateClassList(ctx context.Context, e Executor, name string) ([]*axtype.RateClass, error) {
	rows, err := queries.RateClassList(ctx, e, dbsqlc.RateClassListParams{Name: nilIfEmpty(name), WaitingCap: RateClassWaitingCap})
	if err != nil {
		return nil, fmt.Errorf("error listing rate classes: %w", mapErr(err))
	}
	out := make([]*axtype.RateClass, len(rows))
	for i, r := range rows {
		c := rateClassFromRow(r.AxRateClass)
		c.TokensNow, c.Waiting = r.TokensNow, min(r.Waiting, RateClassWaitingCap)
		c.WaitingCapped = r.Waiting > RateClassWaitingCap
		c.OldestWait = time.Duration(r.OldestWaitSeconds * float64(time.Second))
		out[i] = c
	}
	return out, nil
}

// RateClassGet returns one class with its bucket level and backlog.
func RateClassGet(ctx context.Context, e Executor, name string) (*axtype.RateClass, error) {
	classes, err := RateClassList(ctx, e, name)
	if err != nil {
		return nil, err
	}
	if len(classes) == 0 {
		return nil, fmt.Errorf("error getting rate class %q: %w", name, axtype.ErrNotFound)
	}
	return classes[0], nil
}

// RateClassDegradeAuto turns automatic degradation on or off by each
// class's pressure; it returns the classes that changed.
func RateClassDegradeAuto(ctx context.Context, e Executor) ([]axtype.DegradeChange, error) {
	rows, err := queries.RateClassDegradeAuto(ctx, e)
	if err != nil {
		return nil, fmt.Errorf("error degrading rate classes: %w", mapErr(err))
	}
	out := make([]axtype.DegradeChange, len(rows))
	for i, r := range rows {
		out[i] = axtype.DegradeChange{Name: r.Name, Degraded: r.Degraded, MinPriority: int(deref(r.AutoMinPriority))}
	}
	return out, nil
}

func rateClassFromRow(r dbsqlc.AxRateClass) *axtype.RateClass {
	c := &axtype.RateClass{Name: r.Name, Description: r.Description, Rate: r.Rate, Burst: r.Burst,
		ManualMinPriority: intPtr(r.ManualMinPriority), AutoMinPriority: intPtr(r.AutoMinPriority),
		AutoDepth: intPtr(r.AutoDepth), DegradedSince: utcPtr(r.DegradedSince),
		CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC(), TokensNow: r.Tokens, Groups: r.Groups}
	if r.AutoAgeSeconds != nil {
		d := time.Duration(*r.AutoAgeSeconds) * time.Second
		c.AutoAge = &d
	}
	return c
}

func int32Ptr(p *int) *int32 {
	if p == nil {
		return nil
	}
	v := int32(*p)
	return &v
}

func intPtr(p *int32) *int {
	if p == nil {
		return nil
	}
	v := int(*p)
	return &v
}

func secondsPtr(d *time.Duration) *int32 {
	if d == nil {
		return nil
	}
	v := int32(d.Seconds())
	return &v
}

// RateClassTake takes up to max tokens from every class with ready tasks
// waiting, in its own short statement, and returns the grants by class.
func RateClassTake(ctx context.Context, e Executor, max int) (map[string]int, error) {
	rows, err := queries.RateClassTake(ctx, e, int32(max))
	if err != nil {
		return nil, fmt.Errorf("error taking rate class tokens: %w", mapErr(err))
	}
	grants := make(map[string]int, len(rows))
	for _, r := range rows {
		grants[r.Name] = int(r.Granted)
	}
	return grants, nil
}

// RateClassGiveBack returns unused tokens by class.
func RateClassGiveBack(ctx context.Context, e Executor, unused map[string]int) error {
	p := dbsqlc.RateClassGiveBackParams{}
	for class, n := range unused {
		if n > 0 {
			p.Names = append(p.Names, class)
			p.Amounts = append(p.Amounts, float64(n))
		}
	}
	if len(p.Names) == 0 {
		return nil
	}
	if err := queries.RateClassGiveBack(ctx, e, p); err != nil {
		return fmt.Errorf("error giving back rate class tokens: %w", mapErr(err))
	}
	return nil
}

// RateClassAny reports whether any rate class exists.
func RateClassAny(ctx context.Context, e Executor) (bool, error) {
	exists, err := queries.RateClassAny(ctx, e)
	if err != nil {
		return false, fmt.Errorf("error looking for rate classes: %w", mapErr(err))
	}
	return exists, nil
}
