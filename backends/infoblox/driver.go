package infoblox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"strings"

	ibclient "github.com/infobloxopen/infoblox-go-client/v2"
	"go4.org/netipx"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends"
)

// Infoblox's driver offers every optional role.
var (
	_ backends.Driver[[]resolvedSource, resolvedSource, object, newRecord] = (*driver)(nil)
	_ backends.AddressRequester[[]resolvedSource, resolvedSource, object]  = (*driver)(nil)
	_ backends.PlanAdopter[object]                                         = (*driver)(nil)
	_ backends.AuditLister[[]resolvedSource]                               = (*driver)(nil)
	_ backends.MACWriter                                                   = (*driver)(nil)
)

// newRecord is the object to create for a claim in a source: a record, or
// a carved child network (carve.go).
type newRecord struct {
	object     ibclient.IBObject
	objectType string
	// data is the body the client's request builder would POST, as a
	// request object's operation carries it.
	data map[string]any
}

func (d *driver) Sources(sources []resolvedSource) []resolvedSource { return sources }

func (d *driver) Request(_ []resolvedSource, claim backends.Claim, src resolvedSource) (newRecord, error) {
	obj, err := d.newObject(claim, src)
	if err != nil {
		return newRecord{}, err
	}
	raw := d.builder.BuildBody(ibclient.CREATE, obj)
	var data map[string]any
	if raw == nil || json.Unmarshal(raw, &data) != nil {
		return newRecord{}, fmt.Errorf("encoding a %s for WAPI failed", obj.ObjectType())
	}
	return newRecord{object: obj, objectType: d.objectTypeFor(src.network.Addr()), data: data}, nil
}

// Create POSTs one object at the next available address of src, or, for
// several, a request object of such POSTs; the grid answers with the
// objects made.
func (d *driver) Create(ctx context.Context, src resolvedSource, requests []newRecord) ([]object, error) {
	fields := d.returnFieldsFor(requests[0].objectType)
	if len(requests) == 1 {
		created, err := d.create(ctx, requests[0].object, fields)
		if err != nil {
			return nil, err
		}
		return []object{created}, nil
	}
	args := map[string]string{"_return_fields": strings.Join(fields, ",")}
	ops := make([]*ibclient.RequestBody, len(requests))
	for i, r := range requests {
		ops[i] = &ibclient.RequestBody{Method: http.MethodPost, Object: r.objectType, Data: r.data, Args: args}
	}
	answers, err := d.sendRequest(ctx, ops)
	if err != nil {
		return nil, err
	}
	var created []object
	for _, a := range answers {
		var o object
		if json.Unmarshal(a, &o) == nil && o.Ref != "" {
			created = append(created, o)
		}
	}
	return created, nil
}

// Verdict: the grid refuses a request whose source has no address left
// ("Cannot find 1 available IP address(es)"); any other answer below 500 is
// its own refusal, applied to nothing.
func (d *driver) Verdict(err error) (backends.Verdict, string) {
	var we *wapiError
	switch {
	case errors.Is(err, backends.ErrExhausted):
		return backends.Full, wapiText(err)
	case errors.As(err, &we) && we.status < http.StatusInternalServerError:
		return backends.Refused, wapiText(err)
	}
	return backends.Unanswered, wapiText(err)
}

// Search sends one plain search per object type for a lone marker, and a
// request object of them for several.
func (d *driver) Search(ctx context.Context, markers []string, scope backends.Scope) (map[string][]object, error) {
	if len(markers) != 1 {
		return d.findByMarkers(ctx, markers, scope)
	}
	found, err := d.findByMarker(ctx, markers[0], scope)
	if err != nil {
		return nil, err
	}
	return map[string][]object{markers[0]: found}, nil
}

// DropAll deletes with one guarded request object (see guarded.go): an
// object already gone, or no longer the one read, fails the whole
// transaction, and the protocol settles each record on its own.
func (d *driver) DropAll(ctx context.Context, objects []object) error {
	writes := make([]guardedWrite, len(objects))
	for i, o := range objects {
		writes[i] = guardedWrite{object: o, method: http.MethodDelete}
	}
	return d.sendGuarded(ctx, writes)
}

// Mark sets the object's marker attribute. A fixed address of the
// provider's own handed to another claim serves that claim's machine, mac,
// from then on: the MAC it was made with is that of the machine it was
// answered for, which does not use the address, and which the grid's DHCP
// would otherwise serve it to. If the grid refuses mac (another fixed
// address holds it), the record serves no machine. One that is retired
// holds its address for no one: it becomes a reservation again
// (match_client RESERVED, the zero MAC, as NIOS stores reservations), so
// that the grid's DHCP no longer serves it to the machine that is gone,
// and the MAC is free for that machine's next fixed address.
func (d *driver) Mark(ctx context.Context, o object, marker, mac string) error {
	change := d.markerChange(o.Ref, marker)
	_, _, tombstone := backends.ParseTombstone(marker)
	if objectType, _, _ := strings.Cut(o.Ref, "/"); objectType == "fixedaddress" && (tombstone || o.dhcpMAC() != mac) {
		if !tombstone && mac != "" {
			change.Mac, change.MatchClient = mac, "MAC_ADDRESS"
			err := d.change(ctx, o, change)
			if !errors.Is(err, backends.ErrMACAddressInUse) {
				return err
			}
		}
		change.Mac, change.MatchClient = zeroMAC, "RESERVED"
	}
	return d.change(ctx, o, change)
}

func (d *driver) View(o object) backends.Record {
	addr, _ := o.address()
	marker, planned := d.markerOf(o)
	return backends.Record{Address: netip.PrefixFrom(addr, addr.BitLen()), Marker: marker, Reference: o.Ref, Planned: planned, MAC: o.dhcpMAC()}
}

// Planned searches the pool's object types in its network view for the
// name the pool renders for the claim, or for the extensible attribute
// that holds it.
func (d *driver) Planned(ctx context.Context, claim backends.Claim) ([]object, error) {
	name, err := d.name.Render(claim)
	if err != nil {
		return nil, fmt.Errorf("%w: name pattern: %v", backends.ErrInvalidConfig, err)
	}
	if name == "" {
		return nil, nil
	}
	field := "name"
	if ea := d.cfg.Planned.ExtensibleAttribute; ea != "" {
		field = "*" + ea
	} else if dns := d.cfg.Reservation.DNS; dns != nil && d.cfg.Reservation.ObjectType == HostRecord {
		name = name + "." + dns.Zone
	}
	var found []object
	for _, t := range d.objectTypes() {
		var page []object
		search := map[string]string{field: name, "network_view": d.cfg.NetworkView}
		if err := d.get(ctx, newObject(t, d.returnFieldsFor(t)...), "", search, &page); err != nil {
			return nil, fmt.Errorf("searching %s for %s=%q: %w", t, field, name, err)
		}
		found = append(found, page...)
	}
	sortByAddress(found)
	return found, nil
}

// Adopt writes the claim's marker, noting that the object was planned.
func (d *driver) Adopt(ctx context.Context, o object, marker string) error {
	return d.change(ctx, o, d.markerChange(o.Ref, backends.PlannedMarker(marker)))
}

// InPool: the search is already limited to the pool's network view.
func (d *driver) InPool(sources []resolvedSource, o object) bool {
	addr, err := o.address()
	return err == nil && slices.ContainsFunc(sources, func(s resolvedSource) bool { return s.Contains(addr) })
}

// Describe names an object and its address, with its network's prefix
// length where the grid gave it, as the IPAM team reads it.
func (d *driver) Describe(o object) string {
	addr, err := o.address()
	if err != nil {
		return o.Ref
	}
	if n, err := netip.ParsePrefix(o.Network); err == nil {
		return fmt.Sprintf("%s (%s)", o.Ref, netip.PrefixFrom(addr, n.Bits()))
	}
	return fmt.Sprintf("%s (%s)", o.Ref, addr)
}

func (d *driver) Label(marker string) string { return fmt.Sprintf("%s=%q", d.cfg.MarkerEA, marker) }

func (d *driver) Name() string { return "the grid" }

// Unusable: a network's network and broadcast addresses (IPv4).
func (d *driver) Unusable(src resolvedSource, addr netip.Addr) string {
	n := src.network.Masked()
	if addr.Is4() && n.Bits() < 31 && (addr == n.Addr() || addr == netipx.PrefixLastIP(n)) {
		return fmt.Sprintf("it is the network or broadcast address of network %s", n)
	}
	return ""
}

// Holders asks the grid what uses addr in the network view (its computed
// ipv4address or ipv6address object: fixed addresses, host records, DNS
// records, leases, whatever their marker) and reads the fixed addresses
// and host records among them, which may carry a marker. They come in the
// order of their references: NIOS records no creation time on them (see
// CreationOrdered).
func (d *driver) Holders(ctx context.Context, _ resolvedSource, addr netip.Addr) ([]object, error) {
	var entries []struct {
		Objects []string `json:"objects"`
		Status  string   `json:"status"`
		Types   []string `json:"types"`
	}
	search := map[string]string{"ip_address": addr.String(), "network_view": d.cfg.NetworkView}
	if err := d.get(ctx, newObject(addressType(addr), "objects", "status", "types"), "", search, &entries); err != nil {
		return nil, fmt.Errorf("looking up address %s: %w", addr, err)
	}
	var refs []string
	used := false
	var types []string
	for _, e := range entries {
		refs = append(refs, e.Objects...)
		used = used || e.Status == "USED"
		types = append(types, e.Types...)
	}
	slices.Sort(refs)
	refs = slices.Compact(refs)
	var held []object
	for _, ref := range refs {
		switch objectType, _, _ := strings.Cut(ref, "/"); objectType {
		case "fixedaddress", "ipv6fixedaddress", "record:host":
			o, found, err := d.Get(ctx, ref)
			if err != nil {
				return nil, err
			}
			if found {
				held = append(held, o)
			}
		default:
			held = append(held, object{Ref: ref})
		}
	}
	if used && len(refs) == 0 {
		// Used, but by nothing the grid names: say what it says.
		held = append(held, object{Ref: fmt.Sprintf("%s %s (%s)", addressType(addr), addr, strings.Join(types, ", "))})
	}
	return held, nil
}

// CreationOrdered: a reference says nothing of when its object was made.
// NIOS refuses a second fixed address at an address; host records without
// DHCP may share one, and a claim's then yields to any other.
func (d *driver) CreationOrdered() bool { return false }
