package netboxsim

// Choice sets and labels as NetBox 4.3 defines them (ipam/choices.py,
// extras/choices.py).

var ipStatusLabels = map[string]string{
	"active": "Active", "reserved": "Reserved", "deprecated": "Deprecated", "dhcp": "DHCP", "slaac": "SLAAC",
}

var ipRoleLabels = map[string]string{
	"loopback": "Loopback", "secondary": "Secondary", "anycast": "Anycast", "vip": "VIP",
	"vrrp": "VRRP", "hsrp": "HSRP", "glbp": "GLBP", "carp": "CARP",
}

// nonUniqueRoles may share an address without tripping the uniqueness check
// (IPADDRESS_ROLES_NONUNIQUE).
var nonUniqueRoles = map[string]bool{
	"anycast": true, "vip": true, "vrrp": true, "hsrp": true, "glbp": true, "carp": true,
}

var prefixStatusLabels = map[string]string{
	"container": "Container", "active": "Active", "reserved": "Reserved", "deprecated": "Deprecated",
}

var rangeStatusLabels = map[string]string{
	"active": "Active", "reserved": "Reserved", "deprecated": "Deprecated",
}

var filterLogicLabels = map[string]string{
	"disabled": "Disabled", "loose": "Loose", "exact": "Exact",
}

var customFieldTypes = map[string]struct{ label, dataType string }{
	"text":        {"Text", "string"},
	"longtext":    {"Text (long)", "string"},
	"integer":     {"Integer", "integer"},
	"decimal":     {"Decimal", "number"},
	"boolean":     {"Boolean (true/false)", "boolean"},
	"date":        {"Date", "string"},
	"datetime":    {"Date & time", "string"},
	"url":         {"URL", "string"},
	"json":        {"JSON", "object"},
	"select":      {"Selection", "string"},
	"multiselect": {"Multiple selection", "array"},
	"object":      {"Object", "object"},
	"multiobject": {"Multiple objects", "array"},
}

var customFieldTypeLabels = func() map[string]string {
	m := map[string]string{}
	for k, v := range customFieldTypes {
		m[k] = v.label
	}
	return m
}()
