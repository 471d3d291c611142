// Package netbox is the driver (backends.Driver) of NetBox's REST API, from
// which New builds a pool's backends.Backend.
//
// Every IP address it creates carries the provider's tag and, in a text custom
// field, the claim's reservation marker. Allocation asks NetBox for the next
// free address of a prefix or IP range (NetBox serialises that per parent), and
// the marker makes every step repeatable: a lost response, a retried POST or a
// restarted manager finds the address again instead of taking another.
package netbox

import (
	"fmt"
	"net/netip"
	"net/url"
	"slices"
	"strings"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/pkg/backendhttp"
)

// maxDescription is NetBox's limit on an IP address's description; its DNS
// names are limited to backends.MaxDNSName.
const maxDescription = 200

// Defaults for the objects the provider keeps in NetBox.
const (
	DefaultTag         = "cluster-api-ipam"
	DefaultMarkerField = "capi_ipam_claim"
)

// SourceKind says whether a source is a prefix or an IP range.
type SourceKind string

// Source kinds.
const (
	SourcePrefix  SourceKind = "prefix"
	SourceIPRange SourceKind = "ip-range"
)

// Source selects a prefix or IP range by ID, or by CIDR (prefix) or first and
// last address (range) within a VRF named by VRF ("" is the global table).
type Source struct {
	Kind  SourceKind
	ID    int32
	CIDR  netip.Prefix
	Start netip.Addr
	End   netip.Addr
	VRF   string
}

func (s Source) String() string {
	var what string
	switch {
	case s.ID != 0:
		what = fmt.Sprintf("%s %d", s.Kind, s.ID)
	case s.Kind == SourcePrefix:
		what = "prefix " + s.CIDR.String()
	default:
		what = fmt.Sprintf("ip-range %s-%s", s.Start, s.End)
	}
	if s.VRF != "" {
		what += " in VRF " + s.VRF
	}
	return what
}

// Reservation says what to record on each IP address.
type Reservation struct {
	Status             string
	Role               string
	TenantSlug         string
	DNSNamePattern     string
	DescriptionPattern string
	Tags               []string
	CustomFields       map[string]string
}

// Planned says which IP addresses the IPAM team plans for claims: those
// whose DNS name is the one the pool's DNS name pattern renders for the
// claim, and that carry Tag or have Status (both, when both are set).
type Planned struct {
	Tag    string
	Status string
}

// DefaultDescriptionPattern names the claim and its cluster, so the IPAM
// team can tell who holds an address.
const DefaultDescriptionPattern = `Cluster API claim {{ .Namespace }}/{{ .ClaimName }}{{ with .ClusterName }} of cluster {{ . }}{{ end }}`

// HTTPOptions bound every request.
type HTTPOptions = backendhttp.Options

// Config is one NetBox pool.
type Config struct {
	URL                   string
	Token                 string
	CABundle              []byte
	InsecureSkipTLSVerify bool

	Sources      []Source
	Gateway      backends.Gateway
	PrefixLength int
	// ChildPrefixLength, when set, makes the pool hand each claim a child
	// prefix of this length carved from its prefix sources, instead of an
	// address (carve.go).
	ChildPrefixLength int
	// ChildRole and ChildScope are the prefix role and the scope each child
	// is carved with; empty for none.
	ChildRole   string
	ChildScope  Scope
	Reservation Reservation
	// Planned, when set, makes claims adopt the IP addresses planned for
	// them (docs/planned-records.md).
	Planned *Planned

	// Tag and MarkerField name the provider's tag slug and custom field.
	Tag         string
	MarkerField string

	HTTP      HTTPOptions
	UserAgent string
	// Batch bounds how many claims allocated or released at once share
	// one search and one request.
	Batch backends.BatchOptions
	// Uncertain is told of every create the system may still apply (see
	// backends.Options.Uncertain).
	Uncertain func()
}

// Scope names the object a prefix is scoped to: Type is its content type
// (dcim.site, dcim.location, dcim.region, dcim.sitegroup), Slug its slug.
type Scope struct {
	Type string
	Slug string
}

// scopePaths are the API paths of the objects a prefix may be scoped to.
var scopePaths = map[string]string{
	"dcim.site":      "/api/dcim/sites/",
	"dcim.location":  "/api/dcim/locations/",
	"dcim.region":    "/api/dcim/regions/",
	"dcim.sitegroup": "/api/dcim/site-groups/",
}

func (c *Config) setDefaults() {
	if c.Tag == "" {
		c.Tag = DefaultTag
	}
	if c.MarkerField == "" {
		c.MarkerField = DefaultMarkerField
	}
	if c.Reservation.Status == "" {
		c.Reservation.Status = "active"
	}
	if c.Reservation.DescriptionPattern == "" {
		c.Reservation.DescriptionPattern = DefaultDescriptionPattern
	}
	c.HTTP = c.HTTP.WithDefaults()
	if c.UserAgent == "" {
		c.UserAgent = "cluster-api-ipam-provider-bridge"
	}
}

func (c *Config) validate() error {
	u, err := url.Parse(c.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%w: url %q is not an absolute http or https URL", backends.ErrInvalidConfig, c.URL)
	}
	if c.Token == "" {
		return fmt.Errorf("%w: the API token is empty", backends.ErrInvalidConfig)
	}
	if strings.ContainsAny(c.Token, " \t\r\n") {
		return fmt.Errorf("%w: the API token contains white space", backends.ErrInvalidConfig)
	}
	if len(c.Sources) == 0 {
		return fmt.Errorf("%w: no address source", backends.ErrInvalidConfig)
	}
	for _, s := range c.Sources {
		if s.ID == 0 && s.Kind == SourcePrefix && !s.CIDR.IsValid() {
			return fmt.Errorf("%w: prefix source without id or cidr", backends.ErrInvalidConfig)
		}
		if s.ID == 0 && s.Kind == SourceIPRange && (!s.Start.IsValid() || !s.End.IsValid() || s.End.Less(s.Start) || s.Start.Is4() != s.End.Is4()) {
			return fmt.Errorf("%w: ip-range source %s-%s is not a range of one family", backends.ErrInvalidConfig, s.Start, s.End)
		}
	}
	if _, ok := c.Reservation.CustomFields[c.MarkerField]; ok {
		return fmt.Errorf("%w: custom field %q is the provider's claim marker and cannot be set", backends.ErrInvalidConfig, c.MarkerField)
	}
	if p := c.Planned; p != nil {
		if p.Tag == "" && p.Status == "" {
			return fmt.Errorf("%w: planned records need a tag or a status that marks them", backends.ErrInvalidConfig)
		}
		if c.Reservation.DNSNamePattern == "" {
			return fmt.Errorf("%w: planned records are found by the DNS name the pool renders for a claim: set a DNS name pattern", backends.ErrInvalidConfig)
		}
	}
	if c.PrefixLength < 0 || c.PrefixLength > 128 {
		return fmt.Errorf("%w: prefix length %d out of range", backends.ErrInvalidConfig, c.PrefixLength)
	}
	return c.validateCarving()
}

// validateCarving refuses what a carving pool cannot do: a child is
// carved from a prefix, is a network of its own and has none of an IP
// address's fields.
func (c *Config) validateCarving() error {
	if c.ChildPrefixLength == 0 {
		if c.ChildRole != "" || c.ChildScope != (Scope{}) {
			return fmt.Errorf("%w: a child role or scope needs a child prefix length", backends.ErrInvalidConfig)
		}
		return nil
	}
	if s := c.ChildScope; s != (Scope{}) && (scopePaths[s.Type] == "" || s.Slug == "") {
		return fmt.Errorf("%w: child scope %s %q is not a site, location, region or site group with a slug", backends.ErrInvalidConfig, s.Type, s.Slug)
	}
	var refused []string
	switch {
	case c.ChildPrefixLength < 1 || c.ChildPrefixLength > 128:
		return fmt.Errorf("%w: child prefix length %d out of range", backends.ErrInvalidConfig, c.ChildPrefixLength)
	case slices.ContainsFunc(c.Sources, func(s Source) bool { return s.Kind != SourcePrefix }):
		refused = append(refused, "an ip-range source (children are carved from prefixes)")
	}
	if c.PrefixLength != 0 {
		refused = append(refused, "a prefix length (the child's length is the machine's)")
	}
	if c.Gateway.Address.IsValid() {
		refused = append(refused, "a gateway")
	}
	if c.Planned != nil {
		refused = append(refused, "planned records")
	}
	if c.Reservation.Role != "" {
		refused = append(refused, "a role (NetBox's IP address roles do not apply to prefixes)")
	}
	if c.Reservation.DNSNamePattern != "" {
		refused = append(refused, "a DNS name pattern")
	}
	if !slices.Contains([]string{"active", "reserved", "deprecated", "container"}, c.Reservation.Status) {
		refused = append(refused, fmt.Sprintf("status %q (a prefix is active, reserved, deprecated or container)", c.Reservation.Status))
	}
	if len(refused) > 0 {
		return fmt.Errorf("%w: a pool that carves child prefixes takes no %s", backends.ErrInvalidConfig, strings.Join(refused, ", nor "))
	}
	return nil
}
