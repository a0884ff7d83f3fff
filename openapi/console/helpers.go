package console

import (
	"net/http"
	"reflect"

	"github.com/google/uuid"
)

// answer turns a generated client's response into an error unless it
// succeeded.
func answer(res any, err error) error {
	if err != nil {
		return err
	}
	v := reflect.ValueOf(res).Elem()
	hr, _ := v.FieldByName("HTTPResponse").Interface().(*http.Response)
	return check(hr, v.FieldByName("Body").Bytes(), nil)
}

func ptr[T any](v T) *T { return &v }

// val is what p points to, or the zero value.
func val[T any](p *T) T {
	if p == nil {
		var zero T
		return zero
	}
	return *p
}

// list is the slice p points to, or none.
func list[T any](p *[]T) []T {
	if p == nil {
		return nil
	}
	return *p
}

// pathID reads the {id} of a page's path; a malformed one is a 404, as an
// unknown one is.
func (c *Console) pathID(w http.ResponseWriter, r *http.Request, s *session) (uuid.UUID, bool) {
	id, err := uuid.Parse(r.PathValue("id"))
	if err != nil {
		c.problem(w, r, s, http.StatusNotFound, "not found", "no such id")
		return uuid.Nil, false
	}
	return id, true
}

// formID reads the {id} of an action's path.
func formID(r *http.Request) (uuid.UUID, error) {
	id, err := uuid.Parse(r.PathValue("id"))
	if err != nil {
		return uuid.Nil, &apiProblem{Status: http.StatusNotFound, Title: "not found", Detail: "no such id"}
	}
	return id, nil
}
