package netbox

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	netbox "github.com/netbox-community/go-netbox/v4"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends"
)

// Backend is a NetBox pool. Create it with New.
type Backend struct {
	// The reservation protocol, driven through NetBox (driver.go).
	*protocol

	cfg     Config
	api     *netbox.APIClient
	http    *http.Client
	baseURL string
	auth    string

	dnsName     backends.Pattern
	description backends.Pattern
}

type protocol = backends.Protocol[preparation, resolvedSource, ipRecord, netbox.IPAddressRequest]

// preparation is what validation resolves. NetBox IDs do not change, so
// allocation needs no lookups beyond the marker search.
type preparation struct {
	sources []resolvedSource
	refs    *references
}

// references are NetBox objects an IP address request names by ID or by
// name and slug, looked up once.
type references struct {
	tags     []netbox.NestedTagRequest
	tenantID int32
}

var _ backends.Backend = (*Backend)(nil)

// New checks cfg and returns a Backend. It makes no request.
func New(cfg Config) (*Backend, error) {
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	httpClient, err := backends.HTTPClient(cfg.HTTP, cfg.CABundle, cfg.InsecureSkipTLSVerify, nil)
	if err != nil {
		return nil, err
	}
	b := &Backend{
		cfg:     cfg,
		http:    httpClient,
		api:     newAPIClient(&cfg, httpClient),
		baseURL: strings.TrimRight(cfg.URL, "/"),
		auth:    authorization(cfg.Token),
	}
	b.protocol = backends.NewProtocol[preparation, resolvedSource, ipRecord, netbox.IPAddressRequest](b, driver{b}, cfg.Batch)
	if b.dnsName, err = backends.ParsePattern("dnsName", cfg.Reservation.DNSNamePattern); err != nil {
		return nil, err
	}
	if b.description, err = backends.ParsePattern("description", cfg.Reservation.DescriptionPattern); err != nil {
		return nil, err
	}
	return b, nil
}

// prepare checks the credentials, makes sure the provider's tag and marker
// field exist, resolves the sources afresh and checks the gateway.
func (b *Backend) prepare(ctx context.Context) (preparation, error) {
	refs, err := b.ensureSetup(ctx)
	if err != nil {
		return preparation{}, err
	}
	sources, err := b.resolveSources(ctx)
	if err != nil {
		return preparation{}, err
	}
	for _, s := range sources {
		if err := backends.CheckPrefixLength(b.cfg.PrefixLength, s.network, s.display); err != nil {
			return preparation{}, err
		}
	}
	if err := b.checkGateway(ctx, sources); err != nil {
		return preparation{}, err
	}
	return preparation{sources: sources, refs: refs}, nil
}

// prepared returns the resolved sources and references, resolving them on
// first use.
func (b *Backend) prepared(ctx context.Context) ([]resolvedSource, *references, error) {
	p, err := b.Prepared(ctx)
	return p.sources, p.refs, err
}

// Endpoint is NetBox's base URL.
func (b *Backend) Endpoint() string { return b.baseURL }

// inSources says whether the pool could have given the record: it lies in
// one of sources, VRF included.
func inSources(r ipRecord, sources []resolvedSource) bool {
	p, err := netip.ParsePrefix(r.Address)
	if err != nil {
		return false
	}
	return slices.ContainsFunc(sources, func(s resolvedSource) bool { return s.vrfID == vrfIDOf(r.VRF) && s.Contains(p.Addr()) })
}

// recordID parses a reference of the form ipam/ip-addresses/<id>.
func recordID(ref string) (int32, bool) {
	id, err := strconv.ParseInt(strings.TrimPrefix(ref, recordRefPrefix), 10, 32)
	return int32(id), err == nil && strings.HasPrefix(ref, recordRefPrefix) && id > 0
}

const recordRefPrefix = "ipam/ip-addresses/"

// deleteRecord deletes the record, or returns a planned one to the IPAM
// team.
func (b *Backend) deleteRecord(ctx context.Context, r ipRecord) error {
	if r.planned {
		return b.unplan(ctx, r)
	}
	err := b.conditionally(ctx, r, func(r ipRecord) error {
		_, err := b.send(ctx, http.MethodDelete, fmt.Sprintf("/api/ipam/ip-addresses/%d/", r.ID), nil, nil, nil, r.etag)
		return err
	})
	if err != nil && !errors.Is(err, backends.ErrNotFound) {
		return fmt.Errorf("deleting IP address %d (%s): %w", r.ID, r.Address, err)
	}
	return nil
}

// ipRequest builds the IP address request for a claim.
func (b *Backend) ipRequest(claim backends.Claim, refs *references) (netbox.IPAddressRequest, error) {
	req := netbox.IPAddressRequest{
		Tags:         slices.Clone(refs.tags),
		CustomFields: map[string]any{},
	}
	for k, v := range b.cfg.Reservation.CustomFields {
		req.CustomFields[k] = v
	}
	// Last, so nothing can overwrite it (Config.validate refuses it too).
	req.CustomFields[b.cfg.MarkerField] = claim.Marker
	status, err := netbox.NewIPAddressStatusValueFromValue(b.cfg.Reservation.Status)
	if err != nil {
		return req, fmt.Errorf("%w: status: %v", backends.ErrInvalidConfig, err)
	}
	req.Status = status
	if b.cfg.Reservation.Role != "" {
		role, err := netbox.NewIPAddressRoleValueFromValue(b.cfg.Reservation.Role)
		if err != nil {
			return req, fmt.Errorf("%w: role: %v", backends.ErrInvalidConfig, err)
		}
		req.Role = role
	}
	if refs.tenantID != 0 {
		id := refs.tenantID
		req.Tenant = *netbox.NewNullableASNRangeRequestTenant(&netbox.ASNRangeRequestTenant{Int32: &id})
	}
	if dns, err := b.dnsName.Render(claim); err != nil {
		return req, fmt.Errorf("%w: dns name pattern: %v", backends.ErrInvalidConfig, err)
	} else if dns != "" {
		if err := backends.CheckDNSName("dns name", dns, backends.MaxDNSName); err != nil {
			return req, err
		}
		req.DnsName = &dns
	}
	desc, err := b.description.Render(claim)
	if err != nil {
		return req, fmt.Errorf("%w: description pattern: %v", backends.ErrInvalidConfig, err)
	}
	desc = backends.Truncate(desc, maxDescription)
	req.Description = &desc
	return req, nil
}

// toAllocation turns a record into the address, prefix length and gateway
// the IPAddress carries.
func (b *Backend) toAllocation(r ipRecord) (backends.Allocation, error) {
	p, err := netip.ParsePrefix(r.Address)
	if err != nil {
		return backends.Allocation{}, fmt.Errorf("NetBox IP address %d has an unparsable address %q: %w", r.ID, r.Address, err)
	}
	p = b.machinePrefix(p)
	return backends.Allocation{
		Address:   p,
		Gateway:   b.cfg.Gateway.For(p),
		Reference: fmt.Sprintf("%s%d", recordRefPrefix, r.ID),
		Endpoint:  b.baseURL,
		Scope:     vrfScope(vrfIDOf(r.VRF)),
		Planned:   r.planned,
	}, nil
}

// machinePrefix is the address with the prefix length the machine
// configures: the pool's prefixLength where it sets one, else the one
// NetBox records.
func (b *Backend) machinePrefix(p netip.Prefix) netip.Prefix {
	if b.cfg.PrefixLength > 0 && b.cfg.PrefixLength <= p.Addr().BitLen() {
		return netip.PrefixFrom(p.Addr(), b.cfg.PrefixLength)
	}
	return p
}

// vrfScope names a VRF as an allocation's scope; 0 is the global table.
func vrfScope(id int32) string {
	if id == 0 {
		return "vrf/global"
	}
	return fmt.Sprintf("vrf/%d", id)
}
