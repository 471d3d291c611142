package netboxtarget

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/httpfault"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/netboxsim"
)

// realNetBox is a real NetBox (hack/netbox/up.sh starts one) behind a
// proxy on 127.0.0.1. The proxy counts calls and injects faults; a lost
// response is applied by NetBox and then cut, exactly the failure the
// provider must survive. Tests name their own tokens; the proxy swaps each
// registered token for a real one of the same kind, so NetBox itself still
// authenticates every request, and an unregistered token reaches NetBox
// unchanged and is refused by it.
//
// NetBox's database is shared by all tests of a run, so seeding is
// get-or-create: tests keep apart by using their own prefixes. Seeding uses
// NETBOX_TOKEN_ADMIN when it is set, else the v2 write token.
type realNetBox struct {
	t        testing.TB
	upstream string
	// admin authorizes seeding, which bypasses the proxy.
	admin    string
	writeV1  string
	writeV2  string
	readOnly string
	proxy    *httptest.Server
	client   *http.Client

	faults   netboxsim.FaultQueue
	throttle httpfault.Throttle

	mu      sync.Mutex
	aliases map[string]string
	calls   httpfault.Log
	latency time.Duration
}

func newReal(t testing.TB) *realNetBox {
	t.Helper()
	env := func(name string) string {
		v := os.Getenv(name)
		if v == "" {
			t.Fatalf("NETBOX_URL is set but %s is not: source the env file hack/netbox/up.sh prints", name)
		}
		return v
	}
	r := &realNetBox{
		t:        t,
		upstream: strings.TrimRight(os.Getenv("NETBOX_URL"), "/"),
		writeV1:  authorization(env("NETBOX_TOKEN_V1")),
		writeV2:  authorization(env("NETBOX_TOKEN_V2")),
		readOnly: authorization(env("NETBOX_TOKEN_READONLY")),
		client:   &http.Client{Timeout: 60 * time.Second},
		aliases:  map[string]string{},
	}
	// Seeding needs an administrator; the provider's write tokens may be a
	// least-privilege user's (hack/netbox/least-privilege.sh), which may
	// not create prefixes, VRFs or other users' records.
	r.admin = r.writeV2
	if admin := os.Getenv("NETBOX_TOKEN_ADMIN"); admin != "" {
		r.admin = authorization(admin)
	}
	r.proxy = httptest.NewServer(http.HandlerFunc(r.serve))
	return r
}

func authorization(token string) string {
	if strings.HasPrefix(token, "nbt_") {
		return "Bearer " + token
	}
	return "Token " + token
}

func (r *realNetBox) URL() string { return r.proxy.URL }
func (r *realNetBox) Close()      { r.proxy.Close() }

// AddToken maps a test token to a real one of the same kind: a v2 token
// ("nbt_…") to the v2 write token, any other to the v1 write token, and a
// read-only one to the read-only v1 token.
func (r *realNetBox) AddToken(token string, writeEnabled bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case !writeEnabled:
		r.aliases[token] = r.readOnly
	case strings.HasPrefix(token, "nbt_"):
		r.aliases[token] = r.writeV2
	default:
		r.aliases[token] = r.writeV1
	}
}

// RemoveToken forgets a test token's alias: it then reaches NetBox as it is,
// and NetBox refuses it as an unknown token.
func (r *realNetBox) RemoveToken(token string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.aliases, token)
}

// serve forwards one request to NetBox, with faults as the simulator has them.
func (r *realNetBox) serve(w http.ResponseWriter, req *http.Request) {
	done, admitted := r.throttle.Admit(w, req, &r.calls, netboxsim.WriteFaultStatus)
	if !admitted {
		return
	}
	defer done()
	r.mu.Lock()
	latency := r.latency
	if _, token, ok := strings.Cut(req.Header.Get("Authorization"), " "); ok {
		if real, aliased := r.aliases[token]; aliased {
			req.Header.Set("Authorization", real)
		}
	}
	r.mu.Unlock()
	fault, faulty := r.faults.Take(req.Method, req.URL.Path)
	time.Sleep(latency)
	if faulty && fault.Kind == netboxsim.FaultLatency {
		time.Sleep(fault.Latency)
	}
	switch {
	case faulty && fault.Kind == netboxsim.FaultStatus:
		_, _ = io.Copy(io.Discard, req.Body)
		r.record(req, fault.Status)
		netboxsim.WriteFaultStatus(w, fault.Status)
		return
	case faulty && fault.Kind == netboxsim.FaultDrop:
		_, _ = io.Copy(io.Discard, req.Body)
		r.record(req, 0)
		netboxsim.CloseWithoutResponse(w)
		return
	}
	// Buffered, so the request carries a Content-Length: Django under
	// gunicorn reads a chunked body as empty.
	reqBody, err := io.ReadAll(req.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	// NetBox finishes a request whose client went away, as the simulator does.
	out, err := http.NewRequestWithContext(context.WithoutCancel(req.Context()), req.Method, r.upstream+req.URL.RequestURI(), bytes.NewReader(reqBody))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	out.Header = req.Header.Clone()
	gather := faulty && fault.Kind == httpfault.Gather
	if gather {
		fault.Gathering.Arrive()
	}
	if faulty && fault.Kind == httpfault.Before {
		fault.RunThen()
	}
	resp, err := r.client.Do(out)
	if err != nil {
		r.record(req, 0)
		netboxsim.WriteFaultStatus(w, http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	r.record(req, resp.StatusCode)
	if gather {
		fault.Gathering.Processed()
	}
	if faulty && fault.Kind == netboxsim.FaultLoseResponse {
		fault.RunThen()
		netboxsim.CloseWithoutResponse(w)
		return
	}
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(body)
}

func (r *realNetBox) record(req *http.Request, status int) {
	if !strings.HasPrefix(req.URL.Path, "/api/") {
		return
	}
	r.calls.Record(req, status)
}

func (r *realNetBox) InjectFault(f netboxsim.Fault) { r.faults.Add(f) }
func (r *realNetBox) ClearFaults()                  { r.faults.Clear() }

func (r *realNetBox) SetLatency(d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.latency = d
}

func (r *realNetBox) Calls() []netboxsim.Call { return r.calls.Calls() }
func (r *realNetBox) ResetCalls()             { r.calls.Reset() }

func (r *realNetBox) CountCalls(method, pathPrefix string) int {
	return r.calls.Count(method, pathPrefix)
}

// Seeding, straight to NetBox with the admin token.

func (r *realNetBox) do(method, path string, query url.Values, body any, out any) int {
	r.t.Helper()
	var reader io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			r.t.Fatalf("netbox: encoding %s %s: %v", method, path, err)
		}
		reader = bytes.NewReader(b)
	}
	u := r.upstream + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	req, err := http.NewRequest(method, u, reader)
	if err != nil {
		r.t.Fatalf("netbox: %v", err)
	}
	req.Header.Set("Authorization", r.admin)
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := r.client.Do(req)
	if err != nil {
		r.t.Fatalf("netbox: %s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 {
		r.t.Fatalf("netbox: %s %s: HTTP %d: %s", method, path, resp.StatusCode, data)
	}
	if out != nil && len(data) > 0 {
		if err := json.Unmarshal(data, out); err != nil {
			r.t.Fatalf("netbox: decoding %s %s: %v", method, path, err)
		}
	}
	return resp.StatusCode
}

type idOnly struct {
	ID int32 `json:"id"`
}

// getOrCreate returns the first object matching query, creating it from body
// when there is none.
func (r *realNetBox) getOrCreate(path string, query url.Values, body map[string]any) int32 {
	r.t.Helper()
	var found struct {
		Results []idOnly `json:"results"`
	}
	r.do(http.MethodGet, path, query, nil, &found)
	if len(found.Results) > 0 {
		return found.Results[0].ID
	}
	var created idOnly
	r.do(http.MethodPost, path, nil, body, &created)
	return created.ID
}

func vrfFilter(id int32) string {
	if id == 0 {
		return "null"
	}
	return strconv.Itoa(int(id))
}

func nullableID(id int32) any {
	if id == 0 {
		return nil
	}
	return id
}

func (r *realNetBox) AddVRF(name, rd string) int32 {
	return r.getOrCreate("/api/ipam/vrfs/", url.Values{"name": {name}}, map[string]any{"name": name, "rd": rd})
}

func (r *realNetBox) AddTenant(name, slug string) int32 {
	return r.getOrCreate("/api/tenancy/tenants/", url.Values{"slug": {slug}}, map[string]any{"name": name, "slug": slug})
}

func (r *realNetBox) AddRole(name, slug string) int32 {
	return r.getOrCreate("/api/ipam/roles/", url.Values{"slug": {slug}}, map[string]any{"name": name, "slug": slug})
}

// scopePaths are the scope types AddScope makes on a real NetBox: a
// location would need a site of its own.
var scopePaths = map[string]string{"dcim.site": "/api/dcim/sites/", "dcim.region": "/api/dcim/regions/", "dcim.sitegroup": "/api/dcim/site-groups/"}

func (r *realNetBox) AddScope(scopeType, name, slug string) int32 {
	path, ok := scopePaths[scopeType]
	if !ok {
		r.t.Fatalf("netboxtarget: cannot add a scope of type %q", scopeType)
	}
	return r.getOrCreate(path, url.Values{"slug": {slug}}, map[string]any{"name": name, "slug": slug})
}

func (r *realNetBox) AddTag(name, slug string) int32 {
	return r.getOrCreate("/api/extras/tags/", url.Values{"slug": {slug}}, map[string]any{"name": name, "slug": slug})
}

func (r *realNetBox) AddCustomField(name, filterLogic string) int32 {
	if filterLogic == "" {
		filterLogic = "loose"
	}
	return r.getOrCreate("/api/extras/custom-fields/", url.Values{"name": {name}}, map[string]any{
		"name": name, "type": "text", "object_types": []string{"ipam.ipaddress"}, "filter_logic": filterLogic,
	})
}

func (r *realNetBox) AddPrefix(cidr string, o netboxsim.PrefixOptions) int32 {
	status := o.Status
	if status == "" {
		status = "active"
	}
	return r.getOrCreate("/api/ipam/prefixes/", url.Values{"prefix": {cidr}, "vrf_id": {vrfFilter(o.VRF)}}, map[string]any{
		"prefix": cidr, "vrf": nullableID(o.VRF), "is_pool": o.IsPool, "mark_utilized": o.MarkUtilized, "status": status,
	})
}

func (r *realNetBox) AddPrefixWithGateway(cidr string, o netboxsim.PrefixOptions) int32 {
	id := r.AddPrefix(cidr, o)
	p := netip.MustParsePrefix(cidr).Masked()
	gw := netip.PrefixFrom(p.Addr().Next(), p.Bits())
	r.AddIPAddress(gw.String(), netboxsim.IPOptions{VRF: o.VRF, Status: "reserved", Description: "gateway"})
	return id
}

func (r *realNetBox) AddIPRange(start, end string, o netboxsim.RangeOptions) int32 {
	startAddr := netip.MustParsePrefix(start).Addr().String()
	endAddr := netip.MustParsePrefix(end).Addr().String()
	return r.getOrCreate("/api/ipam/ip-ranges/",
		url.Values{"start_address": {startAddr}, "end_address": {endAddr}, "vrf_id": {vrfFilter(o.VRF)}},
		map[string]any{"start_address": start, "end_address": end, "vrf": nullableID(o.VRF),
			"mark_populated": o.MarkPopulated, "mark_utilized": o.MarkUtilized})
}

func (r *realNetBox) AddIPAddress(addr string, o netboxsim.IPOptions) int32 {
	status := o.Status
	if status == "" {
		status = "active"
	}
	tags := []map[string]string{}
	for _, slug := range o.Tags {
		tags = append(tags, map[string]string{"slug": slug})
	}
	body := map[string]any{
		"address": addr, "vrf": nullableID(o.VRF), "status": status, "tags": tags,
		"description": o.Description, "dns_name": o.DNSName,
	}
	if o.Role != "" {
		body["role"] = o.Role
	}
	if o.CustomFields != nil {
		body["custom_fields"] = o.CustomFields
	}
	host := netip.MustParsePrefix(addr).Addr().String()
	return r.getOrCreate("/api/ipam/ip-addresses/", url.Values{"address": {host}, "vrf_id": {vrfFilter(o.VRF)}}, body)
}

type ipObject struct {
	ID      int32  `json:"id"`
	Address string `json:"address"`
	VRF     *struct {
		ID int32 `json:"id"`
	} `json:"vrf"`
	Tenant *struct {
		ID int32 `json:"id"`
	} `json:"tenant"`
	Status struct {
		Value string `json:"value"`
	} `json:"status"`
	Role *struct {
		Value string `json:"value"`
	} `json:"role"`
	DNSName     string `json:"dns_name"`
	Description string `json:"description"`
	Tags        []struct {
		Slug string `json:"slug"`
	} `json:"tags"`
	CustomFields map[string]any `json:"custom_fields"`
}

func (o ipObject) toSim() netboxsim.IPAddress {
	ip := netboxsim.IPAddress{ID: o.ID, Address: o.Address, Status: o.Status.Value, DNSName: o.DNSName,
		Description: o.Description, CustomFields: o.CustomFields, Tags: []string{}}
	if o.VRF != nil {
		ip.VRF = o.VRF.ID
	}
	if o.Tenant != nil {
		ip.Tenant = o.Tenant.ID
	}
	if o.Role != nil {
		ip.Role = o.Role.Value
	}
	for _, t := range o.Tags {
		ip.Tags = append(ip.Tags, t.Slug)
	}
	return ip
}

func (r *realNetBox) IPAddresses() []netboxsim.IPAddress {
	var out []netboxsim.IPAddress
	for offset := 0; ; offset += 1000 {
		var page struct {
			Next    *string    `json:"next"`
			Results []ipObject `json:"results"`
		}
		r.do(http.MethodGet, "/api/ipam/ip-addresses/", url.Values{
			"limit": {"1000"}, "offset": {strconv.Itoa(offset)}, "ordering": {"id"},
		}, nil, &page)
		for _, o := range page.Results {
			out = append(out, o.toSim())
		}
		if page.Next == nil {
			return out
		}
	}
}

// prefixObject is a prefix as the real NetBox answers it.
type prefixObject struct {
	ID     int32  `json:"id"`
	Prefix string `json:"prefix"`
	VRF    *struct {
		ID int32 `json:"id"`
	} `json:"vrf"`
	Tenant *struct {
		ID int32 `json:"id"`
	} `json:"tenant"`
	Status struct {
		Value string `json:"value"`
	} `json:"status"`
	Description string `json:"description"`
	Tags        []struct {
		Slug string `json:"slug"`
	} `json:"tags"`
	CustomFields map[string]any `json:"custom_fields"`
	Role         *struct {
		Slug string `json:"slug"`
	} `json:"role"`
	ScopeType *string `json:"scope_type"`
	Scope     *struct {
		Slug string `json:"slug"`
	} `json:"scope"`
}

func (r *realNetBox) PrefixesWithin(parent string) []netboxsim.Prefix {
	var out []netboxsim.Prefix
	for offset := 0; ; offset += 1000 {
		var page struct {
			Next    *string        `json:"next"`
			Results []prefixObject `json:"results"`
		}
		r.do(http.MethodGet, "/api/ipam/prefixes/", url.Values{
			"within": {parent}, "limit": {"1000"}, "offset": {strconv.Itoa(offset)}, "ordering": {"id"},
		}, nil, &page)
		for _, o := range page.Results {
			p := netboxsim.Prefix{ID: o.ID, Prefix: o.Prefix, Status: o.Status.Value, Description: o.Description,
				CustomFields: o.CustomFields, Tags: []string{}}
			if o.VRF != nil {
				p.VRF = o.VRF.ID
			}
			if o.Tenant != nil {
				p.Tenant = o.Tenant.ID
			}
			for _, t := range o.Tags {
				p.Tags = append(p.Tags, t.Slug)
			}
			if o.Role != nil {
				p.Role = o.Role.Slug
			}
			if o.ScopeType != nil && o.Scope != nil {
				p.ScopeType, p.Scope = *o.ScopeType, o.Scope.Slug
			}
			out = append(out, p)
		}
		if page.Next == nil {
			return out
		}
	}
}

func (r *realNetBox) SetPrefixCustomField(id int32, name string, value any) {
	r.do(http.MethodPatch, fmt.Sprintf("/api/ipam/prefixes/%d/", id), nil, map[string]any{"custom_fields": map[string]any{name: value}}, nil)
}

func (r *realNetBox) DeletePrefix(id int32) {
	r.do(http.MethodDelete, fmt.Sprintf("/api/ipam/prefixes/%d/", id), nil, nil, nil)
}

func (r *realNetBox) DeleteIPAddress(id int32) {
	r.do(http.MethodDelete, fmt.Sprintf("/api/ipam/ip-addresses/%d/", id), nil, nil, nil)
}

func (r *realNetBox) EditIPAddress(id int32, edit func(*netboxsim.IPAddress)) {
	var current ipObject
	r.do(http.MethodGet, fmt.Sprintf("/api/ipam/ip-addresses/%d/", id), nil, nil, &current)
	ip := current.toSim()
	edit(&ip)
	tags := []map[string]string{}
	for _, slug := range ip.Tags {
		tags = append(tags, map[string]string{"slug": slug})
	}
	var vrf any // the global table
	if ip.VRF != 0 {
		vrf = ip.VRF
	}
	r.do(http.MethodPatch, fmt.Sprintf("/api/ipam/ip-addresses/%d/", id), nil, map[string]any{
		"address": ip.Address, "vrf": vrf,
		"description": ip.Description, "dns_name": ip.DNSName, "status": ip.Status,
		"custom_fields": ip.CustomFields, "tags": tags,
	}, nil)
}

func (r *realNetBox) SetThrottle(l httpfault.ThrottleLimit) { r.throttle.Set(l) }
func (r *realNetBox) ThrottleArrivals() []httpfault.Arrival { return r.throttle.Arrivals() }
