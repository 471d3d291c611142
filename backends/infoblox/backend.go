package infoblox

import (
	"cmp"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"time"

	ibclient "github.com/infobloxopen/infoblox-go-client/v2"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/pkg/backendhttp"
)

// Backend is one Infoblox pool. It is safe for concurrent use.
type Backend struct {
	cfg     Config
	http    *http.Client
	hostCfg ibclient.HostConfig
	authCfg ibclient.AuthConfig

	name    backends.Pattern
	comment backends.Pattern

	// builder builds reads; it holds only the host and credentials.
	builder *ibclient.WapiRequestBuilder
	// sources are resolved by each successful validation and reused.
	sources backends.Prepared[[]resolvedSource]

	// Coalesce the claims allocated or released at once.
	allocations *backends.Batcher[backends.Claim, backends.Allocation]
	releases    *backends.Batcher[releaseCall, struct{}]
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

func (s resolvedSource) contains(a netip.Addr) bool {
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
	tlsConfig, err := backendhttp.TLSConfig(cfg.CABundle, cfg.InsecureSkipTLSVerify)
	if err != nil {
		// The client would turn verification off; fail closed instead.
		return nil, fmt.Errorf("%w: %v", backends.ErrInvalidConfig, err)
	}
	if tlsConfig.Certificates, err = cfg.clientCertificate(); err != nil {
		return nil, err
	}
	b := &Backend{
		cfg:  cfg,
		http: backendhttp.NewClient(cfg.HTTP, tlsConfig),
		hostCfg: ibclient.HostConfig{
			Scheme:  cfg.Scheme,
			Host:    cfg.urlHost(),
			Port:    fmt.Sprint(cfg.Port),
			Version: cfg.WAPIVersion,
		},
		authCfg: ibclient.AuthConfig{Username: cfg.Username, Password: cfg.Password},
	}
	b.builder, _ = ibclient.NewWapiRequestBuilder(b.hostCfg, b.authCfg)
	b.allocations = backends.NewBatcher(cfg.Batch, b.allocateBatch)
	b.releases = backends.NewBatcher(cfg.Batch, b.releaseBatch)
	if b.name, err = backends.ParsePattern("name", cfg.Reservation.NamePattern); err != nil {
		return nil, err
	}
	if b.comment, err = backends.ParsePattern("comment", cfg.Reservation.CommentPattern); err != nil {
		return nil, err
	}
	return b, nil
}

// Validate checks the credentials, makes sure the marker's extensible
// attribute definition exists, resolves the sources afresh and checks the
// gateway, the DNS zone and the extra extensible attributes, then counts the
// sources' addresses.
func (b *Backend) Validate(ctx context.Context) (backends.Usage, error) {
	sources, err := b.prepare(ctx)
	if err != nil {
		return backends.Usage{}, err
	}
	return b.usage(ctx, sources)
}

// prepare is Validate without the counts: what allocation depends on. A
// failed count must not stop an allocation.
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
	b.sources.Set(sources)
	return sources, nil
}

// Usage counts the addresses of the pool's sources.
func (b *Backend) Usage(ctx context.Context) (backends.Usage, error) {
	sources, err := b.prepared(ctx)
	if err != nil {
		return backends.Usage{}, err
	}
	return b.usage(ctx, sources)
}

// prepared returns the resolved sources, validating on first use.
func (b *Backend) prepared(ctx context.Context) ([]resolvedSource, error) {
	return b.sources.Get(ctx, func(ctx context.Context) error {
		_, err := b.prepare(ctx)
		return err
	})
}

// Lookup returns the address of the object that carries the claim's marker.
func (b *Backend) Lookup(ctx context.Context, claim backends.Claim) (backends.Allocation, error) {
	sources, err := b.prepared(ctx)
	if err != nil {
		return backends.Allocation{}, err
	}
	found, err := b.findByMarker(ctx, claim.Marker, inPoolView)
	if err != nil {
		return backends.Allocation{}, err
	}
	if len(found) == 0 {
		return backends.Allocation{}, fmt.Errorf("%w: no %s carries %s=%q", backends.ErrNotFound, b.objectLabel(), b.cfg.MarkerEA, claim.Marker)
	}
	return b.toAllocation(found[0], sources)
}

// Allocate returns the claim's address, reserving the next available one of
// the first source with space when the grid holds none for the claim.
// Claims allocated at once share one request object for their marker
// searches and one for their objects (see allocateBatch).
func (b *Backend) Allocate(ctx context.Context, claim backends.Claim) (backends.Allocation, error) {
	// Prepared first: NIOS refuses a search on an undefined attribute, and
	// a pool that does not validate fails its own claims only.
	sources, err := b.prepared(ctx)
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
	sources, err := b.prepared(ctx)
	if err != nil {
		return backends.Allocation{}, err
	}
	// An object may exist from an earlier attempt whose answer was lost, or
	// from before a crash or clusterctl move: reuse it.
	if kept, found, err := b.adoptExisting(ctx, claim); err != nil || found {
		if err != nil {
			return backends.Allocation{}, err
		}
		return b.toAllocation(kept, sources)
	}
	return b.allocateFromSources(ctx, claim, sources, nil)
}

// allocateFromSources creates the claim's object in the first of sources
// with space; exhausted describes the full sources tried before.
func (b *Backend) allocateFromSources(ctx context.Context, claim backends.Claim, sources []resolvedSource, exhausted []string) (backends.Allocation, error) {
	for _, src := range sources {
		kept, err := b.allocateFrom(ctx, claim, src)
		switch {
		case err == nil:
			return b.toAllocation(kept, sources)
		case errors.Is(err, backends.ErrExhausted):
			exhausted = append(exhausted, fullSource(src, err))
		default:
			return backends.Allocation{}, err
		}
	}
	return backends.Allocation{}, fmt.Errorf("%w: every source is full: %s", backends.ErrExhausted, strings.Join(exhausted, ", "))
}

// allocateFrom creates the claim's object at the next available address of
// src and returns the object kept for the claim.
//
// infoblox-go-client sends a failed request a second time, POSTs included,
// and our client retries lost answers: one allocation may create two objects,
// or one whose answer never arrived. Whenever the POST took more than one
// attempt, or failed in a way that may have been applied, the marker search
// decides which object the claim keeps and releases the others.
func (b *Backend) allocateFrom(ctx context.Context, claim backends.Claim, src resolvedSource) (object, error) {
	body, err := b.newObject(claim, src)
	if err != nil {
		return object{}, err
	}
	countedCtx, attempts := backendhttp.WithAttemptCounter(ctx)
	t := b.objectTypeFor(src.network.Addr())
	created, err := b.create(countedCtx, body, b.returnFieldsFor(t))
	if attempts.Load() > 1 || (err != nil && !errors.Is(err, backends.ErrExhausted)) {
		kept, found, lookupErr := b.adoptExisting(ctx, claim)
		switch {
		case lookupErr == nil && found:
			return kept, nil
		case lookupErr != nil && attempts.Load() > 1:
			// The created object may be a duplicate that was just deleted:
			// never hand it out; the next attempt adopts by marker.
			return object{}, fmt.Errorf("allocating from %s: resolving a resent request: %w", src, lookupErr)
		}
	}
	if err != nil {
		return object{}, fmt.Errorf("allocating from %s: %w", src, err)
	}
	return created, nil
}

// fullSource describes a source the grid says is full, for errors.
func fullSource(src resolvedSource, err error) string {
	return fmt.Sprintf("%s (grid: %q)", src, wapiText(err))
}

// adoptExisting finds the objects carrying the claim's marker and keeps the
// one with the lowest address, releasing the others (see keepOwn).
func (b *Backend) adoptExisting(ctx context.Context, claim backends.Claim) (object, bool, error) {
	sources, err := b.prepared(ctx)
	if err != nil {
		return object{}, false, err
	}
	all, err := b.findByMarker(ctx, claim.Marker, inPoolView)
	if err != nil {
		return object{}, false, err
	}
	return b.keepOwn(ctx, claim, all, sources)
}

// keepOwn keeps, of the objects carrying the claim's marker (sorted by
// address), the one with the lowest address in the pool's sources and
// releases the others. NIOS records no creation time on fixed addresses,
// and next-available hands out addresses in order, so the lowest is the
// first made; repeated calls keep the same one.
func (b *Backend) keepOwn(ctx context.Context, claim backends.Claim, all []object, sources []resolvedSource) (object, bool, error) {
	if len(all) == 0 {
		return object{}, false, nil
	}
	// Only what this pool could have given is adopted, or deleted as a
	// duplicate (the search is already limited to the network view).
	found := slices.DeleteFunc(slices.Clone(all), func(o object) bool {
		addr, err := o.address()
		return err != nil || !slices.ContainsFunc(sources, func(s resolvedSource) bool { return s.contains(addr) })
	})
	if len(found) == 0 {
		return object{}, false, fmt.Errorf("%w: %s carries %s=%q but lies in none of the pool's sources; nothing was handed out",
			backends.ErrOutsidePool, all[0].Ref, b.cfg.MarkerEA, claim.Marker)
	}
	for _, extra := range found[1:] {
		if err := b.deleteObject(ctx, extra.Ref); err != nil {
			return object{}, false, fmt.Errorf("releasing duplicate reservation %s: %w", extra.Ref, err)
		}
	}
	return found[0], true, nil
}

// Endpoint is the grid's WAPI base URL.
func (b *Backend) Endpoint() string {
	return fmt.Sprintf("%s://%s:%d/wapi/v%s", b.cfg.Scheme, b.cfg.urlHost(), b.cfg.Port, b.cfg.WAPIVersion)
}

// Release deletes, by reference, the object recorded for the claim and every
// object of the pool's types and view that carries the claim's marker;
// infoblox-go-client's ReleaseIP is not used, as it reports success when its
// lookup fails. It needs no validation, and the recorded reference (which
// names its object type and network view) reaches the object even after the
// pool's object type, view or sources changed.
// Claims released at once share one request object for their marker
// searches and one for their deletions (see releaseBatch).
func (b *Backend) Release(ctx context.Context, claim backends.Claim, last backends.Reservation) error {
	_, err := b.releases.Do(ctx, releaseCall{claim: claim, last: last})
	return err
}

// deleteDrop deletes an object by reference: what Release does to each.
func (b *Backend) deleteDrop(ctx context.Context, o object) error { return b.deleteObject(ctx, o.Ref) }

// Retire keeps the claim's objects as tombstones instead of deleting them.
func (b *Backend) Retire(ctx context.Context, claim backends.Claim, last backends.Reservation, at time.Time) error {
	tombstone := backends.TombstoneMarker(claim.Marker, at)
	return b.release(ctx, claim, last, func(ctx context.Context, o object) error { return b.setMarker(ctx, o.Ref, tombstone) })
}

// release finds the claim's objects and lets drop delete or retire each.
func (b *Backend) release(ctx context.Context, claim backends.Claim, last backends.Reservation, drop func(context.Context, object) error) error {
	found, searchErr := b.findByMarker(ctx, claim.Marker, inEveryView)
	return b.settleRelease(ctx, claim, last, found, searchErr, drop)
}

// settleRelease is release once the marker search has answered (found, or
// searchErr): it drops what was found and, when the search did not find
// it, the recorded object, or says why nothing was released.
func (b *Backend) settleRelease(ctx context.Context, claim backends.Claim, last backends.Reservation,
	found []object, searchErr error, drop func(context.Context, object) error) error {
	released := map[string]bool{}
	if errors.Is(searchErr, backends.ErrUnavailable) || errors.Is(searchErr, backends.ErrUnauthorized) || errors.Is(searchErr, backends.ErrForbidden) {
		return searchErr
	}
	for _, o := range found {
		if err := drop(ctx, o); err != nil {
			return err
		}
		released[o.Ref] = true
	}
	// The recorded object is read only when the search did not find it: its
	// type or view may no longer be the pool's, or it may have been disowned.
	var notOwned error
	here := last.Endpoint == "" || last.Endpoint == b.Endpoint()
	if last.Reference != "" && here && !released[last.Reference] {
		o, ok, err := b.getByRef(ctx, last.Reference)
		switch {
		case err != nil:
			return err
		case ok && backends.IsTombstoneOf(o.ExtAttrs.get(b.cfg.MarkerEA), claim.Marker):
			// Retired by an earlier attempt.
			released[o.Ref] = true
		case ok && (o.ExtAttrs.get(b.cfg.MarkerEA) == claim.Marker || b.movedHere(o, claim, last)):
			if err := drop(ctx, o); err != nil {
				return err
			}
			released[o.Ref] = true
		case ok && len(released) == 0:
			notOwned = fmt.Errorf("%w: %s (%s) in %s no longer carries %s=%q (it has %q); it was left in place",
				backends.ErrNotOwned, o.Ref, last.Address, b.Endpoint(), b.cfg.MarkerEA, claim.Marker, o.ExtAttrs.get(b.cfg.MarkerEA))
		}
	}
	switch {
	case len(released) > 0:
		return nil
	case notOwned != nil:
		return notOwned
	case searchErr != nil:
		// Say a renamed attribute or view: the grid refuses the search.
		return fmt.Errorf("%w: the grid %s refused the marker search, so %s (%s) was left in place: %v",
			backends.ErrUnreachable, b.Endpoint(), last.Address, last.Reference, searchErr)
	case !here:
		return fmt.Errorf("%w: %s was reserved as %s in %s, but the pool now points at %s, where no object carries %s=%q; it was left in %s",
			backends.ErrUnreachable, last.Address, last.Reference, last.Endpoint, b.Endpoint(), b.cfg.MarkerEA, claim.Marker, last.Endpoint)
	case last.Reference == "" && last.Address.IsValid():
		// Recorded before references were: look the address up.
		others, err := b.findByAddress(ctx, last.Address.Addr())
		if err != nil || len(others) == 0 {
			return err
		}
		marker := others[0].ExtAttrs.get(b.cfg.MarkerEA)
		switch {
		case backends.IsTombstoneOf(marker, claim.Marker):
			return nil
		case b.movedHere(others[0], claim, last):
			return drop(ctx, others[0])
		}
		return fmt.Errorf("%w: the %s holding %s (%s) no longer carries %s=%q (it has %q); it was left in place",
			backends.ErrNotOwned, b.objectLabel(), last.Address, others[0].Ref, b.cfg.MarkerEA, claim.Marker, marker)
	}
	return nil
}

// movedHere says whether an object is the claim's under an earlier marker:
// one of the same claim from another management cluster (clusterctl move) or
// from before identities, that holds the very address of the claim's
// IPAddress.
func (b *Backend) movedHere(o object, claim backends.Claim, last backends.Reservation) bool {
	addr, err := o.address()
	return err == nil && last.Address.IsValid() && addr == last.Address.Addr() && backends.SameClaim(o.ExtAttrs.get(b.cfg.MarkerEA), claim)
}

// getByRef reads the object a reference names, with the fields of its type.
func (b *Backend) getByRef(ctx context.Context, ref string) (object, bool, error) {
	objectType, _, _ := strings.Cut(ref, "/")
	var o object
	err := b.get(ctx, newObject(objectType, b.returnFieldsFor(objectType)...), ref, nil, &o)
	switch {
	case errors.Is(err, backends.ErrNotFound):
		return object{}, false, nil
	case err != nil:
		return object{}, false, fmt.Errorf("reading %s: %w", ref, err)
	}
	return o, true, nil
}

func (b *Backend) deleteObject(ctx context.Context, ref string) error {
	conn, err := b.connector(ctx)
	if err != nil {
		return fmt.Errorf("creating a WAPI connector: %w", err)
	}
	if _, err := conn.DeleteObject(ref); err != nil && !errors.Is(err, backends.ErrNotFound) {
		return fmt.Errorf("deleting %s: %w", ref, err)
	}
	return nil
}

// objectTypes are the WAPI types the pool's objects have.
func (b *Backend) objectTypes() []string {
	if b.cfg.Reservation.ObjectType == HostRecord {
		return []string{"record:host"}
	}
	var types []string
	if slices.ContainsFunc(b.cfg.Sources, func(s Source) bool { return sourceAddr(s).Is4() }) {
		types = append(types, "fixedaddress")
	}
	if slices.ContainsFunc(b.cfg.Sources, func(s Source) bool { return sourceAddr(s).Is6() }) {
		types = append(types, "ipv6fixedaddress")
	}
	return types
}

func (b *Backend) objectTypeFor(a netip.Addr) string {
	switch {
	case b.cfg.Reservation.ObjectType == HostRecord:
		return "record:host"
	case a.Is4():
		return "fixedaddress"
	default:
		return "ipv6fixedaddress"
	}
}

func (b *Backend) objectLabel() string {
	if b.cfg.Reservation.ObjectType == HostRecord {
		return "host record"
	}
	return "fixed address"
}

func sourceAddr(s Source) netip.Addr {
	if s.Network.IsValid() {
		return s.Network.Addr()
	}
	return s.Start
}

// returnFieldsFor names the fields read from objects of a type; NIOS
// refuses fields the type lacks.
func (b *Backend) returnFieldsFor(objectType string) []string {
	switch objectType {
	case "fixedaddress":
		return []string{"name", "network", "ipv4addr", "extattrs"}
	case "ipv6fixedaddress":
		return []string{"name", "network", "ipv6addr", "extattrs"}
	}
	return []string{"name", "ipv4addrs", "ipv6addrs", "extattrs"}
}

// findByMarker searches the pool's object types for the marker: one
// server-side extensible attribute search per type, whatever the network
// size. Results are sorted by address.
func (b *Backend) findByMarker(ctx context.Context, marker string, scope markerScope) ([]object, error) {
	var found []object
	for _, t := range b.objectTypes() {
		var page []object
		search := map[string]string{"*" + b.cfg.MarkerEA: marker}
		if scope == inPoolView {
			search["network_view"] = b.cfg.NetworkView
		}
		if err := b.get(ctx, newObject(t, b.returnFieldsFor(t)...), "", search, &page); err != nil {
			return nil, fmt.Errorf("searching %s for %s=%q: %w", t, b.cfg.MarkerEA, marker, err)
		}
		for _, o := range page {
			// The search is exact, but an object is only ours if it says so.
			if o.ExtAttrs.get(b.cfg.MarkerEA) == marker {
				found = append(found, o)
			}
		}
	}
	sortByAddress(found)
	return found, nil
}

// markerScope says where a marker search looks.
type markerScope int

const (
	// inPoolView: the pool's network view, where Lookup and allocation
	// adopt a reservation.
	inPoolView markerScope = iota
	// inEveryView: every network view. A release deletes the claim's
	// objects wherever the IPAM team moved them: the marker names this
	// cluster and claim, so they are the claim's and nobody else's.
	inEveryView
)

// findByAddress returns the pool's objects that hold addr.
func (b *Backend) findByAddress(ctx context.Context, addr netip.Addr) ([]object, error) {
	t := b.objectTypeFor(addr)
	field := "ipv4addr"
	if addr.Is6() {
		field = "ipv6addr"
	}
	var found []object
	search := map[string]string{field: addr.String(), "network_view": b.cfg.NetworkView}
	if err := b.get(ctx, newObject(t, b.returnFieldsFor(t)...), "", search, &found); err != nil {
		return nil, fmt.Errorf("searching %s for %s: %w", t, addr, err)
	}
	return found, nil
}

func sortByAddress(objects []object) {
	slices.SortStableFunc(objects, func(x, y object) int {
		ax, _ := x.address()
		ay, _ := y.address()
		return cmp.Or(ax.Compare(ay), strings.Compare(x.Ref, y.Ref))
	})
}

// newObject builds the object to create for the claim in src.
func (b *Backend) newObject(claim backends.Claim, src resolvedSource) (ibclient.IBObject, error) {
	return b.newObjectAt(claim, src.network.Addr().Is6(), src.nextAvailable(b.cfg.NetworkView))
}

// newObjectAt builds the object to create for the claim at address: an
// address, or a func:nextavailableip argument.
func (b *Backend) newObjectAt(claim backends.Claim, ipv6 bool, next string) (ibclient.IBObject, error) {
	name, err := b.name.Render(claim)
	if err != nil {
		return nil, fmt.Errorf("%w: name pattern: %v", backends.ErrInvalidConfig, err)
	}
	comment, err := b.comment.Render(claim)
	if err != nil {
		return nil, fmt.Errorf("%w: comment pattern: %v", backends.ErrInvalidConfig, err)
	}
	comment = backends.Truncate(comment, maxComment)
	eas := ibclient.EA{b.cfg.MarkerEA: claim.Marker}
	for k, v := range b.cfg.Reservation.ExtensibleAttributes {
		eas[k] = v
	}
	if b.cfg.Reservation.ObjectType == HostRecord {
		dnsOn, dnsView := false, ""
		if dns := b.cfg.Reservation.DNS; dns != nil {
			dnsOn, dnsView = true, dns.View
			name = name + "." + dns.Zone
		}
		if err := backends.CheckDNSName("host record name", name, maxDNSName); err != nil {
			return nil, err
		}
		var v4 []ibclient.HostRecordIpv4Addr
		var v6 []ibclient.HostRecordIpv6Addr
		if ipv6 {
			v6 = []ibclient.HostRecordIpv6Addr{{Ipv6Addr: &next}}
		} else {
			v4 = []ibclient.HostRecordIpv4Addr{{Ipv4Addr: &next}}
		}
		rec := ibclient.NewHostRecord(b.cfg.NetworkView, name, "", "", v4, v6, eas, dnsOn, dnsView, "", "", false, 0, comment, nil, false)
		// Leave TTLs and disabling to the grid's defaults.
		rec.UseTtl, rec.Ttl, rec.Disable = nil, nil, nil
		return rec, nil
	}

	fa := ibclient.NewEmptyFixedAddress(ipv6)
	fa.NetviewName = b.cfg.NetworkView
	fa.Name = &name
	fa.Comment = comment
	fa.Ea = eas
	if ipv6 {
		fa.IPv6Address = next
		fa.Duid = duidFor(claim.Marker)
	} else {
		// A reservation: the address is held without a MAC.
		reserved := "RESERVED"
		fa.IPv4Address = next
		fa.MatchClient = &reserved
	}
	return fa, nil
}

// duidFor derives a DUID-UUID (RFC 6355) from the marker: NIOS requires a
// DUID on IPv6 fixed addresses, and a stable one names the claim.
func duidFor(marker string) string {
	sum := sha256.Sum256([]byte(marker))
	parts := []string{"00", "04"}
	for _, c := range sum[:16] {
		parts = append(parts, fmt.Sprintf("%02x", c))
	}
	return strings.Join(parts, ":")
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
	alloc := backends.Allocation{Address: netip.PrefixFrom(addr, prefix.Bits()), Reference: o.Ref, Endpoint: b.Endpoint(),
		Scope: "view/" + b.cfg.NetworkView}
	switch {
	case b.cfg.Gateway.None:
	case b.cfg.Gateway.Address.IsValid():
		alloc.Gateway = b.cfg.Gateway.Address
	default:
		// The address's own subnet: prefixLength may narrow the network.
		alloc.Gateway = backends.FirstUsable(alloc.Address)
	}
	return alloc, nil
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

// wapiText is the grid's own explanation inside err, if any.
func wapiText(err error) string {
	var we *wapiError
	if errors.As(err, &we) {
		return we.text
	}
	return err.Error()
}
