package netboxsim

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
)

// buildIP validates one IP address write as IPAddressSerializer followed by
// IPAddress.full_clean() would. cur is nil for a create; partial is PATCH.
// The result is not stored.
func (st *store) buildIP(data any, cur *ipObj, partial bool) (*ipObj, fieldErrors) {
	obj, ok := data.(map[string]any)
	if !ok {
		return nil, fieldErrors{"non_field_errors": {fmt.Sprintf("Invalid data. Expected a dictionary, but got %s.", pyTypeName(data))}}
	}
	ip := &ipObj{status: "active"}
	if cur != nil {
		cp := *cur
		cp.tags = slices.Clone(cur.tags)
		cp.cf = deepCopyMap(cur.cf)
		ip = &cp
	}
	errs := fieldErrors{}
	check := func(field, msg string) bool {
		if msg != "" {
			errs.add(field, msg)
		}
		return msg == ""
	}

	if v, ok := obj["address"]; ok {
		if s, msg := charField(v, false, 0); check("address", msg) {
			if a, ok := parseAddress(s); ok {
				ip.addr = a
			} else {
				errs.add("address", "Enter a valid IPv4 or IPv6 address with optional mask.")
			}
		}
	} else if !partial {
		errs.add("address", "This field is required.")
	}
	if v, ok := obj["vrf"]; ok {
		if id, msg := st.resolve(v, "vrf"); check("vrf", msg) {
			ip.vrf = id
		}
	}
	if v, ok := obj["tenant"]; ok {
		if id, msg := st.resolve(v, "tenant"); check("tenant", msg) {
			ip.tenant = id
		}
	}
	if v, ok := obj["status"]; ok {
		if s, msg := choiceField(v, ipStatusLabels, false); check("status", msg) {
			ip.status = s
		}
	}
	if v, ok := obj["role"]; ok {
		if s, msg := choiceField(v, ipRoleLabels, true); check("role", msg) {
			ip.role = s
		}
	}
	if v, ok := obj["dns_name"]; ok {
		s, msgs := dnsNameField(v)
		for _, m := range msgs {
			errs.add("dns_name", m)
		}
		ip.dnsName = strings.ToLower(s) // IPAddress.save() lowercases it
	}
	if v, ok := obj["description"]; ok {
		if s, msg := charField(v, true, 200); check("description", msg) {
			ip.description = s
		}
	}
	if v, ok := obj["comments"]; ok {
		if s, msg := charField(v, true, 0); check("comments", msg) {
			ip.comments = s
		}
	}
	if v, ok := obj["tags"]; ok {
		if ids, msg := st.resolveTags(v); check("tags", msg) {
			ip.tags = ids
		}
	}
	ip.cf = st.customFieldData("ipam.ipaddress", obj, ip.cf, cur == nil, errs)
	if len(errs) > 0 {
		return nil, errs
	}
	if errs := st.cleanIP(ip); errs != nil {
		return nil, errs
	}
	return ip, nil
}

// customFieldData is the custom_fields of a write of an objectType object
// whose data was current: a create without them gets every defined field,
// its default or null (CustomFieldDefaultValues); an update merges into
// the current data (CustomFieldsDataField). Format errors go to errs.
func (st *store) customFieldData(objectType string, obj map[string]any, current map[string]any, creating bool, errs fieldErrors) map[string]any {
	v, ok := obj["custom_fields"]
	if !ok {
		if !creating {
			return current
		}
		out := map[string]any{}
		for _, cf := range st.customFieldsFor(objectType) {
			out[cf.name] = deepCopy(cf.def)
		}
		return out
	}
	switch m := v.(type) {
	case nil:
		errs.add("custom_fields", "This field may not be null.")
	case map[string]any:
		out := current
		if creating || out == nil {
			out = map[string]any{}
		}
		for k, val := range m {
			out[k] = deepCopy(val)
		}
		return out
	default:
		errs.add("custom_fields", "Invalid data format. Custom field data must be passed as a dictionary "+
			"mapping field names to their values.")
	}
	return current
}

// cleanIP is IPAddress.clean() for the fields the simulator knows. Like the
// model it stops at the first failure.
func (st *store) cleanIP(ip *ipObj) fieldErrors {
	// CustomFieldsMixin.clean() runs first; its errors are not tied to a
	// field, so Django files them under "__all__".
	if msg := st.cleanCustomFields("ipam.ipaddress", ip.cf); msg != "" {
		return fieldErrors{"__all__": {msg}}
	}
	if ip.addr.Bits() == 0 {
		return fieldErrors{"address": {"Cannot create IP address with /0 mask."}}
	}
	if re := st.descriptionRegex; re != nil && !re.MatchString(ip.description) {
		// CustomValidator raises Django's RegexValidator message.
		return fieldErrors{"description": {"Enter a valid value."}}
	}
	var vrf *vrfObj
	if ip.vrf != 0 {
		vrf = st.vrfs[ip.vrf]
	}
	if (vrf == nil && st.globalUnique) || (vrf != nil && vrf.enforceUnique) {
		var dups []*ipObj
		for _, o := range st.ipList() {
			if o.id != ip.id && o.vrf == ip.vrf && o.addr.Addr() == ip.addr.Addr() {
				dups = append(dups, o)
			}
		}
		shared := nonUniqueRoles[ip.role] && !slices.ContainsFunc(dups, func(o *ipObj) bool { return !nonUniqueRoles[o.role] })
		if len(dups) > 0 && !shared {
			table := "global table"
			if vrf != nil {
				table = "VRF " + vrf.String()
			}
			return fieldErrors{"address": {fmt.Sprintf("Duplicate IP address found in %s: %s", table, dups[0].addr)}}
		}
	}
	for _, g := range st.rangeList() {
		if g.vrf == ip.vrf && g.markPopulated && g.contains(ip.addr.Addr()) {
			return fieldErrors{"address": {fmt.Sprintf("Cannot create IP address %s inside range %s.",
				ip.addr, rangeName(g.start, g.end, g.bits))}}
		}
	}
	if ip.status == "slaac" && ip.addr.Addr().Is4() {
		return fieldErrors{"status": {"Only IPv6 addresses can be assigned SLAAC status"}}
	}
	return nil
}

// cleanCustomFields is CustomFieldsMixin.clean() as of NetBox 4.3/4.4:
// unknown names are an error (4.5 silently drops them).
func (st *store) cleanCustomFields(objectType string, data map[string]any) string {
	defs := map[string]*customFieldObj{}
	for _, cf := range st.customFieldsFor(objectType) {
		defs[cf.name] = cf
	}
	names := make([]string, 0, len(data))
	for k := range data {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, name := range names {
		cf, ok := defs[name]
		if !ok {
			return fmt.Sprintf("Unknown field name '%s' in custom field data.", name)
		}
		if msg := cf.validate(data[name]); msg != "" {
			return fmt.Sprintf("Invalid value for custom field '%s': %s", name, msg)
		}
	}
	for _, cf := range st.customFieldsFor(objectType) {
		if _, ok := data[cf.name]; cf.required && !ok {
			return fmt.Sprintf("Missing required custom field '%s'.", cf.name)
		}
	}
	return ""
}

// validate is CustomField.validate() for the simple types.
func (cf *customFieldObj) validate(v any) string {
	if v == nil || v == "" {
		if cf.required {
			return "Required field cannot be empty."
		}
		return ""
	}
	switch cf.typ {
	case "text", "longtext":
		if _, ok := v.(string); !ok {
			return "Value must be a string."
		}
	case "integer":
		if f, ok := v.(float64); !ok || f != math.Trunc(f) {
			return "Value must be an integer."
		}
	case "decimal":
		if _, ok := v.(float64); !ok {
			return "Value must be a decimal."
		}
	case "boolean":
		if v != true && v != false && v != 0.0 && v != 1.0 {
			return "Value must be true or false."
		}
	}
	return ""
}
