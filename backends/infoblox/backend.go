package infoblox

import (
	"context"
	"fmt"
	"net/http"
	"net/netip"

	ibclient "github.com/infobloxopen/infoblox-go-client/v2"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends"
)

// Backend is one Infoblox pool. It is safe for concurrent use.
type Backend struct {
	// The reservation protocol, driven through WAPI (driver.go).
	*protocol

	cfg     Config
	http    *http.Client
	hostCfg ibclient.HostConfig
	authCfg ibclient.AuthConfig

	name    backends.Pattern
	comment backends.Pattern

	// builder builds reads; it holds only the host and credentials.
	builder *ibclient.WapiRequestBuilder
}

type protocol = backends.Protocol[[]resolvedSource, resolvedSource, object, newRecord]

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

// Contains says whether the source hands out a.
func (s resolvedSource) Contains(a netip.Addr) bool {
	if s.Network.IsValid() {
		return s.Network.Contains(a)
	}
	return !a.Less(s.Start) && !s.End.Less(a)
}

var _ backends.Backend = (*Backend)(nil)

// New checks cfg and returns a Backend. It makes no request.
func New(cfg Config) (*Backend, error) {
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	// The client's own transport is not used (see the package comment).
	httpClient, err := backends.HTTPClient(cfg.HTTP, cfg.CABundle, cfg.InsecureSkipTLSVerify, cfg.clientCertificate())
	if err != nil {
		return nil, err
	}
	b := &Backend{
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
	b.builder, _ = ibclient.NewWapiRequestBuilder(b.hostCfg, b.authCfg)
	b.protocol = backends.NewProtocol[[]resolvedSource, resolvedSource, object, newRecord](b, driver{b}, cfg.Batch)
	if b.name, err = backends.ParsePattern("name", cfg.Reservation.NamePattern); err != nil {
		return nil, err
	}
	if b.comment, err = backends.ParsePattern("comment", cfg.Reservation.CommentPattern); err != nil {
		return nil, err
	}
	return b, nil
}

// prepare checks the credentials, makes sure the marker's extensible
// attribute definition exists, resolves the sources afresh and checks the
// gateway, the DNS zone and the extra extensible attributes.
func (b *Backend) prepare(ctx context.Context) ([]resolvedSource, error) {
	if err := b.ensureMarkerDefinition(ctx); err != nil {
		return nil, err
	}
	if err := b.checkDefinitions(ctx); err != nil {
		return nil, err
	}
	if err := b.checkNetworkView(ctx); err != nil {
		return nil, err
	}
	sources, err := b.resolveSources(ctx)
	if err != nil {
		return nil, err
	}
	if err := b.checkZone(ctx); err != nil {
		return nil, err
	}
	for _, s := range sources {
		if err := backends.CheckPrefixLength(b.cfg.PrefixLength, s.network, s.Source.String()); err != nil {
			return nil, err
		}
	}
	if err := b.checkGateway(ctx, sources); err != nil {
		return nil, err
	}
	return sources, nil
}

// Endpoint is the grid's WAPI base URL.
func (b *Backend) Endpoint() string {
	return fmt.Sprintf("%s://%s:%d/wapi/v%s", b.cfg.Scheme, b.cfg.urlHost(), b.cfg.Port, b.cfg.WAPIVersion)
}

// toAllocation turns an object into the claim's allocation.
func (b *Backend) toAllocation(o object, sources []resolvedSource) (backends.Allocation, error) {
	addr, err := o.address()
	if err != nil {
		return backends.Allocation{}, err
	}
	network, ok := b.networkOf(o, addr, sources)
	if !ok {
		return backends.Allocation{}, fmt.Errorf("%w: %s holds %s, which lies in none of the pool's networks", backends.ErrInvalidConfig, o.Ref, addr)
	}
	bits := network.Bits()
	if b.cfg.PrefixLength > 0 {
		bits = b.cfg.PrefixLength
	}
	prefix, err := addr.Prefix(bits)
	if err != nil {
		return backends.Allocation{}, fmt.Errorf("%w: prefix length %d for %s: %v", backends.ErrInvalidConfig, bits, addr, err)
	}
	p := netip.PrefixFrom(addr, prefix.Bits())
	_, planned := b.markerOf(o)
	// The address's own subnet: prefixLength may narrow the network.
	return backends.Allocation{Address: p, Gateway: b.cfg.Gateway.For(p), Reference: o.Ref, Endpoint: b.Endpoint(),
		Scope: "view/" + b.cfg.NetworkView, Planned: planned, MAC: o.dhcpMAC()}, nil
}

// networkOf finds the network holding addr: a source's network, or the one
// the grid names on a fixed address.
func (b *Backend) networkOf(o object, addr netip.Addr, sources []resolvedSource) (netip.Prefix, bool) {
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
