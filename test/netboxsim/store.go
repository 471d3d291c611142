package netboxsim

import (
	"cmp"
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"time"
)

// The store holds NetBox's objects. It has no lock of its own: every access
// happens under Server.mu, which also makes allocation atomic.

type vrfObj struct {
	id            int32
	name, rd      string
	description   string
	enforceUnique bool
	created       time.Time
}

type tenantObj struct {
	id                      int32
	name, slug, description string
	created                 time.Time
}

// namedObj is an organizational object a prefix refers to: a prefix role,
// or a site, location, region or site group it is scoped to.
type namedObj struct {
	id                      int32
	name, slug, description string
	created                 time.Time
}

type tagObj struct {
	id                             int32
	name, slug, color, description string
	weight                         int
	objectTypes                    []string
	created, updated               time.Time
}

type customFieldObj struct {
	id                       int32
	name, label, description string
	typ, filterLogic         string
	objectTypes              []string
	required                 bool
	weight                   int
	def                      any
	created, updated         time.Time
}

type prefixObj struct {
	id                    int32
	prefix                netip.Prefix // always masked, as NetBox saves prefix.cidr
	vrf, tenant           int32
	status                string
	role                  int32
	scopeType             string // a key of scopeTypes, or "" for none
	scopeID               int32
	isPool, markUtilized  bool
	description, comments string
	tags                  []int32
	cf                    map[string]any
	created, updated      time.Time
}

type rangeObj struct {
	id                          int32
	start, end                  netip.Addr
	bits                        int
	vrf                         int32
	status                      string
	markPopulated, markUtilized bool
	created                     time.Time
}

type ipObj struct {
	id                                 int32
	addr                               netip.Prefix // host address plus mask, not masked
	vrf, tenant                        int32
	status, role, dnsName, description string
	comments                           string
	tags                               []int32
	cf                                 map[string]any
	created, updated                   time.Time
}

type store struct {
	seq     map[string]int32 // one sequence per table, like PostgreSQL
	vrfs    map[int32]*vrfObj
	tenants map[int32]*tenantObj
	roles   map[int32]*namedObj
	// scopes holds the objects a prefix may be scoped to, by content type.
	scopes   map[string]map[int32]*namedObj
	tags     map[int32]*tagObj
	cfs      map[int32]*customFieldObj
	prefixes map[int32]*prefixObj
	ranges   map[int32]*rangeObj
	ips      map[int32]*ipObj
	// descriptionRegex is a CUSTOM_VALIDATORS regex rule on IP addresses'
	// descriptions; nil when none is configured.
	descriptionRegex *regexp.Regexp
	// globalUnique is NetBox's ENFORCE_GLOBAL_UNIQUE (default True): no two
	// IP addresses of the global table at one host address, unless both
	// have a role that may share one.
	globalUnique bool
}

func newStore() *store {
	return &store{
		seq:      map[string]int32{},
		vrfs:     map[int32]*vrfObj{},
		tenants:  map[int32]*tenantObj{},
		roles:    map[int32]*namedObj{},
		scopes:   map[string]map[int32]*namedObj{},
		tags:     map[int32]*tagObj{},
		cfs:      map[int32]*customFieldObj{},
		prefixes: map[int32]*prefixObj{},
		ranges:   map[int32]*rangeObj{},
		ips:      map[int32]*ipObj{},

		globalUnique: true,
	}
}

func (st *store) nextID(table string) int32 {
	st.seq[table]++
	return st.seq[table]
}

// now returns the current time at PostgreSQL's microsecond precision.
func now() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }

// sortedBy returns the map's values in the given order.
func sortedBy[T any](m map[int32]*T, less func(a, b *T) int) []*T {
	out := make([]*T, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	slices.SortFunc(out, less)
	return out
}

// Orderings follow the models' Meta.ordering so that pagination is stable
// and looks like NetBox's.

func (st *store) vrfList() []*vrfObj {
	return sortedBy(st.vrfs, func(a, b *vrfObj) int {
		return cmp.Or(cmp.Compare(a.name, b.name), cmp.Compare(a.rd, b.rd), cmp.Compare(a.id, b.id))
	})
}

func (st *store) tenantList() []*tenantObj {
	return sortedBy(st.tenants, func(a, b *tenantObj) int {
		return cmp.Or(cmp.Compare(a.name, b.name), cmp.Compare(a.id, b.id))
	})
}

// namedList orders roles (by weight, which the simulator keeps at
// NetBox's default, then name) and scope objects by name.
func namedList(m map[int32]*namedObj) []*namedObj {
	return sortedBy(m, func(a, b *namedObj) int {
		return cmp.Or(cmp.Compare(a.name, b.name), cmp.Compare(a.id, b.id))
	})
}

func (st *store) tagList() []*tagObj {
	return sortedBy(st.tags, func(a, b *tagObj) int {
		return cmp.Or(cmp.Compare(a.weight, b.weight), cmp.Compare(a.name, b.name), cmp.Compare(a.id, b.id))
	})
}

func (st *store) customFieldList() []*customFieldObj {
	return sortedBy(st.cfs, func(a, b *customFieldObj) int {
		return cmp.Or(cmp.Compare(a.weight, b.weight), cmp.Compare(a.name, b.name), cmp.Compare(a.id, b.id))
	})
}

func (st *store) prefixList() []*prefixObj {
	return sortedBy(st.prefixes, func(a, b *prefixObj) int {
		return cmp.Or(cmp.Compare(a.vrf, b.vrf), inetCompare(a.prefix, b.prefix), cmp.Compare(a.id, b.id))
	})
}

func (st *store) rangeList() []*rangeObj {
	return sortedBy(st.ranges, func(a, b *rangeObj) int {
		return cmp.Or(cmp.Compare(a.vrf, b.vrf),
			inetCompare(netip.PrefixFrom(a.start, a.bits), netip.PrefixFrom(b.start, b.bits)),
			cmp.Compare(a.id, b.id))
	})
}

func (st *store) ipList() []*ipObj {
	return sortedBy(st.ips, func(a, b *ipObj) int {
		return cmp.Or(inetCompare(a.addr, b.addr), cmp.Compare(a.id, b.id))
	})
}

// customFieldsFor returns the custom fields defined for the given object type.
func (st *store) customFieldsFor(objectType string) []*customFieldObj {
	var out []*customFieldObj
	for _, cf := range st.customFieldList() {
		if slices.Contains(cf.objectTypes, objectType) {
			out = append(out, cf)
		}
	}
	return out
}

func (st *store) tagBySlug(slug string) *tagObj {
	for _, t := range st.tags {
		if t.slug == slug {
			return t
		}
	}
	return nil
}

// String is str(vrf) in NetBox: the name, followed by the RD when set.
func (v *vrfObj) String() string {
	if v.rd != "" {
		return fmt.Sprintf("%s (%s)", v.name, v.rd)
	}
	return v.name
}
