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
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/pkg/backendhttp"
)

// driver is NetBox as the reservation protocol (backends.Protocol) drives
// it (driver.go): NetBox allocates every object of an available-ips list
// in one transaction under one lock on the parent, filters by several
// values of a custom field at once, and deletes a list of IDs in one
// request: a burst of claims costs a few requests instead of two per claim.
type driver struct {
	cfg     Config
	api     *netbox.APIClient
	http    *http.Client
	baseURL string
	auth    string

	dnsName     backends.Pattern
	description backends.Pattern
	// markedType is the NetBox object type the pool marks: its marker
	// field must apply to it.
	markedType string
}

// The object types a pool marks: IP addresses, or the prefixes a carving
// pool carves.
const (
	ipAddressType = "ipam.ipaddress"
	prefixType    = "ipam.prefix"
)

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

// New checks cfg and returns the backend of a NetBox pool. It makes no
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
	httpClient, err := backendhttp.NewTLSClient(cfg.HTTP, cfg.CABundle, cfg.InsecureSkipTLSVerify, nil)
	if err != nil {
		return nil, o, fmt.Errorf("%w: %v", backends.ErrInvalidConfig, err)
	}
	d := &driver{
		cfg:     cfg,
		http:    httpClient,
		api:     newAPIClient(&cfg, httpClient),
		baseURL: strings.TrimRight(cfg.URL, "/"),
		auth:    authorization(cfg.Token),

		markedType: ipAddressType,
	}
	if d.dnsName, err = backends.ParsePattern("dnsName", cfg.Reservation.DNSNamePattern); err != nil {
		return nil, o, err
	}
	if d.description, err = backends.ParsePattern("description", cfg.Reservation.DescriptionPattern); err != nil {
		return nil, o, err
	}
	return d, o, nil
}

// Prepare checks the credentials, makes sure the provider's tag and marker
// field exist and resolves the sources afresh.
func (d *driver) Prepare(ctx context.Context) (preparation, error) {
	refs, err := d.ensureSetup(ctx)
	if err != nil {
		return preparation{}, err
	}
	sources, err := d.resolveSources(ctx)
	if err != nil {
		return preparation{}, err
	}
	return preparation{sources: sources, refs: refs}, nil
}

// Endpoint is NetBox's base URL.
func (d *driver) Endpoint() string { return d.baseURL }

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

// Drop deletes the record, or returns a planned one to the IPAM team.
func (d *driver) Drop(ctx context.Context, r ipRecord) error {
	if r.planned {
		return d.Disown(ctx, r)
	}
	err := d.conditionally(ctx, r, nil, func(r ipRecord) error {
		_, err := d.send(ctx, http.MethodDelete, fmt.Sprintf("/api/ipam/ip-addresses/%d/", r.ID), nil, nil, nil, r.etag)
		return err
	})
	if err != nil && !errors.Is(err, backends.ErrNotFound) {
		return fmt.Errorf("deleting IP address %d (%s): %w", r.ID, r.Address, err)
	}
	return nil
}

// Request builds the IP address request for a claim, the same whatever
// the source.
func (d *driver) Request(pool preparation, claim backends.Claim, _ resolvedSource) (netbox.IPAddressRequest, error) {
	refs := pool.refs
	req := netbox.IPAddressRequest{
		Tags:         slices.Clone(refs.tags),
		CustomFields: map[string]any{},
	}
	for k, v := range d.cfg.Reservation.CustomFields {
		req.CustomFields[k] = v
	}
	// Last, so nothing can overwrite it (Config.validate refuses it too).
	req.CustomFields[d.cfg.MarkerField] = claim.Marker
	status, err := netbox.NewIPAddressStatusValueFromValue(d.cfg.Reservation.Status)
	if err != nil {
		return req, fmt.Errorf("%w: status: %v", backends.ErrInvalidConfig, err)
	}
	req.Status = status
	if d.cfg.Reservation.Role != "" {
		role, err := netbox.NewIPAddressRoleValueFromValue(d.cfg.Reservation.Role)
		if err != nil {
			return req, fmt.Errorf("%w: role: %v", backends.ErrInvalidConfig, err)
		}
		req.Role = role
	}
	if refs.tenantID != 0 {
		id := refs.tenantID
		req.Tenant = *netbox.NewNullableASNRangeRequestTenant(&netbox.ASNRangeRequestTenant{Int32: &id})
	}
	if dns, err := d.dnsName.Render(claim); err != nil {
		return req, fmt.Errorf("%w: dns name pattern: %v", backends.ErrInvalidConfig, err)
	} else if dns != "" {
		if err := backends.CheckDNSName("dns name", dns, backends.MaxDNSName); err != nil {
			return req, err
		}
		req.DnsName = &dns
	}
	desc, err := d.description.Render(claim)
	if err != nil {
		return req, fmt.Errorf("%w: description pattern: %v", backends.ErrInvalidConfig, err)
	}
	desc = backends.Truncate(desc, maxDescription)
	req.Description = &desc
	return req, nil
}

// Allocation is the record's address with the mask NetBox records, in its
// VRF.
func (d *driver) Allocation(_ preparation, r ipRecord) (backends.Allocation, error) {
	p, err := netip.ParsePrefix(r.Address)
	if err != nil {
		return backends.Allocation{}, fmt.Errorf("NetBox IP address %d has an unparsable address %q: %w", r.ID, r.Address, err)
	}
	return backends.Allocation{
		Address:   p,
		Reference: fmt.Sprintf("%s%d", recordRefPrefix, r.ID),
		Scope:     vrfScope(vrfIDOf(r.VRF)),
		Planned:   r.planned,
	}, nil
}

// vrfScope names a VRF as an allocation's scope; 0 is the global table.
func vrfScope(id int32) string {
	if id == 0 {
		return "vrf/global"
	}
	return fmt.Sprintf("vrf/%d", id)
}
