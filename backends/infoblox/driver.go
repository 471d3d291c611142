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

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends"
)

// driver is the grid as the reservation protocol (backends.Protocol) drives
// it: a claim alone costs plain WAPI calls, claims of a batch share request
// objects (request.go).
type driver struct{ *Backend }

var _ backends.Driver[[]resolvedSource, resolvedSource, object, newRecord] = driver{}

// newRecord is the object to create for a claim in a source.
type newRecord struct {
	object     ibclient.IBObject
	objectType string
	// data is the body the client's request builder would POST, as a
	// request object's operation carries it.
	data map[string]any
}

func (d driver) Prepare(ctx context.Context) ([]resolvedSource, error) { return d.prepare(ctx) }

func (d driver) Sources(sources []resolvedSource) []resolvedSource { return sources }

func (d driver) Count(ctx context.Context, sources []resolvedSource) (backends.Usage, error) {
	return d.usage(ctx, sources)
}

func (d driver) Request(_ []resolvedSource, claim backends.Claim, src resolvedSource) (newRecord, error) {
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
func (d driver) Create(ctx context.Context, src resolvedSource, requests []newRecord) ([]object, error) {
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
func (d driver) Verdict(err error) backends.Verdict {
	var we *wapiError
	switch {
	case errors.Is(err, backends.ErrExhausted):
		return backends.Full
	case errors.As(err, &we) && we.status < http.StatusInternalServerError:
		return backends.Refused
	}
	return backends.Unanswered
}

func (d driver) Said(err error) string { return wapiText(err) }

// Search sends one plain search per object type for a lone marker, and a
// request object of them for several.
func (d driver) Search(ctx context.Context, markers []string, scope backends.Scope) (map[string][]object, error) {
	if len(markers) != 1 {
		return d.findByMarkers(ctx, markers, scope)
	}
	found, err := d.findByMarker(ctx, markers[0], scope)
	if err != nil {
		return nil, err
	}
	return map[string][]object{markers[0]: found}, nil
}

func (d driver) Get(ctx context.Context, ref string) (object, bool, error) {
	return d.getByRef(ctx, ref)
}

func (d driver) AtAddress(ctx context.Context, addr netip.Addr) ([]object, error) {
	return d.findByAddress(ctx, addr)
}

func (d driver) Drop(ctx context.Context, o object) error { return d.deleteObject(ctx, o.Ref) }

// DropAll deletes with one request object: a reference already gone fails
// the whole transaction.
func (d driver) DropAll(ctx context.Context, objects []object) error {
	ops := make([]*ibclient.RequestBody, len(objects))
	for i, o := range objects {
		ops[i] = &ibclient.RequestBody{Method: http.MethodDelete, Object: o.Ref}
	}
	_, err := d.sendRequest(ctx, ops)
	return err
}

func (d driver) Mark(ctx context.Context, o object, marker string) error {
	return d.setMarker(ctx, o.Ref, marker)
}

func (d driver) View(o object) backends.Record {
	addr, _ := o.address()
	return backends.Record{Address: netip.PrefixFrom(addr, addr.BitLen()), Marker: o.ExtAttrs.get(d.cfg.MarkerEA), Reference: o.Ref}
}

// InPool: the search is already limited to the pool's network view.
func (d driver) InPool(sources []resolvedSource, o object) bool {
	addr, err := o.address()
	return err == nil && slices.ContainsFunc(sources, func(s resolvedSource) bool { return s.Contains(addr) })
}

func (d driver) Allocation(sources []resolvedSource, o object) (backends.Allocation, error) {
	return d.toAllocation(o, sources)
}

// Describe names an object and its address, with its network's prefix
// length where the grid gave it, as the IPAM team reads it.
func (d driver) Describe(o object) string {
	addr, err := o.address()
	if err != nil {
		return o.Ref
	}
	if n, err := netip.ParsePrefix(o.Network); err == nil {
		return fmt.Sprintf("%s (%s)", o.Ref, netip.PrefixFrom(addr, n.Bits()))
	}
	return fmt.Sprintf("%s (%s)", o.Ref, addr)
}

func (d driver) Label(marker string) string { return fmt.Sprintf("%s=%q", d.cfg.MarkerEA, marker) }

func (d driver) Name() string { return "the grid" }
