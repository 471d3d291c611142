package netboxsim

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
)

func listTags(c *reqCtx) response {
	f := newFilterSet(c.r)
	var preds []func(*tagObj) bool
	if ids, ok := f.numbers("id"); ok {
		preds = append(preds, func(t *tagObj) bool { return containsID(ids, t.id) })
	}
	if names := f.values("name"); names != nil {
		preds = append(preds, func(t *tagObj) bool { return slices.Contains(names, t.name) })
	}
	if slugs := f.values("slug"); slugs != nil {
		preds = append(preds, func(t *tagObj) bool { return slices.Contains(slugs, t.slug) })
	}
	if resp, bad := f.failed(); bad {
		return resp
	}
	return paginate(c, filter(c.st().tagList(), preds), func(t *tagObj) any { return c.rend.tag(t) })
}

func getTag(c *reqCtx) response {
	return getOne(c, c.st().tags, "Tag", func(t *tagObj) any { return c.rend.tag(t) })
}

func createTags(c *reqCtx) response {
	data, bad := c.body()
	if bad != nil {
		return *bad
	}
	st := c.st()
	return createMany(data, st.buildTag, func(t *tagObj) any {
		t.id = st.nextID("tag")
		t.created = now()
		t.updated = t.created
		st.tags[t.id] = t
		return c.rend.tag(t)
	})
}

var (
	slugPattern  = regexp.MustCompile(`^[-a-zA-Z0-9_]+$`)
	colorPattern = regexp.MustCompile(`^[0-9a-f]{6}$`)
	cfNameRegexp = regexp.MustCompile(`(?i)^[a-z0-9_]+$`)
)

// contentTypesField is a list of "<app_label>.<model>" strings.
func contentTypesField(v any, allowEmpty bool) ([]string, string) {
	items, msg := listField(v)
	if msg != "" {
		return nil, msg
	}
	if len(items) == 0 && !allowEmpty {
		return nil, "This list may not be empty."
	}
	out := []string{}
	for _, it := range items {
		s, ok := it.(string)
		if !ok || strings.Count(s, ".") != 1 {
			return nil, "Invalid value. Specify a content type as '<app_label>.<model_name>'."
		}
		out = append(out, strings.ToLower(s))
	}
	return out, ""
}

func (st *store) buildTag(data any) (*tagObj, fieldErrors) {
	obj, ok := data.(map[string]any)
	if !ok {
		return nil, fieldErrors{"non_field_errors": {fmt.Sprintf("Invalid data. Expected a dictionary, but got %s.", pyTypeName(data))}}
	}
	t := &tagObj{color: "9e9e9e", weight: 1000}
	errs := fieldErrors{}
	required := func(field string) (any, bool) {
		v, ok := obj[field]
		if !ok {
			errs.add(field, "This field is required.")
		}
		return v, ok
	}
	if v, ok := required("name"); ok {
		if s, msg := charField(v, false, 100); msg != "" {
			errs.add("name", msg)
		} else if slices.ContainsFunc(st.tagList(), func(o *tagObj) bool { return o.name == s }) {
			errs.add("name", "tag with this name already exists.")
		} else {
			t.name = s
		}
	}
	if v, ok := required("slug"); ok {
		if s, msg := charField(v, false, 100); msg != "" {
			errs.add("slug", msg)
		} else if !slugPattern.MatchString(s) {
			errs.add("slug", `Enter a valid "slug" consisting of letters, numbers, underscores or hyphens.`)
		} else if st.tagBySlug(s) != nil {
			errs.add("slug", "tag with this slug already exists.")
		} else {
			t.slug = s
		}
	}
	if v, ok := obj["color"]; ok {
		if s, msg := charField(v, false, 6); msg != "" {
			errs.add("color", msg)
		} else if !colorPattern.MatchString(s) {
			errs.add("color", "Enter a valid hexadecimal RGB color code.")
		} else {
			t.color = s
		}
	}
	if v, ok := obj["description"]; ok {
		if s, msg := charField(v, true, 200); msg != "" {
			errs.add("description", msg)
		} else {
			t.description = s
		}
	}
	if v, ok := obj["weight"]; ok {
		if n, msg := integerField(v); msg != "" {
			errs.add("weight", msg)
		} else {
			t.weight = n
		}
	}
	if v, ok := obj["object_types"]; ok {
		if types, msg := contentTypesField(v, true); msg != "" {
			errs.add("object_types", msg)
		} else {
			t.objectTypes = types
		}
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return t, nil
}

func listCustomFields(c *reqCtx) response {
	f := newFilterSet(c.r)
	var preds []func(*customFieldObj) bool
	if ids, ok := f.numbers("id"); ok {
		preds = append(preds, func(cf *customFieldObj) bool { return containsID(ids, cf.id) })
	}
	if names := f.values("name"); names != nil {
		preds = append(preds, func(cf *customFieldObj) bool { return slices.Contains(names, cf.name) })
	}
	if types, ok := f.choices("type", customFieldTypeLabels); ok {
		preds = append(preds, func(cf *customFieldObj) bool { return slices.Contains(types, cf.typ) })
	}
	if ots := f.values("object_type"); ots != nil {
		preds = append(preds, func(cf *customFieldObj) bool {
			return slices.ContainsFunc(ots, func(ot string) bool { return slices.Contains(cf.objectTypes, ot) })
		})
	}
	if resp, bad := f.failed(); bad {
		return resp
	}
	return paginate(c, filter(c.st().customFieldList(), preds), func(cf *customFieldObj) any { return c.rend.customField(cf) })
}

func getCustomField(c *reqCtx) response {
	return getOne(c, c.st().cfs, "CustomField", func(cf *customFieldObj) any { return c.rend.customField(cf) })
}

func createCustomFields(c *reqCtx) response {
	data, bad := c.body()
	if bad != nil {
		return *bad
	}
	st := c.st()
	return createMany(data, st.buildCustomField, func(cf *customFieldObj) any {
		cf.id = st.nextID("customfield")
		cf.created = now()
		cf.updated = cf.created
		st.cfs[cf.id] = cf
		return c.rend.customField(cf)
	})
}

func (st *store) buildCustomField(data any) (*customFieldObj, fieldErrors) {
	obj, ok := data.(map[string]any)
	if !ok {
		return nil, fieldErrors{"non_field_errors": {fmt.Sprintf("Invalid data. Expected a dictionary, but got %s.", pyTypeName(data))}}
	}
	cf := &customFieldObj{filterLogic: "loose", weight: 100}
	errs := fieldErrors{}
	if v, ok := obj["name"]; !ok {
		errs.add("name", "This field is required.")
	} else if s, msg := charField(v, false, 50); msg != "" {
		errs.add("name", msg)
	} else {
		if !cfNameRegexp.MatchString(s) {
			errs.add("name", "Only alphanumeric characters and underscores are allowed.")
		}
		if strings.Contains(s, "__") {
			errs.add("name", "Double underscores are not permitted in custom field names.")
		}
		if slices.ContainsFunc(st.customFieldList(), func(o *customFieldObj) bool { return o.name == s }) {
			errs.add("name", "custom field with this name already exists.")
		}
		cf.name = s
	}
	if v, ok := obj["type"]; !ok {
		errs.add("type", "This field is required.")
	} else if s, msg := choiceField(v, customFieldTypeLabels, false); msg != "" {
		errs.add("type", msg)
	} else {
		cf.typ = s
	}
	if v, ok := obj["object_types"]; !ok {
		errs.add("object_types", "This field is required.")
	} else if types, msg := contentTypesField(v, false); msg != "" {
		errs.add("object_types", msg)
	} else {
		cf.objectTypes = types
	}
	if v, ok := obj["filter_logic"]; ok {
		if s, msg := choiceField(v, filterLogicLabels, false); msg != "" {
			errs.add("filter_logic", msg)
		} else {
			cf.filterLogic = s
		}
	}
	if v, ok := obj["label"]; ok {
		if s, msg := charField(v, true, 50); msg != "" {
			errs.add("label", msg)
		} else {
			cf.label = s
		}
	}
	if v, ok := obj["description"]; ok {
		if s, msg := charField(v, true, 200); msg != "" {
			errs.add("description", msg)
		} else {
			cf.description = s
		}
	}
	if v, ok := obj["required"]; ok {
		if b, msg := booleanField(v); msg != "" {
			errs.add("required", msg)
		} else {
			cf.required = b
		}
	}
	if v, ok := obj["weight"]; ok {
		if n, msg := integerField(v); msg != "" {
			errs.add("weight", msg)
		} else {
			cf.weight = n
		}
	}
	if v, ok := obj["default"]; ok {
		cf.def = deepCopy(v)
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return cf, nil
}
