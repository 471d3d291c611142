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
	"time"

	netbox "github.com/netbox-community/go-netbox/v4"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/pkg/backendhttp"
)

// Backend is a NetBox pool. Create it with New.
type Backend struct {
	cfg     Config
	api     *netbox.APIClient
	http    *http.Client
	baseURL string
	auth    string

	dnsName     backends.Pattern
	description backends.Pattern

	// Filled by each successful validation and reused: NetBox IDs do not
	// change, so allocation needs no lookups beyond the marker search.
	preparation backends.Prepared[preparation]

	// Coalesce the claims allocated or released at once.
	allocations *backends.Batcher[backends.Claim, backends.Allocation]
	releases    *backends.Batcher[releaseCall, struct{}]
}

// preparation is what validation resolves.
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
	tlsConfig, err := backendhttp.TLSConfig(cfg.CABundle, cfg.InsecureSkipTLSVerify)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", backends.ErrInvalidConfig, err)
	}
	httpClient := backendhttp.NewClient(cfg.HTTP, tlsConfig)
	b := &Backend{
		cfg:     cfg,
		http:    httpClient,
		api:     newAPIClient(&cfg, httpClient),
		baseURL: strings.TrimRight(cfg.URL, "/"),
		auth:    authorization(cfg.Token),
	}
	b.allocations = backends.NewBatcher(cfg.Batch, b.allocateBatch)
	b.releases = backends.NewBatcher(cfg.Batch, b.releaseBatch)
	if b.dnsName, err = backends.ParsePattern("dnsName", cfg.Reservation.DNSNamePattern); err != nil {
		return nil, err
	}
	if b.description, err = backends.ParsePattern("description", cfg.Reservation.DescriptionPattern); err != nil {
		return nil, err
	}
	return b, nil
}

// Validate checks the credentials, makes sure the provider's tag and marker
// field exist, resolves the sources afresh and checks the gateway, then
// counts the sources' addresses.
func (b *Backend) Validate(ctx context.Context) (backends.Usage, error) {
	p, err := b.prepare(ctx)
	if err != nil {
		return backends.Usage{}, err
	}
	return b.usage(ctx, p.sources)
}

// prepare is Validate without the counts: what allocation depends on. A
// failed count must not stop an allocation.
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
	p := preparation{sources: sources, refs: refs}
	b.preparation.Set(p)
	return p, nil
}

// Usage counts the addresses of the pool's sources.
func (b *Backend) Usage(ctx context.Context) (backends.Usage, error) {
	sources, _, err := b.prepared(ctx)
	if err != nil {
		return backends.Usage{}, err
	}
	return b.usage(ctx, sources)
}

// prepared returns the resolved sources and references, resolving them on
// first use.
func (b *Backend) prepared(ctx context.Context) ([]resolvedSource, *references, error) {
	p, err := b.preparation.Get(ctx, func(ctx context.Context) error {
		_, err := b.prepare(ctx)
		return err
	})
	return p.sources, p.refs, err
}

// Lookup returns the address that carries the claim's marker.
func (b *Backend) Lookup(ctx context.Context, claim backends.Claim) (backends.Allocation, error) {
	if _, _, err := b.prepared(ctx); err != nil {
		return backends.Allocation{}, err
	}
	// The scope allocation uses: a record moved into another VRF or out of
	// the sources is not the claim's reservation in this pool
	// (ErrOutsidePool says where it is).
	records, err := b.findOwn(ctx, claim.Marker)
	if err != nil {
		return backends.Allocation{}, err
	}
	if len(records) == 0 {
		return backends.Allocation{}, fmt.Errorf("%w: no IP address carries marker %q", backends.ErrNotFound, claim.Marker)
	}
	return b.toAllocation(records[0])
}

// Allocate returns the claim's address, reserving the next free one of the
// first source with space when NetBox holds none for the claim. Claims
// allocated at once share one marker search and one request per source (see
// allocateBatch).
func (b *Backend) Allocate(ctx context.Context, claim backends.Claim) (backends.Allocation, error) {
	// Prepared first: NetBox refuses a tag filter naming a tag it lacks,
	// and a pool that does not validate fails its own claims only.
	sources, _, err := b.prepared(ctx)
	if err != nil {
		return backends.Allocation{}, err
	}
	alloc, err := b.allocations.Do(ctx, claim)
	if err != nil {
		return alloc, err
	}
	return backends.CheckAnswer(ctx, b, claim, alloc, func(a netip.Addr) bool {
		return slices.ContainsFunc(sources, func(s resolvedSource) bool { return s.contains(a) })
	})
}

// allocateOne is Allocate for a claim that arrived alone.
func (b *Backend) allocateOne(ctx context.Context, claim backends.Claim) (backends.Allocation, error) {
	sources, refs, err := b.prepared(ctx)
	if err != nil {
		return backends.Allocation{}, err
	}
	// A record may exist from an earlier attempt whose answer was lost, or
	// from before a crash or clusterctl move: reuse it.
	if alloc, found, err := b.adoptExisting(ctx, claim); err != nil || found {
		return alloc, err
	}
	request, err := b.ipRequest(claim, refs)
	if err != nil {
		return backends.Allocation{}, err
	}
	return b.allocateFromSources(ctx, claim, request, sources, nil)
}

// allocateFromSources reserves an address for the claim from the first of
// sources with space; exhausted describes the full sources tried before.
func (b *Backend) allocateFromSources(ctx context.Context, claim backends.Claim, request netbox.IPAddressRequest,
	sources []resolvedSource, exhausted []string) (backends.Allocation, error) {
	for _, src := range sources {
		created, err := b.allocateFrom(ctx, src, request)
		var full *sourceFullError
		switch {
		case err == nil && created != nil:
			return b.toAllocation(*created)
		case errors.As(err, &full):
			exhausted = append(exhausted, fullSource(src, full))
			continue
		case errors.Is(err, backends.ErrUnavailable):
			// The reservation may have been made though its answer was lost.
			if alloc, found, lookupErr := b.adoptExisting(ctx, claim); lookupErr == nil && found {
				return alloc, nil
			}
			return backends.Allocation{}, err
		default:
			return backends.Allocation{}, err
		}
	}
	return backends.Allocation{}, exhaustedError(exhausted)
}

func fullSource(src resolvedSource, full *sourceFullError) string {
	return fmt.Sprintf("%s (NetBox: %q)", src.display, full.detail)
}

func exhaustedError(exhausted []string) error {
	return fmt.Errorf("%w: every source is full: %s", backends.ErrExhausted, strings.Join(exhausted, ", "))
}

// allocateFrom asks NetBox for the next free address of one source. It
// returns the record kept for the claim: when the POST took more than one
// attempt it may have been applied twice, and the marker search decides.
func (b *Backend) allocateFrom(ctx context.Context, src resolvedSource, request netbox.IPAddressRequest) (*ipRecord, error) {
	ctx, attempts := backendhttp.WithAttemptCounter(ctx)
	op := fmt.Sprintf("allocating from %s", src.display)
	created, resp, err := b.postAvailable(ctx, src, []netbox.IPAddressRequest{request})
	if err != nil {
		if resp != nil && resp.StatusCode == http.StatusConflict {
			// A resent request that finds the source full may follow a first
			// attempt that took its last address and whose answer was lost.
			if kept, found, adoptErr := b.adoptAfterRetry(ctx, attempts.Load(), markerOf(request, b.cfg.MarkerField)); adoptErr != nil || found {
				return kept, adoptErr
			}
			return nil, &sourceFullError{detail: errorDetail(err)}
		}
		return nil, classify(op, resp, err)
	}
	if len(created) != 1 {
		return nil, fmt.Errorf("%s: NetBox created %d addresses for one request", op, len(created))
	}
	// A POST that took more than one attempt may have been applied twice.
	// If sorting that out fails, the answer's record may be the duplicate
	// just deleted: never hand it out; the next attempt adopts by marker.
	kept, found, err := b.adoptAfterRetry(ctx, attempts.Load(), markerOf(request, b.cfg.MarkerField))
	switch {
	case err != nil:
		return nil, fmt.Errorf("%s: resolving a resent request: %w", op, err)
	case found:
		return kept, nil
	}
	rec := recordFromAPI(created[0])
	return &rec, nil
}

// postAvailable asks NetBox for the next free addresses of one source, one
// per request, in one transaction.
func (b *Backend) postAvailable(ctx context.Context, src resolvedSource, requests []netbox.IPAddressRequest) ([]netbox.IPAddress, *http.Response, error) {
	if src.kind == SourcePrefix {
		return b.api.IpamAPI.IpamPrefixesAvailableIpsCreate(ctx, src.id).IPAddressRequest(requests).Execute()
	}
	return b.api.IpamAPI.IpamIpRangesAvailableIpsCreate(ctx, src.id).IPAddressRequest(requests).Execute()
}

// adoptAfterRetry keeps the claim's record when a request took more than one
// attempt: an earlier attempt may have been applied though its answer was
// lost.
func (b *Backend) adoptAfterRetry(ctx context.Context, attempts int32, marker string) (*ipRecord, bool, error) {
	if attempts <= 1 {
		return nil, false, nil
	}
	records, err := b.findOwn(ctx, marker)
	if err != nil || len(records) == 0 {
		return nil, false, err
	}
	kept, err := b.keepOne(ctx, records)
	if err != nil {
		return nil, false, err
	}
	return &kept, true, nil
}

// sourceFullError is NetBox's 409 to an available-ips request: the source
// has no free address left.
type sourceFullError struct{ detail string }

func (e *sourceFullError) Error() string { return "no free address: " + e.detail }

// adoptExisting finds records carrying the claim's marker and keeps one.
func (b *Backend) adoptExisting(ctx context.Context, claim backends.Claim) (backends.Allocation, bool, error) {
	records, err := b.findOwn(ctx, claim.Marker)
	if err != nil || len(records) == 0 {
		return backends.Allocation{}, false, err
	}
	kept, err := b.keepOne(ctx, records)
	if err != nil {
		return backends.Allocation{}, false, err
	}
	alloc, err := b.toAllocation(kept)
	return alloc, err == nil, err
}

// findOwn returns the records carrying the marker that this pool could have
// given: those in one of its sources, VRF included. Records with the marker
// elsewhere are never adopted, nor deleted as duplicates; when there are
// only such records, the claim is told and gets nothing.
func (b *Backend) findOwn(ctx context.Context, marker string) ([]ipRecord, error) {
	sources, _, err := b.prepared(ctx)
	if err != nil {
		return nil, err
	}
	records, err := b.findByMarker(ctx, marker, true)
	if err != nil {
		return nil, err
	}
	return ownRecords(marker, records, sources)
}

// ownRecords keeps the records carrying the marker that lie in sources.
func ownRecords(marker string, records []ipRecord, sources []resolvedSource) ([]ipRecord, error) {
	if len(records) == 0 {
		return nil, nil
	}
	own := slices.DeleteFunc(slices.Clone(records), func(r ipRecord) bool { return !inSources(r, sources) })
	if len(own) == 0 {
		r := records[0]
		vrf := "global"
		if r.VRF != nil {
			vrf = r.VRF.Name
		}
		return nil, fmt.Errorf("%w: NetBox IP address %d (%s, VRF %s) carries marker %q but lies in none of the pool's sources; nothing was handed out",
			backends.ErrOutsidePool, r.ID, r.Address, vrf, marker)
	}
	return own, nil
}

func inSources(r ipRecord, sources []resolvedSource) bool {
	p, err := netip.ParsePrefix(r.Address)
	if err != nil {
		return false
	}
	return slices.ContainsFunc(sources, func(s resolvedSource) bool { return s.vrfID == vrfIDOf(r.VRF) && s.contains(p.Addr()) })
}

// keepOne keeps the oldest of several records that carry one marker and
// deletes the rest: only a retried request can have made them.
func (b *Backend) keepOne(ctx context.Context, records []ipRecord) (ipRecord, error) {
	for _, extra := range records[1:] {
		if err := b.deleteRecord(ctx, extra); err != nil {
			return ipRecord{}, fmt.Errorf("releasing duplicate reservation %s: %w", extra.Address, err)
		}
	}
	return records[0], nil
}

// Endpoint is NetBox's base URL.
func (b *Backend) Endpoint() string { return b.baseURL }

// Release deletes the records that carry the claim's marker, found with one
// search that needs neither the pool's sources nor its tag: a pool whose
// NetBox objects were renamed or retired can still release. When none
// carries the marker, it says why the recorded record was left.
// Claims released at once share one search and one bulk delete (see
// releaseBatch).
func (b *Backend) Release(ctx context.Context, claim backends.Claim, last backends.Reservation) error {
	_, err := b.releases.Do(ctx, releaseCall{claim: claim, last: last})
	return err
}

// Retire keeps the claim's records as deprecated tombstones instead of
// deleting them.
func (b *Backend) Retire(ctx context.Context, claim backends.Claim, last backends.Reservation, at time.Time) error {
	tombstone := backends.TombstoneMarker(claim.Marker, at)
	return b.release(ctx, claim, last, func(ctx context.Context, r ipRecord) error {
		return b.remarkRecord(ctx, r, tombstone)
	})
}

// release finds the claim's records and lets drop delete or retire each.
func (b *Backend) release(ctx context.Context, claim backends.Claim, last backends.Reservation, drop func(context.Context, ipRecord) error) error {
	records, err := b.findByMarker(ctx, claim.Marker, false)
	if err != nil {
		return b.releaseSearchFailed(err, last)
	}
	return b.dropAll(ctx, claim, last, records, drop)
}

// dropAll deletes or retires a claim's records, or explains why there are
// none.
func (b *Backend) dropAll(ctx context.Context, claim backends.Claim, last backends.Reservation, records []ipRecord, drop func(context.Context, ipRecord) error) error {
	for _, r := range records {
		if err := drop(ctx, r); err != nil {
			return err
		}
	}
	if len(records) > 0 {
		return nil
	}
	return b.explainNothingReleased(ctx, claim, last, drop)
}

// releaseSearchFailed says why a release whose marker search failed left
// the claim's record alone.
func (b *Backend) releaseSearchFailed(err error, last backends.Reservation) error {
	if errors.Is(err, backends.ErrUnavailable) || errors.Is(err, backends.ErrUnauthorized) || errors.Is(err, backends.ErrForbidden) {
		return err
	}
	return fmt.Errorf("%w: NetBox %s refused the marker search, so %s (%s) was left in place: %v",
		backends.ErrUnreachable, b.baseURL, last.Address, last.Reference, err)
}

// explainNothingReleased reports a record the claim was given that no
// longer carries its marker, or that lives in another NetBox.
func (b *Backend) explainNothingReleased(ctx context.Context, claim backends.Claim, last backends.Reservation, drop func(context.Context, ipRecord) error) error {
	if last.Endpoint != "" && last.Endpoint != b.baseURL {
		return fmt.Errorf("%w: %s was reserved as %s in NetBox %s, but the pool now points at %s, where no record carries marker %q; it was left in %s",
			backends.ErrUnreachable, last.Address, last.Reference, last.Endpoint, b.baseURL, claim.Marker, last.Endpoint)
	}
	var held []ipRecord
	if id, ok := recordID(last.Reference); ok {
		r, found, err := b.getRecord(ctx, id)
		switch {
		case err != nil:
			return fmt.Errorf("looking up %s: %w", last.Reference, err)
		case found:
			held = append(held, r)
		}
	} else if last.Address.IsValid() {
		// Recorded before references were: look for the address in the
		// pool's sources, if the pool still validates.
		if _, _, err := b.prepared(ctx); err == nil {
			if held, err = b.findByAddress(ctx, last.Address.Addr()); err != nil {
				return err
			}
		}
	}
	if len(held) == 0 {
		return nil
	}
	o := held[0]
	switch {
	case backends.IsTombstoneOf(o.Marker, claim.Marker):
		// Retired by an earlier attempt.
		return nil
	case movedHere(o, claim, last):
		return drop(ctx, o)
	}
	return fmt.Errorf("%w: NetBox IP address %d (%s) in %s no longer carries marker %q (it has %q); it was left in place",
		backends.ErrNotOwned, o.ID, o.Address, b.baseURL, claim.Marker, o.Marker)
}

// getRecord reads one IP address; found is false when it is gone.
func (b *Backend) getRecord(ctx context.Context, id int32) (ipRecord, bool, error) {
	var r ipRecord
	err := b.getJSON(ctx, fmt.Sprintf("/api/ipam/ip-addresses/%d/", id), nil, &r)
	switch {
	case errors.Is(err, backends.ErrNotFound):
		return ipRecord{}, false, nil
	case err != nil:
		return ipRecord{}, false, err
	}
	r.Marker = markerValue(r.CustomFields, b.cfg.MarkerField)
	return r, true, nil
}

// movedHere says whether a record is the claim's under an earlier marker:
// one of the same claim from another management cluster (clusterctl move) or
// from before identities, that holds the very address of the claim's
// IPAddress.
func movedHere(r ipRecord, claim backends.Claim, last backends.Reservation) bool {
	p, err := netip.ParsePrefix(r.Address)
	return err == nil && last.Address.IsValid() && p.Addr() == last.Address.Addr() && backends.SameClaim(r.Marker, claim)
}

// recordID parses a reference of the form ipam/ip-addresses/<id>.
func recordID(ref string) (int32, bool) {
	id, err := strconv.ParseInt(strings.TrimPrefix(ref, recordRefPrefix), 10, 32)
	return int32(id), err == nil && strings.HasPrefix(ref, recordRefPrefix) && id > 0
}

const recordRefPrefix = "ipam/ip-addresses/"

func (b *Backend) deleteRecord(ctx context.Context, r ipRecord) error {
	return b.deleteByID(ctx, r.ID, r.Address)
}

func (b *Backend) deleteByID(ctx context.Context, id int32, address string) error {
	resp, err := b.api.IpamAPI.IpamIpAddressesDestroy(ctx, id).Execute()
	if err != nil {
		err = classify(fmt.Sprintf("deleting IP address %d (%s)", id, address), resp, err)
		if errors.Is(err, backends.ErrNotFound) {
			return nil
		}
		return err
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
		if err := backends.CheckDNSName("dns name", dns, maxDNSName); err != nil {
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

func markerOf(req netbox.IPAddressRequest, field string) string {
	s, _ := req.CustomFields[field].(string)
	return s
}

// toAllocation turns a record into the address, prefix length and gateway
// the IPAddress carries.
func (b *Backend) toAllocation(r ipRecord) (backends.Allocation, error) {
	p, err := netip.ParsePrefix(r.Address)
	if err != nil {
		return backends.Allocation{}, fmt.Errorf("NetBox IP address %d has an unparsable address %q: %w", r.ID, r.Address, err)
	}
	if b.cfg.PrefixLength > 0 && b.cfg.PrefixLength <= p.Addr().BitLen() {
		p = netip.PrefixFrom(p.Addr(), b.cfg.PrefixLength)
	}
	return backends.Allocation{
		Address:   p,
		Gateway:   b.gatewayFor(p),
		Reference: fmt.Sprintf("%s%d", recordRefPrefix, r.ID),
		Endpoint:  b.baseURL,
		Scope:     vrfScope(vrfIDOf(r.VRF)),
	}, nil
}

// vrfScope names a VRF as an allocation's scope; 0 is the global table.
func vrfScope(id int32) string {
	if id == 0 {
		return "vrf/global"
	}
	return fmt.Sprintf("vrf/%d", id)
}

// gatewayFor applies the gateway rule to an allocated address.
func (b *Backend) gatewayFor(p netip.Prefix) netip.Addr {
	switch {
	case b.cfg.Gateway.Address.IsValid():
		return b.cfg.Gateway.Address
	case b.cfg.Gateway.None:
		return netip.Addr{}
	}
	return backends.FirstUsable(p)
}

