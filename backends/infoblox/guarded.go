package infoblox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	ibclient "github.com/infobloxopen/infoblox-go-client/v2"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/pkg/backendhttp"
)

// Writes by reference are guarded. NIOS builds a fixed address's reference
// from its address and network view, so once one is deleted its reference
// names whatever fixed address holds the address next: another claim's. A
// write sent again after its answer was lost (a deletion applied, the
// address handed to the next claim, the deletion resent) would then land on
// that claim's object. So every write to an object the provider read goes
// out as one request object, in one transaction:
//
//  1. a search for an object of the same type at the same address (and
//     network view) that still carries the marker value it was read with
//     (or, for a plan that carries none yet, the name it was read with),
//     saving its reference (assign_state);
//  2. the write, to the reference the search saved (##STATE:…##).
//
// If the object no longer matches, the search finds nothing, the write has
// no object to act on, and the grid applies neither. A host record's
// reference follows its name, not its address, so it never names another
// claim's record; a claim may hold two identical host records at one
// address (a requested address whose answer was lost), which no search
// tells apart, so the write names the reference itself, after the same
// search. Such a request is sent once (backendhttp.WithoutResend); a
// failure or a lost answer is settled by reading the object again (see
// settleDeletion, changeGuarded), never by sending the write again.

// guardedWrite is one write to an object the provider read.
type guardedWrite struct {
	object object
	method string // DELETE or PUT
	data   map[string]any
}

// guard is the search that finds o while it is still the object that was
// read: its type, its address, and its marker value or, without one, its
// name. ok is false for an object that carries neither, which no search
// can tell apart.
func (d *driver) guard(o object) (objectType string, search map[string]any, ok bool) {
	objectType, _, _ = strings.Cut(o.Ref, "/")
	switch addr, err := o.address(); {
	case objectType == "network" || objectType == "ipv6network":
		// A network's reference, too, is made of its CIDR and view.
		if o.Network == "" {
			return objectType, nil, false
		}
		search = map[string]any{"network": o.Network}
	case err != nil:
		return objectType, nil, false
	case addr.Is6():
		search = map[string]any{"ipv6addr": addr.String()}
	default:
		search = map[string]any{"ipv4addr": addr.String()}
	}
	if o.NetworkView != "" && objectType != "record:host" {
		search["network_view"] = o.NetworkView
	}
	switch value, name := o.ExtAttrs.get(d.cfg.MarkerEA), o.Name; {
	case value != "":
		search["*"+d.cfg.MarkerEA] = value
	case name != "":
		search["name"] = name
	default:
		return objectType, nil, false
	}
	return objectType, search, true
}

// guardedOps are the operations of writes in one request object: each
// write preceded by its guard, whose answer is discarded.
func (d *driver) guardedOps(writes []guardedWrite) []*ibclient.RequestBody {
	var ops []*ibclient.RequestBody
	for i, w := range writes {
		objectType, search, ok := d.guard(w.object)
		if !ok {
			ops = append(ops, &ibclient.RequestBody{Method: w.method, Object: w.object.Ref, Data: w.data})
			continue
		}
		state := "ref" + strconv.Itoa(i)
		write := &ibclient.RequestBody{Method: w.method, Object: "##STATE:" + state + ":##", Data: w.data, EnableSubstitution: true}
		if objectType == "record:host" {
			write = &ibclient.RequestBody{Method: w.method, Object: w.object.Ref, Data: w.data}
		}
		// The guard's answer is discarded: one field the type has.
		field := "name"
		if objectType == "network" || objectType == "ipv6network" {
			field = "network"
		}
		ops = append(ops,
			&ibclient.RequestBody{
				Method: http.MethodGet, Object: objectType, Data: search,
				Args:        map[string]string{"_return_fields": field},
				AssignState: map[string]string{state: "_ref"}, Discard: true,
			},
			write,
		)
	}
	return ops
}

// sendGuarded sends writes as one guarded request object, once. A network
// without a marker is never written: nothing tells it apart from the next
// network carved at its CIDR, which its reference would name.
func (d *driver) sendGuarded(ctx context.Context, writes []guardedWrite) error {
	for _, w := range writes {
		if t, _, ok := d.guard(w.object); !ok && (t == "network" || t == "ipv6network") {
			return fmt.Errorf("%w: %s carries no %s to guard a write by; it was left in place", backends.ErrNotOwned, w.object.Ref, d.cfg.MarkerEA)
		}
	}
	_, err := d.sendRequest(backendhttp.WithoutResend(ctx), d.guardedOps(writes))
	return err
}

// deleteGuarded deletes o if it is still the object that was read; one
// that is gone, or that is no longer the one read, is not an error: the
// record the caller wanted gone is gone from its reference.
func (d *driver) deleteGuarded(ctx context.Context, o object) error {
	err := d.sendGuarded(ctx, []guardedWrite{{object: o, method: http.MethodDelete}})
	if err == nil {
		return nil
	}
	return d.settleDeletion(ctx, o, err)
}

// settleDeletion reads o's reference after its guarded deletion failed
// with err, or lost its answer: gone, or holding another object (or o under
// another marker), the deletion is settled; o as it was read, still there,
// keeps err, and the caller tries again later.
func (d *driver) settleDeletion(ctx context.Context, o object, err error) error {
	if refusedCredentials(err) {
		return fmt.Errorf("deleting %s: %w", o.Ref, err)
	}
	now, found, readErr := d.Get(ctx, o.Ref)
	switch {
	case readErr != nil:
		return fmt.Errorf("deleting %s: %w (reading it afterwards: %v)", o.Ref, err, readErr)
	case !found || !d.sameObject(now, o):
		return nil
	}
	return fmt.Errorf("deleting %s: %w", o.Ref, err)
}

// changeGuarded sends the PUT of change to o if it is still the object
// that was read. A failure or a lost answer is settled by reading o again:
// applied (it now carries what change sets) is no error; gone is
// ErrNotFound; no longer the object read is ErrNotOwned; unchanged keeps
// err.
func (d *driver) changeGuarded(ctx context.Context, o object, change any, applied func(object) bool) error {
	data, err := bodyOf(change)
	if err != nil {
		return fmt.Errorf("encoding a change of %s: %w", o.Ref, err)
	}
	err = d.sendGuarded(ctx, []guardedWrite{{object: o, method: http.MethodPut, data: data}})
	if err == nil || refusedCredentials(err) || errors.Is(err, backends.ErrMACAddressInUse) {
		return err
	}
	now, found, readErr := d.Get(ctx, o.Ref)
	switch {
	case readErr != nil:
		return fmt.Errorf("%w (reading %s afterwards: %v)", err, o.Ref, readErr)
	case !found:
		return fmt.Errorf("%w: %s is gone", backends.ErrNotFound, o.Ref)
	case applied(now):
		return nil
	case !d.sameObject(now, o):
		value := now.ExtAttrs.get(d.cfg.MarkerEA)
		return fmt.Errorf("%w: %s now carries %s=%q, not %q; it was left in place",
			backends.ErrNotOwned, o.Ref, d.cfg.MarkerEA, value, o.ExtAttrs.get(d.cfg.MarkerEA))
	}
	return err
}

// sameObject says whether now, read at o's reference, is still o as the
// guard finds it: the same address and marker value (or name, without
// one).
func (d *driver) sameObject(now, o object) bool {
	_, was, ok := d.guard(o)
	_, is, nowOK := d.guard(now)
	if !ok || !nowOK {
		return ok == nowOK
	}
	for k, v := range was {
		if is[k] != v {
			return false
		}
	}
	return true
}

// refusedCredentials: the grid refused the user, not the write; reading
// would be refused too.
func refusedCredentials(err error) bool {
	return errors.Is(err, backends.ErrUnauthorized) || errors.Is(err, backends.ErrForbidden)
}

// bodyOf is the JSON body of a change, as a request object's operation
// carries it.
func bodyOf(change any) (map[string]any, error) {
	raw, err := json.Marshal(change)
	if err != nil {
		return nil, err
	}
	var data map[string]any
	if err := json.Unmarshal(raw, &data); err != nil {
		return nil, err
	}
	return data, nil
}
