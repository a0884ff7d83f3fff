package openapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/ax-scheduler/ax/queue"
	"github.com/ax-scheduler/ax/queue/axtype"
)

// RateClass is a token bucket capping how fast its jobs' tasks are leased,
// and the priority floors that degrade it under pressure.
type RateClass struct {
	Name        string  `json:"name" minLength:"1" maxLength:"100" pattern:"^[A-Za-z0-9_.-]+$" example:"billing-db" doc:"Jobs name it in rate_limit_class"`
	Description string  `json:"description,omitempty" maxLength:"1000"`
	Rate        float64 `json:"rate" exclusiveMinimum:"0" maximum:"1000000" example:"10" doc:"Tasks per second, sustained"`
	Burst       float64 `json:"burst" minimum:"1" maximum:"1000000" example:"10" doc:"Tasks that may lease at once after a quiet spell (the bucket size)"`
	// MinPriority is the operator's floor (ax class degrade).
	MinPriority *int         `json:"min_priority,omitempty" minimum:"-1000" maximum:"1000" doc:"Operator's floor: while set, tasks below this priority wait (or skip, per job)"`
	Auto        *AutoDegrade `json:"auto_degrade,omitempty" doc:"Floor applied automatically while the class is under pressure"`
	Groups      []string     `json:"groups,omitempty" minItems:"1" maxItems:"100" doc:"Only jobs of these job groups may name the class, so no other team's jobs take its tokens. Absent: jobs of any group, but not written with a key limited to groups"`

	// Read-only state.
	Tokens           float64    `json:"tokens" readOnly:"true" doc:"Tokens in the bucket now"`
	Waiting          int64      `json:"waiting" readOnly:"true" doc:"Ready tasks waiting for this class, counted to 10,000"`
	WaitingCapped    bool       `json:"waiting_capped" readOnly:"true" doc:"More ready tasks wait than waiting says (it stops counting at 10,000)"`
	OldestWait       float64    `json:"oldest_wait_seconds" readOnly:"true" doc:"How long the oldest waiting task has waited"`
	Degraded         bool       `json:"degraded" readOnly:"true" doc:"Whether the automatic floor is in force"`
	DegradedSince    *time.Time `json:"degraded_since,omitempty" readOnly:"true"`
	EffectiveMinimum *int       `json:"effective_min_priority,omitempty" readOnly:"true" doc:"The floor in force now, if any"`
	CreatedAt        time.Time  `json:"created_at" readOnly:"true"`
	UpdatedAt        time.Time  `json:"updated_at" readOnly:"true"`
}

// AutoDegrade turns a floor on while waiting depth or age is above a
// threshold, and off once both are back under.
type AutoDegrade struct {
	MinPriority int  `json:"min_priority" minimum:"-1000" maximum:"1000" doc:"Floor while degraded"`
	Depth       *int `json:"depth,omitempty" minimum:"1" maximum:"1000000000" doc:"Degrade while more ready tasks than this wait"`
	AgeSeconds  *int `json:"age_seconds,omitempty" minimum:"1" maximum:"31536000" doc:"Degrade while the oldest ready task has waited longer than this (at most a year)"`
}

// DegradeRequest switches an operator's floor on.
type DegradeRequest struct {
	MinPriority int `json:"min_priority" minimum:"-1000" maximum:"1000" doc:"Tasks below this priority wait (or skip, per job)"`
}

type classHandlers struct {
	classes *queue.ClassService
}

type classBodyInput struct {
	Body RateClass
}

type classNameInput struct {
	Name string `path:"name" maxLength:"100" doc:"Class name"`
}

type classUpdateInput struct {
	Name string `path:"name" maxLength:"100" doc:"Class name"`
	Body RateClass
}

type classDegradeInput struct {
	Name string `path:"name" maxLength:"100" doc:"Class name"`
	Body DegradeRequest
}

type classOutput struct {
	Body *RateClass
}

type classListOutput struct {
	Body struct {
		Classes []*RateClass `json:"classes"`
	}
}

// Resolve checks what tags cannot: a threshold for an automatic floor.
func (a *AutoDegrade) Resolve(_ huma.Context, prefix *huma.PathBuffer) []error {
	if a.Depth == nil && a.AgeSeconds == nil {
		return []error{&huma.ErrorDetail{Location: prefix.String(), Message: "needs depth or age_seconds", Value: a}}
	}
	return nil
}

func (h *classHandlers) register(api huma.API) {
	tags := []string{"Flow control"}
	register(api, requireScope(huma.Operation{
		OperationID: "create-class", Method: http.MethodPost, Path: "/v1/classes", Tags: tags,
		Summary: "Create a rate class", DefaultStatus: http.StatusCreated,
		Description: "A token bucket shared by every job that names it; it starts full.",
		Errors:      []int{http.StatusConflict, http.StatusUnprocessableEntity},
	}, ScopeAdmin), h.create)
	register(api, requireScope(huma.Operation{
		OperationID: "list-classes", Method: http.MethodGet, Path: "/v1/classes", Tags: tags,
		Summary: "List rate classes", Description: "With each bucket's tokens, waiting depth and floor now.",
	}, ScopeRead), h.list)
	register(api, requireScope(huma.Operation{
		OperationID: "get-class", Method: http.MethodGet, Path: "/v1/classes/{name}", Tags: tags,
		Summary: "Get a rate class", Errors: []int{http.StatusNotFound},
		Description: "The class's rate, burst and priority floor, and its tokens now.",
	}, ScopeRead), h.get)
	register(api, requireScope(huma.Operation{
		OperationID: "update-class", Method: http.MethodPut, Path: "/v1/classes/{name}", Tags: tags,
		Summary: "Change a rate class", Description: "The bucket keeps its level, capped at the new burst.",
		Errors: []int{http.StatusNotFound, http.StatusUnprocessableEntity},
	}, ScopeAdmin), h.update)
	register(api, requireScope(huma.Operation{
		OperationID: "delete-class", Method: http.MethodDelete, Path: "/v1/classes/{name}", Tags: tags,
		Summary: "Delete a rate class", DefaultStatus: http.StatusNoContent,
		Description: "Refused with 409 while any job names the class: move those jobs to another class first.",
		Errors:      []int{http.StatusNotFound, http.StatusConflict},
	}, ScopeAdmin), h.delete)
	register(api, requireScope(huma.Operation{
		OperationID: "degrade-class", Method: http.MethodPost, Path: "/v1/classes/{name}/degrade", Tags: tags,
		Summary:     "Switch an operator's priority floor on",
		Description: "Until restored, the class leases only tasks at or above min_priority.",
		Errors:      []int{http.StatusNotFound},
	}, ScopeAdmin), h.degrade)
	register(api, requireScope(huma.Operation{
		OperationID: "restore-class", Method: http.MethodPost, Path: "/v1/classes/{name}/restore", Tags: tags,
		Summary: "Switch an operator's priority floor off", Errors: []int{http.StatusNotFound},
		Description: "Undoes degrade-class: every priority of the class may lease again. Restoring a class that is not degraded changes nothing.",
	}, ScopeAdmin), h.restore)
}

func (h *classHandlers) create(ctx context.Context, in *classBodyInput) (*classOutput, error) {
	if err := groupsProblem(in.Body.Groups); err != nil {
		return nil, err
	}
	c, err := h.classes.Create(ctx, classToDB(&in.Body, in.Body.Name))
	if errors.Is(err, axtype.ErrConflict) {
		return nil, huma.Error409Conflict("rate class exists",
			&huma.ErrorDetail{Location: "body.name", Message: "is taken", Value: in.Body.Name})
	}
	return classResponse(c, err)
}

func (h *classHandlers) list(ctx context.Context, _ *struct{}) (*classListOutput, error) {
	classes, err := h.classes.List(ctx)
	if err != nil {
		return nil, err
	}
	out := &classListOutput{}
	out.Body.Classes = make([]*RateClass, len(classes))
	for i, c := range classes {
		out.Body.Classes[i] = classFromDB(c)
	}
	return out, nil
}

func (h *classHandlers) get(ctx context.Context, in *classNameInput) (*classOutput, error) {
	return classResponse(h.classes.Get(ctx, in.Name))
}

func (h *classHandlers) update(ctx context.Context, in *classUpdateInput) (*classOutput, error) {
	if err := groupsProblem(in.Body.Groups); err != nil {
		return nil, err
	}
	return classResponse(h.classes.Update(ctx, classToDB(&in.Body, in.Name)))
}

// groupsProblem refuses a class's groups that cannot be a job's group
// (1 to 200 characters, as a job's group field).
func groupsProblem(groups []string) error {
	var errs fieldErrors
	for i, g := range groups {
		if g == "" || len(g) > 200 {
			errs.add(fmt.Sprintf("body.groups[%d]", i), "is a job group: 1 to 200 characters", g)
		}
	}
	if len(errs) > 0 {
		return huma.Error422UnprocessableEntity("invalid groups", errs...)
	}
	return nil
}

func (h *classHandlers) delete(ctx context.Context, in *classNameInput) (*struct{}, error) {
	err := h.classes.Delete(ctx, in.Name)
	var ce *axtype.ConstraintError
	if errors.As(err, &ce) {
		return nil, huma.Error409Conflict("jobs still name this class: move them first",
			&huma.ErrorDetail{Location: "path.name", Message: "is in use", Value: in.Name})
	}
	return nil, classError(err)
}

func (h *classHandlers) degrade(ctx context.Context, in *classDegradeInput) (*classOutput, error) {
	return classResponse(h.classes.Degrade(ctx, in.Name, in.Body.MinPriority))
}

func (h *classHandlers) restore(ctx context.Context, in *classNameInput) (*classOutput, error) {
	return classResponse(h.classes.Restore(ctx, in.Name))
}

// classResponse answers with c, or the problem err maps to.
func classResponse(c *axtype.RateClass, err error) (*classOutput, error) {
	if err != nil {
		return nil, classError(err)
	}
	return &classOutput{Body: classFromDB(c)}, nil
}

func classError(err error) error {
	var ce *axtype.ConstraintError
	switch {
	case err == nil:
		return nil
	case errors.Is(err, axtype.ErrNotFound):
		return huma.Error404NotFound("rate class not found")
	case errors.Is(err, axtype.ErrBusy):
		return huma.Error409Conflict("jobs naming this class are being written: try again in a moment",
			&huma.ErrorDetail{Location: "body.groups", Message: "could not be checked against jobs being written"})
	case errors.As(err, &ce) && ce.Constraint == "rate_class_groups_in_use":
		return huma.Error409Conflict("jobs of other groups name this class: move them first",
			&huma.ErrorDetail{Location: "body.groups", Message: "leaves out the " + ce.Detail + " of a job naming the class"})
	case errors.As(err, &ce):
		return huma.Error422UnprocessableEntity("the class breaks rule "+ce.Constraint,
			&huma.ErrorDetail{Location: "body", Message: "violates " + ce.Constraint})
	}
	return err
}

func classToDB(c *RateClass, name string) *axtype.RateClass {
	out := &axtype.RateClass{Name: name, Description: c.Description, Rate: c.Rate, Burst: c.Burst,
		ManualMinPriority: c.MinPriority, Groups: c.Groups}
	if a := c.Auto; a != nil {
		out.AutoMinPriority, out.AutoDepth = &a.MinPriority, a.Depth
		if a.AgeSeconds != nil {
			d := time.Duration(*a.AgeSeconds) * time.Second
			out.AutoAge = &d
		}
	}
	return out
}

func classFromDB(c *axtype.RateClass) *RateClass {
	out := &RateClass{Name: c.Name, Description: c.Description, Rate: c.Rate, Burst: c.Burst,
		MinPriority: c.ManualMinPriority, Tokens: c.TokensNow, Waiting: c.Waiting, WaitingCapped: c.WaitingCapped,
		OldestWait: c.OldestWait.Seconds(), Degraded: c.DegradedSince != nil, DegradedSince: c.DegradedSince,
		EffectiveMinimum: queue.FloorInForce(c), CreatedAt: c.CreatedAt, UpdatedAt: c.UpdatedAt, Groups: c.Groups}
	if c.AutoMinPriority != nil {
		out.Auto = &AutoDegrade{MinPriority: *c.AutoMinPriority, Depth: c.AutoDepth}
		if c.AutoAge != nil {
			s := int(c.AutoAge.Seconds())
			out.Auto.AgeSeconds = &s
		}
	}
	return out
}
