package netbox

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"

	netbox "github.com/netbox-community/go-netbox/v4"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends"
)

// NetBox's driver offers every optional role but MACWriter: its records
// serve no DHCP.
var (
	_ backends.Driver[preparation, resolvedSource, ipRecord, netbox.IPAddressRequest] = (*driver)(nil)
	_ backends.AddressRequester[preparation, resolvedSource, ipRecord]                = (*driver)(nil)
	_ backends.PlanAdopter[ipRecord]                                                  = (*driver)(nil)
	_ backends.AuditLister[preparation]                                               = (*driver)(nil)
)

func (d *driver) Sources(p preparation) []resolvedSource { return p.sources }

// Create asks NetBox for the next free addresses of one source, one per
// request, in one transaction.
func (d *driver) Create(ctx context.Context, src resolvedSource, requests []netbox.IPAddressRequest) ([]ipRecord, error) {
	var created []netbox.IPAddress
	var resp *http.Response
	var err error
	if src.kind == SourcePrefix {
		created, resp, err = d.api.IpamAPI.IpamPrefixesAvailableIpsCreate(ctx, src.id).IPAddressRequest(requests).Execute()
	} else {
		created, resp, err = d.api.IpamAPI.IpamIpRangesAvailableIpsCreate(ctx, src.id).IPAddressRequest(requests).Execute()
	}
	if err != nil {
		a := &answerError{err: classify("requesting available IPs", resp, err)}
		if resp != nil {
			a.status = resp.StatusCode
		}
		a.detail = errorDetail(a.status, err)
		return nil, a
	}
	records := make([]ipRecord, len(created))
	for i, ip := range created {
		records[i] = recordFromAPI(ip)
		d.readMarker(&records[i])
	}
	return records, nil
}

// answerError is NetBox's failed answer to a request.
type answerError struct {
	status int // 0 when none arrived
	detail string
	err    error
}

func (a *answerError) Error() string { return a.err.Error() }
func (a *answerError) Unwrap() error { return a.err }

// Verdict: 409 is NetBox's "no free address"; any other 3xx or 4xx is its
// own refusal, applied to nothing.
func (d *driver) Verdict(err error) (backends.Verdict, string) {
	var a *answerError
	switch {
	case !errors.As(err, &a):
		return backends.Unanswered, err.Error()
	case a.status >= http.StatusInternalServerError || a.status < http.StatusMultipleChoices:
		return backends.Unanswered, a.detail
	case a.status == http.StatusConflict:
		return backends.Full, a.detail
	}
	return backends.Refused, a.detail
}

func (d *driver) Get(ctx context.Context, ref string) (ipRecord, bool, error) {
	id, ok := recordID(ref)
	if !ok {
		return ipRecord{}, false, nil
	}
	r, found, err := d.getRecord(ctx, id)
	if err != nil {
		return ipRecord{}, false, fmt.Errorf("reading %s: %w", ref, err)
	}
	return r, found, nil
}

// DropAll deletes the listed IDs in one transaction; IDs already gone are
// no error.
func (d *driver) DropAll(ctx context.Context, records []ipRecord) error {
	ids := make([]map[string]int32, len(records))
	for i, r := range records {
		ids[i] = map[string]int32{"id": r.ID}
	}
	return d.sendJSON(ctx, http.MethodDelete, "/api/ipam/ip-addresses/", nil, ids, nil)
}

func (d *driver) View(r ipRecord) backends.Record {
	p, _ := netip.ParsePrefix(r.Address)
	return backends.Record{Address: p, Marker: r.Marker, Reference: fmt.Sprintf("%s%d", recordRefPrefix, r.ID), Planned: r.planned}
}

func (d *driver) InPool(p preparation, r ipRecord) bool { return inSources(r, p.sources) }

func (d *driver) Describe(r ipRecord) string {
	vrf := "global"
	if r.VRF != nil {
		vrf = r.VRF.Name
	}
	return fmt.Sprintf("NetBox IP address %d (%s, VRF %s)", r.ID, r.Address, vrf)
}

func (d *driver) Label(marker string) string { return fmt.Sprintf("marker %q", marker) }

func (d *driver) Name() string { return "NetBox" }

// getRecord reads one IP address; found is false when it is gone.
func (d *driver) getRecord(ctx context.Context, id int32) (ipRecord, bool, error) {
	var r ipRecord
	etag, err := d.send(ctx, http.MethodGet, fmt.Sprintf("/api/ipam/ip-addresses/%d/", id), nil, nil, &r, "")
	r.etag = etag
	switch {
	case errors.Is(err, backends.ErrNotFound):
		return ipRecord{}, false, nil
	case err != nil:
		return ipRecord{}, false, err
	}
	d.readMarker(&r)
	return r, true, nil
}

// Unusable: a range NetBox marks populated holds no free address by
// NetBox's rule (and NetBox refuses an IP address inside it).
func (d *driver) Unusable(src resolvedSource, _ netip.Addr) string {
	if src.populated {
		return fmt.Sprintf("it lies in %s, which NetBox marks populated: every address of it counts as used", src)
	}
	return ""
}

// Holders lists the IP addresses at addr in the source's VRF (or global
// table), whatever their mask, status or role, oldest first: NetBox's
// address filter without a mask matches the host.
func (d *driver) Holders(ctx context.Context, src resolvedSource, addr netip.Addr) ([]ipRecord, error) {
	q := url.Values{}
	q.Set("address", addr.String())
	q.Set("vrf_id", vrfFilter(src.vrfID))
	q.Set("ordering", "id")
	q.Set("limit", strconv.Itoa(maxPage))
	records, err := listAll[ipRecord](ctx, d, "/api/ipam/ip-addresses/", q, nil)
	if err != nil {
		return nil, err
	}
	for i := range records {
		d.readMarker(&records[i])
	}
	return records, nil
}

// SearchesOldestFirst: Search orders by ID, and NetBox's IDs grow with
// every record made.
func (d *driver) SearchesOldestFirst() bool { return true }

// CreationOrdered: NetBox's IDs grow with every record made.
func (d *driver) CreationOrdered() bool { return true }

// Planned lists the IP addresses whose DNS name is the one the pool renders
// for the claim, with the pool's planned tag and status, oldest first:
// NetBox filters by all three.
func (d *driver) Planned(ctx context.Context, claim backends.Claim) ([]ipRecord, error) {
	name, err := d.dnsName.Render(claim)
	if err != nil {
		return nil, fmt.Errorf("%w: dnsName pattern: %v", backends.ErrInvalidConfig, err)
	}
	if name == "" {
		return nil, nil
	}
	q := url.Values{}
	q.Set("dns_name", name)
	if d.cfg.Planned.Tag != "" {
		q.Set("tag", d.cfg.Planned.Tag)
	}
	if d.cfg.Planned.Status != "" {
		q.Set("status", d.cfg.Planned.Status)
	}
	q.Set("ordering", "id")
	q.Set("limit", strconv.Itoa(maxPage))
	records, err := listAll[ipRecord](ctx, d, "/api/ipam/ip-addresses/", q, nil)
	if err != nil {
		return nil, fmt.Errorf("looking up IP addresses planned as %q: %w", name, err)
	}
	for i := range records {
		d.readMarker(&records[i])
	}
	return records, nil
}

// Adopt writes the claim's marker, noting that the record was planned, and
// nothing else: no tag of the provider's either (the marker search does
// without it).
func (d *driver) Adopt(ctx context.Context, r ipRecord, marker string) error {
	patch := map[string]any{"custom_fields": map[string]any{d.cfg.MarkerField: backends.PlannedMarker(marker)}}
	if err := d.sendJSON(ctx, http.MethodPatch, fmt.Sprintf("/api/ipam/ip-addresses/%d/", r.ID), nil, patch, nil); err != nil {
		return fmt.Errorf("marking IP address %d (%s) %q: %w", r.ID, r.Address, marker, err)
	}
	return nil
}

// Disown removes the record's marker and keeps it: a planned record goes
// back to the IPAM team as it was before a claim adopted it, a retained one
// stays, without the marker (the provider's tag says who made it).
func (d *driver) Disown(ctx context.Context, r ipRecord) error {
	patch := map[string]any{"custom_fields": map[string]any{d.cfg.MarkerField: nil}}
	err := d.conditionally(ctx, r, new(string), func(r ipRecord) error {
		_, err := d.send(ctx, http.MethodPatch, fmt.Sprintf("/api/ipam/ip-addresses/%d/", r.ID), nil, patch, nil, r.etag)
		return err
	})
	if err != nil && !errors.Is(err, backends.ErrNotFound) {
		return fmt.Errorf("removing the marker of IP address %d (%s), to keep it for the IPAM team: %w", r.ID, r.Address, err)
	}
	return nil
}
