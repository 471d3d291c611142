// Package infoblox is the driver (backends.Driver) of Infoblox NIOS's WAPI,
// through infoblox-go-client, from which New builds a pool's
// backends.Backend.
//
// Every object it creates (a fixed address or a host record) carries the
// claim's reservation marker in an extensible attribute. Allocation asks the
// grid for the next available address of a network or range
// (func:nextavailableip), and the marker makes every step repeatable: a
// resent POST, a lost answer or a restarted manager finds the object again
// instead of taking another address.
//
// The client's own transport is not used: it calls log.Fatal on a client
// certificate that does not parse and silently turns TLS verification off
// when its CA file fails to load. Requests go through the client's request
// builder and Connector, over our retrying, fail-closed HTTP client.
package infoblox

import (
	"crypto/tls"
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strings"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/pkg/backendhttp"
)

// maxComment is NIOS's limit on an object's comment; its DNS names are
// limited to backends.MaxDNSName.
const maxComment = 256

const (
	// DefaultMarkerEA is the extensible attribute holding the claim's marker.
	DefaultMarkerEA    = "CAPI-IPAM-Claim"
	DefaultWAPIVersion = "2.12"
	DefaultNetworkView = "default"
	DefaultDNSView     = "default"
	// DefaultNamePattern names objects after the cluster and the claim.
	DefaultNamePattern = `{{ with .ClusterName }}{{ . }}-{{ end }}{{ .ClaimName }}`
	// DefaultCommentPattern says which claim holds the address.
	DefaultCommentPattern = `Cluster API claim {{ .Namespace }}/{{ .ClaimName }}{{ with .ClusterName }} of cluster {{ . }}{{ end }}`
)

// ObjectType is the kind of grid object that holds a reservation.
type ObjectType string

// Object types.
const (
	FixedAddress ObjectType = "FixedAddress"
	HostRecord   ObjectType = "HostRecord"
)

// Source is a network (Network set) or a range (Start and End set) of the
// pool's network view.
type Source struct {
	Network    netip.Prefix
	Start, End netip.Addr
}

func (s Source) String() string {
	if s.Network.IsValid() {
		return "network " + s.Network.String()
	}
	return fmt.Sprintf("range %s-%s", s.Start, s.End)
}

// DNS places host records in an authoritative zone of a DNS view.
type DNS struct {
	Zone string
	View string
}

// Reservation says what to create for each claim.
type Reservation struct {
	ObjectType     ObjectType
	NamePattern    string
	CommentPattern string
	// DNS, for host records only; nil creates them with DNS off.
	DNS *DNS
	// ExtensibleAttributes are values of existing string EAs to set.
	ExtensibleAttributes map[string]string
}

// Planned says which objects the IPAM team plans for claims: objects of
// the pool's type whose name is the one the pool's name pattern renders for
// the claim (for a host record with DNS, in the pool's zone), or, when
// ExtensibleAttribute names one, whose extensible attribute of that name
// holds the rendered name.
type Planned struct {
	ExtensibleAttribute string
}

// Config is one Infoblox pool.
type Config struct {
	Host        string
	Port        int
	WAPIVersion string
	// Scheme is "https" unless a test talks to a plain-HTTP simulator.
	Scheme string

	// Username and Password, or ClientCert and ClientKey (PEM), authenticate.
	Username   string
	Password   string
	ClientCert []byte
	ClientKey  []byte

	CABundle              []byte
	InsecureSkipTLSVerify bool

	NetworkView  string
	Sources      []Source
	Gateway      backends.Gateway
	PrefixLength int
	// ChildPrefixLength, when set, makes the pool hand each claim a child
	// network of this length carved from its sources, which are network
	// containers, instead of an address (carve.go).
	ChildPrefixLength int
	Reservation       Reservation
	// Planned, when set, makes claims adopt the objects planned for them
	// (docs/planned-records.md).
	Planned *Planned

	// MarkerEA names the extensible attribute that holds the claim's marker.
	MarkerEA string

	HTTP HTTPOptions
	// Batch bounds how many claims allocated or released at once share
	// one request object.
	Batch backends.BatchOptions
	// Uncertain is told of every create the system may still apply (see
	// backends.Options.Uncertain).
	Uncertain func()
}

func (c *Config) setDefaults() {
	if c.Port == 0 {
		c.Port = 443
	}
	if c.WAPIVersion == "" {
		c.WAPIVersion = DefaultWAPIVersion
	}
	if c.Scheme == "" {
		c.Scheme = "https"
	}
	if c.NetworkView == "" {
		c.NetworkView = DefaultNetworkView
	}
	if c.MarkerEA == "" {
		c.MarkerEA = DefaultMarkerEA
	}
	if c.Reservation.ObjectType == "" {
		c.Reservation.ObjectType = FixedAddress
	}
	if c.Reservation.NamePattern == "" {
		c.Reservation.NamePattern = DefaultNamePattern
	}
	if c.Reservation.CommentPattern == "" {
		c.Reservation.CommentPattern = DefaultCommentPattern
	}
	if c.Reservation.DNS != nil && c.Reservation.DNS.View == "" {
		c.Reservation.DNS.View = DefaultDNSView
	}
	c.HTTP = c.HTTP.WithDefaults()
}

var wapiVersion = regexp.MustCompile(`^[0-9]+\.[0-9]+(\.[0-9]+)?$`)

func (c *Config) validate() error {
	invalid := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", backends.ErrInvalidConfig, fmt.Sprintf(format, args...))
	}
	if c.Host == "" || strings.ContainsAny(c.Host, "/:@ ") && !isIP(c.Host) {
		return invalid("host %q must be a DNS name or an IP address, without scheme or port", c.Host)
	}
	if c.Port < 1 || c.Port > 65535 {
		return invalid("port %d out of range", c.Port)
	}
	if !wapiVersion.MatchString(c.WAPIVersion) {
		return invalid("WAPI version %q is not of the form 2.12", c.WAPIVersion)
	}
	if c.Scheme != "https" && c.Scheme != "http" {
		return invalid("scheme %q is neither https nor http", c.Scheme)
	}
	if err := CheckCredentials(c.Username, c.Password, c.ClientCert, c.ClientKey); err != nil {
		return err
	}
	if len(c.Sources) == 0 {
		return invalid("no address source")
	}
	for _, s := range c.Sources {
		switch {
		case s.Network.IsValid():
			if s.Network != s.Network.Masked() {
				return invalid("network %s is not a network address", s.Network)
			}
		case !s.Start.IsValid() || !s.End.IsValid() || s.End.Less(s.Start) || s.Start.Is4() != s.End.Is4():
			return invalid("range %s-%s is not a range of one family", s.Start, s.End)
		}
	}
	if c.PrefixLength < 0 || c.PrefixLength > 128 {
		return invalid("prefix length %d out of range", c.PrefixLength)
	}
	switch c.Reservation.ObjectType {
	case FixedAddress:
		if c.Reservation.DNS != nil {
			return invalid("DNS applies to host records only")
		}
	case HostRecord:
	default:
		return invalid("object type %q is neither %s nor %s", c.Reservation.ObjectType, FixedAddress, HostRecord)
	}
	if c.Planned != nil && c.Planned.ExtensibleAttribute == c.MarkerEA {
		return invalid("extensible attribute %q is the provider's claim marker and cannot name planned objects", c.MarkerEA)
	}
	for name := range c.Reservation.ExtensibleAttributes {
		if name == c.MarkerEA {
			return invalid("extensible attribute %q is the provider's claim marker and cannot be set", name)
		}
	}
	return c.validateCarving()
}

// validateCarving refuses what a carving pool cannot do: a child is carved
// from a network container, is a network of its own and has none of an
// address object's fields.
func (c *Config) validateCarving() error {
	if c.ChildPrefixLength == 0 {
		return nil
	}
	if c.ChildPrefixLength < 1 || c.ChildPrefixLength > 128 {
		return fmt.Errorf("%w: child prefix length %d out of range", backends.ErrInvalidConfig, c.ChildPrefixLength)
	}
	var refused []string
	if slices.ContainsFunc(c.Sources, func(s Source) bool { return !s.Network.IsValid() }) {
		refused = append(refused, "a range source (children are carved from network containers)")
	}
	if c.PrefixLength != 0 {
		refused = append(refused, "a prefix length (the child's length is the machine's)")
	}
	if c.Gateway.Address.IsValid() {
		refused = append(refused, "a gateway")
	}
	if c.Planned != nil {
		refused = append(refused, "planned objects")
	}
	if c.Reservation.DNS != nil || c.Reservation.ObjectType == HostRecord {
		refused = append(refused, "host records or DNS")
	}
	if len(refused) > 0 {
		return fmt.Errorf("%w: a pool that carves child networks takes no %s", backends.ErrInvalidConfig, strings.Join(refused, ", nor "))
	}
	return nil
}

// clientCertificate is the client certificate and key, if any; validate
// made sure they form a pair (see CheckCredentials).
func (c *Config) clientCertificate() []tls.Certificate {
	pair, err := tls.X509KeyPair(c.ClientCert, c.ClientKey)
	if err != nil {
		return nil
	}
	return []tls.Certificate{pair}
}

// urlHost is the host as it goes into a URL: IPv6 addresses in brackets.
func (c *Config) urlHost() string {
	if a, err := netip.ParseAddr(c.Host); err == nil && a.Is6() {
		return "[" + c.Host + "]"
	}
	return c.Host
}

func isIP(s string) bool {
	_, err := netip.ParseAddr(s)
	return err == nil
}

// HTTPOptions bound every request.
type HTTPOptions = backendhttp.Options
