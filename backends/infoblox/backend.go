package infoblox

import (
	"context"
	"fmt"
	"net/http"
	"net/netip"

	ibclient "github.com/infobloxopen/infoblox-go-client/v2"
	"go4.org/netipx"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/pkg/backendhttp"
)

// driver is the grid as the reservation protocol (backends.Protocol)
// drives it (driver.go): a claim alone costs plain WAPI calls, claims of a
// batch share request objects (request.go). It is safe for concurrent use.
type driver struct {
	cfg     Config
	http    *http.Client
	hostCfg ibclient.HostConfig
	authCfg ibclient.AuthConfig

	name    backends.Pattern
	comment backends.Pattern

	// builder builds reads; it holds only the host and credentials.
	builder *ibclient.WapiRequestBuilder
}

// resolvedSource is a source as the grid holds it: network is the network
// holding the source (the range's network for a range).
type resolvedSource struct {
	Source
	network netip.Prefix
}

// nextAvailable is the func:nextavailableip argument for the source.
func (s resolvedSource) nextAvailable(view string) string {
	if s.Network.IsValid() {
		return fmt.Sprintf("func:nextavailableip:%s,%s", s.Network, view)
	}
	return fmt.Sprintf("func:nextavailableip:%s-%s,%s", s.Start, s.End, view)
}

// Subnet is the network holding the source.
func (s resolvedSource) Subnet() netip.Prefix { return s.network }

// Bounds are the first and last addresses the source hands out: a range's
// bounds, or a network's addresses without, in IPv4, the network and
// broadcast addresses.
func (s resolvedSource) Bounds() (netip.Addr, netip.Addr) {
	if !s.Network.IsValid() {
		return s.Start, s.End
	}
	p := s.Network.Masked()
	first := p.Addr()
	last := netipx.PrefixLastIP(p)
	if first.Is4() && p.Bits() < 31 {
		first, last = first.Next(), last.Prev()
	}
	return first, last
}

// Contains says whether the source hands out a.
func (s resolvedSource) Contains(a netip.Addr) bool {
	if s.Network.IsValid() {
		return s.Network.Contains(a)
	}
	return !a.Less(s.Start) && !s.End.Less(a)
}

// New checks cfg and returns the backend of an Infoblox pool. It makes no
// request.
func New(cfg Config) (backends.Backend, error) {
	if cfg.ChildPrefixLength != 0 {
		return backends.Open(newCarver(cfg))
	}
	return backends.Open(newDriver(cfg))
}

// newDriver checks cfg and returns its driver and the rules the protocol
// enforces for it.
func newDriver(cfg Config) (*driver, backends.Options, error) {
	cfg.setDefaults()
	o := backends.Options{Gateway: cfg.Gateway, PrefixLength: cfg.PrefixLength, Plans: cfg.Planned != nil, Batch: cfg.Batch, Uncertain: cfg.Uncertain}
	if err := cfg.validate(); err != nil {
		return nil, o, err
	}
	// The client's own transport is not used (see the package comment).
	httpClient, err := backendhttp.NewTLSClient(cfg.HTTP, cfg.CABundle, cfg.InsecureSkipTLSVerify, cfg.clientCertificate())
	if err != nil {
		return nil, o, fmt.Errorf("%w: %v", backends.ErrInvalidConfig, err)
	}
	d := &driver{
		cfg: cfg,
		hostCfg: ibclient.HostConfig{
			Scheme:  cfg.Scheme,
			Host:    cfg.urlHost(),
			Port:    fmt.Sprint(cfg.Port),
			Version: cfg.WAPIVersion,
		},
		authCfg: ibclient.AuthConfig{Username: cfg.Username, Password: cfg.Password},
		http:    httpClient,
	}
	d.builder, _ = ibclient.NewWapiRequestBuilder(d.hostCfg, d.authCfg)
	if d.name, err = backends.ParsePattern("name", cfg.Reservation.NamePattern); err != nil {
		return nil, o, err
	}
	if d.comment, err = backends.ParsePattern("comment", cfg.Reservation.CommentPattern); err != nil {
		return nil, o, err
	}
	return d, o, nil
}

// Prepare checks the credentials, makes sure the marker's extensible
// attribute definition exists, resolves the sources afresh and checks the
// DNS zone and the extra extensible attributes.
func (d *driver) Prepare(ctx context.Context) ([]resolvedSource, error) {
	if err := d.ensureSetup(ctx); err != nil {
		return nil, err
	}
	sources, err := d.resolveSources(ctx)
	if err != nil {
		return nil, err
	}
	if err := d.checkZone(ctx); err != nil {
		return nil, err
	}
	return sources, nil
}

// Endpoint is the grid's WAPI base URL.
func (d *driver) Endpoint() string {
	return fmt.Sprintf("%s://%s:%d/wapi/v%s", d.cfg.Scheme, d.cfg.urlHost(), d.cfg.Port, d.cfg.WAPIVersion)
}

// Allocation is the object's address with the prefix length of the
// network holding it, in the pool's network view.
func (d *driver) Allocation(sources []resolvedSource, o object) (backends.Allocation, error) {
	addr, err := o.address()
	if err != nil {
		return backends.Allocation{}, err
	}
	network, ok := d.networkOf(o, addr, sources)
	if !ok {
		return backends.Allocation{}, fmt.Errorf("%w: %s holds %s, which lies in none of the pool's networks", backends.ErrInvalidConfig, o.Ref, addr)
	}
	_, planned := d.markerOf(o)
	return backends.Allocation{Address: netip.PrefixFrom(addr, network.Bits()), Reference: o.Ref,
		Scope: "view/" + d.cfg.NetworkView, Planned: planned, MAC: o.dhcpMAC()}, nil
}

// networkOf finds the network holding addr: a source's network, or the one
// the grid names on a fixed address.
func (d *driver) networkOf(o object, addr netip.Addr, sources []resolvedSource) (netip.Prefix, bool) {
	for _, s := range sources {
		if s.network.Contains(addr) {
			return s.network, true
		}
	}
	if p, err := netip.ParsePrefix(o.Network); err == nil && p.Contains(addr) {
		return p, true
	}
	return netip.Prefix{}, false
}
