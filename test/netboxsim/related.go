package netboxsim

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Related objects are written by numeric ID or by a dict of attributes,
// resolved as utilities/api.py get_related_object_by_attrs does.

type candidate struct {
	id    int32
	attrs map[string]string
}

func (st *store) candidates(kind string) []candidate {
	var out []candidate
	id := func(n int32) string { return strconv.Itoa(int(n)) }
	switch kind {
	case "vrf":
		for _, v := range st.vrfList() {
			out = append(out, candidate{v.id, map[string]string{"id": id(v.id), "name": v.name, "rd": v.rd, "description": v.description}})
		}
	case "tenant":
		for _, t := range st.tenantList() {
			out = append(out, candidate{t.id, map[string]string{"id": id(t.id), "name": t.name, "slug": t.slug, "description": t.description}})
		}
	case "role":
		for _, r := range namedList(st.roles) {
			out = append(out, candidate{r.id, map[string]string{"id": id(r.id), "name": r.name, "slug": r.slug, "description": r.description}})
		}
	case "tag":
		for _, t := range st.tagList() {
			out = append(out, candidate{t.id, map[string]string{"id": id(t.id), "name": t.name, "slug": t.slug, "color": t.color, "description": t.description}})
		}
	}
	return out
}

// resolve returns the ID of the referenced object (0 for null) or the
// validation message.
func (st *store) resolve(v any, kind string) (int32, string) {
	switch x := v.(type) {
	case nil:
		return 0, ""
	case map[string]any:
		params := map[string]any{}
		flattenParams("", x, params)
		var found []int32
		for _, c := range st.candidates(kind) {
			if matchesAttrs(c.attrs, params) {
				found = append(found, c.id)
			}
		}
		switch len(found) {
		case 1:
			return found[0], ""
		case 0:
			return 0, "Related object not found using the provided attributes: " + pyRepr(params)
		default:
			return 0, "Multiple objects match the provided attributes: " + pyRepr(params)
		}
	}
	pk, ok := pyInt(v)
	if !ok {
		return 0, "Related objects must be referenced by numeric ID or by dictionary of attributes. " +
			"Received an unrecognized value: " + pyStr(v)
	}
	for _, c := range st.candidates(kind) {
		if int64(c.id) == pk {
			return c.id, ""
		}
	}
	return 0, fmt.Sprintf("Related object not found using the provided numeric ID: %d", pk)
}

// resolveTags resolves a list of tag references, keeping order, dropping
// repeats. The first bad reference fails the whole field.
func (st *store) resolveTags(v any) ([]int32, string) {
	items, msg := listField(v)
	if msg != "" {
		return nil, msg
	}
	ids := []int32{}
	for _, it := range items {
		if it == nil {
			return nil, "This field may not be null."
		}
		id, msg := st.resolve(it, "tag")
		if msg != "" {
			return nil, msg
		}
		if !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	return ids, ""
}

// flattenParams is dict_to_filter_params: nested dicts become "a__b" keys.
func flattenParams(prefix string, m map[string]any, out map[string]any) {
	for k, v := range m {
		if sub, ok := v.(map[string]any); ok {
			flattenParams(prefix+k+"__", sub, out)
			continue
		}
		out[prefix+k] = v
	}
}

func matchesAttrs(attrs map[string]string, params map[string]any) bool {
	for k, v := range params {
		have, ok := attrs[k]
		if !ok || have != pyStr(v) {
			return false
		}
	}
	return true
}

// pyInt is Python's int() on a JSON value.
func pyInt(v any) (int64, bool) {
	switch x := v.(type) {
	case bool:
		if x {
			return 1, true
		}
		return 0, true
	case float64:
		if math.IsInf(x, 0) || math.IsNaN(x) {
			return 0, false
		}
		return int64(x), true
	case string:
		n, err := strconv.ParseInt(strings.TrimSpace(x), 10, 64)
		return n, err == nil
	}
	return 0, false
}
