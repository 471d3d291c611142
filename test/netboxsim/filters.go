package netboxsim

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// filterSet reads django-filter style query parameters. Unknown parameters
// are ignored, as NetBox does; invalid values of known ones collect form
// errors that become a 400.
type filterSet struct {
	q    url.Values
	errs fieldErrors
}

func newFilterSet(r *http.Request) *filterSet {
	return &filterSet{q: r.URL.Query(), errs: fieldErrors{}}
}

// values returns the non-empty values of a parameter; empty ones are no
// filter at all.
func (f *filterSet) values(name string) []string {
	var out []string
	for _, v := range f.q[name] {
		if v != "" {
			out = append(out, v)
		}
	}
	return out
}

// numbers reads a MultiValueNumberFilter.
func (f *filterSet) numbers(name string) ([]int64, bool) {
	vals := f.values(name)
	out := make([]int64, 0, len(vals))
	for _, v := range vals {
		n, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil {
			f.errs.add(name, "Enter a number.")
			return nil, false
		}
		out = append(out, int64(n))
	}
	return out, len(out) > 0
}

// choices reads a MultipleChoiceFilter.
func (f *filterSet) choices(name string, valid map[string]string) ([]string, bool) {
	vals := f.values(name)
	for _, v := range vals {
		if _, ok := valid[v]; !ok {
			f.errs.add(name, fmt.Sprintf("Select a valid choice. %s is not one of the available choices.", v))
			return nil, false
		}
	}
	return vals, len(vals) > 0
}

// related reads a ModelMultipleChoiceFilter on primary keys; "null" selects
// objects without the relation (returned as ID 0).
func (f *filterSet) related(name string, exists func(int32) bool) (map[int32]bool, bool) {
	vals := f.values(name)
	out := map[int32]bool{}
	for _, v := range vals {
		if v == "null" {
			out[0] = true
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 32)
		if err != nil {
			f.errs.add(name, fmt.Sprintf("“%s” is not a valid value.", v))
			return nil, false
		}
		if !exists(int32(n)) {
			f.errs.add(name, fmt.Sprintf("Select a valid choice. %s is not one of the available choices.", v))
			return nil, false
		}
		out[int32(n)] = true
	}
	return out, len(vals) > 0
}

func (f *filterSet) failed() (response, bool) {
	if len(f.errs) > 0 {
		return badRequest(f.errs), true
	}
	return response{}, false
}

// filter keeps the items for which every predicate holds.
func filter[T any](items []T, preds []func(T) bool) []T {
	out := make([]T, 0, len(items))
next:
	for _, it := range items {
		for _, p := range preds {
			if !p(it) {
				continue next
			}
		}
		out = append(out, it)
	}
	return out
}

func containsID(ids []int64, id int32) bool {
	for _, v := range ids {
		if v == int64(id) {
			return true
		}
	}
	return false
}
