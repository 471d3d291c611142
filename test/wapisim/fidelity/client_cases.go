package fidelity

import (
	"errors"
	"regexp"
	"testing"

	ibclient "github.com/infobloxopen/infoblox-go-client/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/wapisim"
)

// clientCase drives the simulator through the go client. run returns a
// digest of what the client got back; the runner compares it with want.
type clientCase struct {
	name string
	seed func(s *wapisim.Server)
	run  func(t *testing.T, e *env) any
	want any
}

// opaqueRef is a NIOS reference: "<type>/<opaque>:<name part>", the opaque
// part made of word characters (the go client parses some refs with \w+).
var opaqueRef = regexp.MustCompile(`^([a-z0-9_:]+)/(\w+):(.*)$`)

// ref replaces the opaque part of a reference with "*", so that digests
// compare the documented name part exactly. A malformed reference is kept
// as is and so fails the comparison.
func ref(r string) string {
	if m := opaqueRef.FindStringSubmatch(r); m != nil {
		return m[1] + "/*:" + m[3]
	}
	return "malformed: " + r
}

func str(p *string) any {
	if p == nil {
		return nil
	}
	return *p
}

func boolean(p *bool) any {
	if p == nil {
		return nil
	}
	return *p
}

func hostDigest(h *ibclient.HostRecord) map[string]any {
	if h == nil {
		return nil
	}
	v4 := []map[string]any{}
	for _, a := range h.Ipv4Addrs {
		v4 = append(v4, map[string]any{"_ref": ref(a.Ref), "ipv4addr": str(a.Ipv4Addr), "host": a.Host,
			"configure_for_dhcp": boolean(a.EnableDhcp), "mac": str(a.Mac)})
	}
	v6 := []map[string]any{}
	for _, a := range h.Ipv6Addrs {
		v6 = append(v6, map[string]any{"_ref": ref(a.Ref), "ipv6addr": str(a.Ipv6Addr), "host": a.Host,
			"configure_for_dhcp": boolean(a.EnableDhcp), "duid": str(a.Duid)})
	}
	return map[string]any{"_ref": ref(h.Ref), "name": str(h.Name), "view": str(h.View), "zone": h.Zone,
		"network_view": h.NetworkView, "comment": str(h.Comment), "extattrs": map[string]any(h.Ea),
		"configure_for_dns": boolean(h.EnableDns), "use_ttl": boolean(h.UseTtl), "aliases": h.Aliases,
		"ipv4addrs": v4, "ipv6addrs": v6}
}

func fixedDigest(f *ibclient.FixedAddress) map[string]any {
	if f == nil {
		return nil
	}
	return map[string]any{"_ref": ref(f.Ref), "ipv4addr": f.IPv4Address, "network": f.Cidr,
		"network_view": f.NetviewName, "mac": str(f.Mac), "match_client": str(f.MatchClient), "name": str(f.Name),
		"comment": f.Comment, "extattrs": map[string]any(f.Ea)}
}

func fixedAddrs(l []ibclient.FixedAddress) []string {
	out := []string{}
	for _, f := range l {
		out = append(out, f.IPv4Address)
	}
	return out
}

// errDigest names the client's error type, so that a case can expect
// "not found" exactly.
func errDigest(err error) string {
	var nf *ibclient.NotFoundError
	switch {
	case err == nil:
		return "no error"
	case errors.As(err, &nf):
		return "NotFoundError"
	default:
		return "error: " + err.Error()
	}
}

func seedNetwork(s *wapisim.Server) {
	s.AddEADefinition("Tenant", "STRING")
	s.AddEADefinition("Site", "STRING")
	s.AddNetwork("default", "10.1.0.0/24", map[string]string{"Site": "lab"})
}

func createHost(e *env, dns, dhcp bool, name, dnsView, cidr, ip, mac string) (*ibclient.HostRecord, error) {
	return e.om.CreateHostRecord(dns, dhcp, name, "default", dnsView, cidr, "", ip, "", mac, "",
		false, 0, "claim", ibclient.EA{"Tenant": "a"}, nil, false)
}

// host is the digest of a host record created by createHost.
func host(refName, name, view, zone string, dns bool, addrs ...map[string]any) map[string]any {
	return map[string]any{"_ref": "record:host/*:" + refName, "name": name, "view": view, "zone": zone,
		"network_view": "default", "comment": "claim", "extattrs": map[string]any{"Tenant": "a"},
		"configure_for_dns": dns, "use_ttl": false, "aliases": []string{}, "ipv4addrs": addrs,
		"ipv6addrs": []map[string]any{}}
}

func hostAddr(ip, host, view string, dhcp bool, mac any) map[string]any {
	return map[string]any{"_ref": "record:host_ipv4addr/*:" + ip + "/" + host + "/" + view, "ipv4addr": ip,
		"host": host, "configure_for_dhcp": dhcp, "mac": mac}
}

func fixed(ip, network, name string) map[string]any {
	return map[string]any{"_ref": "fixedaddress/*:" + ip + "/default", "ipv4addr": ip, "network": network,
		"network_view": "default", "mac": "00:00:00:00:00:00", "match_client": "RESERVED", "name": name,
		"comment": "claim", "extattrs": map[string]any{"Tenant": "a"}}
}

func allocFixed(e *env, cidr, ip, name string) (*ibclient.FixedAddress, error) {
	return e.om.AllocateIP("default", cidr, ip, false, "", name, "claim", ibclient.EA{"Tenant": "a"},
		"RESERVED", "", "", nil, "", false, nil, false)
}

// pagedFixed is the body of a paged search (_paging=1, _return_as_object=1).
type pagedFixed struct {
	Result     []ibclient.FixedAddress `json:"result"`
	NextPageID string                  `json:"next_page_id"`
}

var clientCases = []clientCase{
	{
		name: "host record without DNS, next available IP in a network",
		seed: seedNetwork,
		run: func(t *testing.T, e *env) any {
			h, err := createHost(e, false, false, "vm1.example.com", "", "10.1.0.0/24", "", "")
			require.NoError(t, err)
			return hostDigest(h)
		},
		// The client decodes the answer into the object it sent, so the
		// address keeps the empty MAC it was created with.
		want: host("vm1.example.com/%20", "vm1.example.com", " ", "", false,
			hostAddr("10.1.0.1", "vm1.example.com", "%20", false, "")),
	},
	{
		name: "GetHostRecord finds a host record without DNS by name",
		seed: func(s *wapisim.Server) {
			seedNetwork(s)
			s.AddHostRecord(wapisim.HostRecord{Name: "vm1.example.com", Addresses: []string{"10.1.0.7"},
				EAs: map[string]string{"Tenant": "a"}, Comment: "claim"})
		},
		run: func(t *testing.T, e *env) any {
			h, err := e.om.GetHostRecord("default", "", "vm1.example.com", "10.1.0.7", "")
			require.NoError(t, err)
			return hostDigest(h)
		},
		want: host("vm1.example.com/%20", "vm1.example.com", " ", "", false,
			hostAddr("10.1.0.7", "vm1.example.com", "%20", false, nil)),
	},
	{
		// A caller passing _return_fields among the search fields makes the
		// client send the parameter repeated (issue 14): every field counts.
		name: "host record search with _return_fields among the search fields",
		seed: func(s *wapisim.Server) {
			seedNetwork(s)
			s.AddHostRecord(wapisim.HostRecord{Name: "vm1.example.com", Addresses: []string{"10.1.0.7"},
				EAs: map[string]string{"Tenant": "a"}, Comment: "claim"})
		},
		run: func(t *testing.T, e *env) any {
			var res []ibclient.HostRecord
			err := e.conn.GetObject(ibclient.NewEmptyHostRecord(), "", ibclient.NewQueryParams(false,
				map[string]string{"name": "vm1.example.com", "_return_fields": "ipv4addrs,name"}), &res)
			require.NoError(t, err)
			require.Len(t, res, 1)
			return hostDigest(&res[0])
		},
		want: host("vm1.example.com/%20", "vm1.example.com", " ", "", false,
			hostAddr("10.1.0.7", "vm1.example.com", "%20", false, nil)),
	},
	{
		name: "host record with DNS in an authoritative zone",
		seed: func(s *wapisim.Server) {
			seedNetwork(s)
			s.AddZone("default", "example.com")
		},
		run: func(t *testing.T, e *env) any {
			h, err := createHost(e, true, false, "vm2.example.com", "default", "10.1.0.0/24", "", "")
			require.NoError(t, err)
			return hostDigest(h)
		},
		want: host("vm2.example.com/default", "vm2.example.com", "default", "example.com", true,
			hostAddr("10.1.0.1", "vm2.example.com", "default", false, "")),
	},
	{
		name: "host record with DHCP and a MAC address",
		seed: seedNetwork,
		run: func(t *testing.T, e *env) any {
			h, err := createHost(e, false, true, "vm3.example.com", "", "10.1.0.0/24", "", "aa:bb:cc:dd:ee:ff")
			require.NoError(t, err)
			return hostDigest(h)
		},
		want: host("vm3.example.com/%20", "vm3.example.com", " ", "", false,
			hostAddr("10.1.0.1", "vm3.example.com", "%20", true, "aa:bb:cc:dd:ee:ff")),
	},
	{
		name: "host record, next available IP in a range",
		seed: func(s *wapisim.Server) {
			seedNetwork(s)
			s.AddRange("default", "10.1.0.10", "10.1.0.20")
		},
		run: func(t *testing.T, e *env) any {
			h, err := createHost(e, false, false, "vm4.example.com", "", "", "func:nextavailableip:"+e.ref(t, "range"), "")
			require.NoError(t, err)
			return hostDigest(h)
		},
		want: host("vm4.example.com/%20", "vm4.example.com", " ", "", false,
			hostAddr("10.1.0.10", "vm4.example.com", "%20", false, "")),
	},
	{
		name: "host record deleted, then read by reference",
		seed: func(s *wapisim.Server) {
			seedNetwork(s)
			s.AddHostRecord(wapisim.HostRecord{Name: "vm1.example.com", Addresses: []string{"10.1.0.7"}})
		},
		run: func(t *testing.T, e *env) any {
			r := e.ref(t, "record:host")
			deleted, err := e.om.DeleteHostRecord(r)
			require.NoError(t, err)
			_, err = e.om.GetHostRecordByRef(r)
			return []any{deleted == r, errDigest(err), len(e.s.Objects("record:host"))}
		},
		want: []any{true, "NotFoundError", 0},
	},
	{
		name: "fixed address, next available IP in a network",
		seed: func(s *wapisim.Server) {
			seedNetwork(s)
			s.AddFixedAddress("default", "10.1.0.1", nil)
		},
		run: func(t *testing.T, e *env) any {
			f, err := allocFixed(e, "10.1.0.0/24", "", "fa1")
			require.NoError(t, err)
			return fixedDigest(f)
		},
		want: fixed("10.1.0.2", "10.1.0.0/24", "fa1"),
	},
	{
		name: "fixed address, next available IP in a range",
		seed: func(s *wapisim.Server) {
			seedNetwork(s)
			s.AddRange("default", "10.1.0.10", "10.1.0.20")
			s.AddFixedAddress("default", "10.1.0.10", nil)
		},
		run: func(t *testing.T, e *env) any {
			f, err := allocFixed(e, "", "func:nextavailableip:"+e.ref(t, "range"), "fa2")
			require.NoError(t, err)
			return fixedDigest(f)
		},
		want: fixed("10.1.0.11", "10.1.0.0/24", "fa2"),
	},
	{
		// NIOS refuses a second fixed address with the same MAC in one
		// network (ansible/ansible#58708), whatever match_client says.
		name: "fixed address with a MAC, and the same MAC again in the network",
		seed: seedNetwork,
		run: func(t *testing.T, e *env) any {
			alloc := func(mac string) (*ibclient.FixedAddress, error) {
				return e.om.AllocateIP("default", "10.1.0.0/24", "", false, mac, "fa", "claim", ibclient.EA{"Tenant": "a"},
					"MAC_ADDRESS", "", "", nil, "", false, nil, false)
			}
			f, err := alloc("AA:BB:CC:DD:EE:01")
			require.NoError(t, err)
			_, err = alloc("aa:bb:cc:dd:ee:01")
			require.Error(t, err)
			return []any{f.IPv4Address, str(f.Mac), str(f.MatchClient), len(e.s.Objects("fixedaddress")),
				regexp.MustCompile(`MAC address aa:bb:cc:dd:ee:01 is used in two fixed addresses 10\.1\.0\.1 and 10\.1\.0\.2, which are in the same network 10\.1\.0\.0/24\.`).MatchString(err.Error())}
		},
		want: []any{"10.1.0.1", "aa:bb:cc:dd:ee:01", "MAC_ADDRESS", 1, true},
	},
	{
		name: "GetFixedAddress by network and address",
		seed: func(s *wapisim.Server) {
			seedNetwork(s)
			s.AddFixedAddress("default", "10.1.0.5", nil)
			s.AddFixedAddress("default", "10.1.0.6", nil)
		},
		run: func(t *testing.T, e *env) any {
			f, err := e.om.GetFixedAddress("default", "10.1.0.0/24", "10.1.0.6", false, "")
			require.NoError(t, err)
			require.NotNil(t, f)
			// GetFixedAddress asks for the client's default return fields.
			return []any{ref(f.Ref), f.IPv4Address, f.Cidr, f.NetviewName, str(f.Mac), str(f.MatchClient)}
		},
		want: []any{"fixedaddress/*:10.1.0.6/default", "10.1.0.6", "10.1.0.0/24", "default", "00:00:00:00:00:00", "RESERVED"},
	},
	{
		name: "extensible-attribute searches: exact, repeated values, regular expression, none",
		seed: func(s *wapisim.Server) {
			seedNetwork(s)
			s.AddFixedAddress("default", "10.1.0.5", map[string]string{"Tenant": "alpha"})
			s.AddFixedAddress("default", "10.1.0.6", map[string]string{"Tenant": "beta"})
			s.AddFixedAddress("default", "10.1.0.7", map[string]string{"Tenant": "gamma"})
		},
		run: func(t *testing.T, e *env) any {
			var out []any
			for _, sf := range []map[string]string{
				{"*Tenant": "beta"},
				{"*Tenant": "alpha,gamma"}, // sent as *Tenant=alpha&*Tenant=gamma
				{"*Tenant~": "^(al|be)"},
				{"*Tenant:": "GAMMA"},
				{"*Tenant!": "beta"},
			} {
				l, err := e.om.GetAllFixedAddress(ibclient.NewQueryParams(false, sf), false)
				require.NoError(t, err)
				out = append(out, fixedAddrs(l))
			}
			_, err := e.om.GetAllFixedAddress(ibclient.NewQueryParams(false, map[string]string{"*Tenant": "delta"}), false)
			return append(out, errDigest(err))
		},
		want: []any{
			[]string{"10.1.0.6"},
			[]string{"10.1.0.5", "10.1.0.7"},
			[]string{"10.1.0.5", "10.1.0.6"},
			[]string{"10.1.0.7"},
			[]string{"10.1.0.5", "10.1.0.7"},
			"error: failed getting fixed address: not found",
		},
	},
	{
		name: "networks by CIDR and by extensible attribute",
		seed: seedNetwork,
		run: func(t *testing.T, e *env) any {
			byEA, err := e.om.GetNetwork("default", "10.1.0.0/24", false, ibclient.EA{"Site": "lab"})
			require.NoError(t, err)
			byCIDR, err := e.om.GetNetwork("default", "10.1.0.0/24", false, nil)
			require.NoError(t, err)
			// GetNetwork does not send its EA argument; search by EA directly.
			var res []ibclient.Network
			errEA := e.conn.GetObject(ibclient.NewNetwork("", "", false, "", nil), "",
				ibclient.NewQueryParams(false, map[string]string{"*Site": "other"}), &res)
			_, errCIDR := e.om.GetNetwork("default", "10.9.0.0/24", false, nil)
			return []any{ref(byEA.Ref), byEA.Cidr, map[string]any(byEA.Ea), ref(byCIDR.Ref), errDigest(errEA), errDigest(errCIDR)}
		},
		want: []any{"network/*:10.1.0.0/24/default", "10.1.0.0/24", map[string]any{"Site": "lab"},
			"network/*:10.1.0.0/24/default", "NotFoundError", "NotFoundError"},
	},
	{
		name: "network view and extensible-attribute definition",
		seed: seedNetwork,
		run: func(t *testing.T, e *env) any {
			nv, err := e.om.GetNetworkView("default")
			require.NoError(t, err)
			def, err := e.om.GetEADefinition("Tenant")
			require.NoError(t, err)
			return []any{ref(nv.Ref), str(nv.Name), ref(def.Ref), str(def.Name), def.Type}
		},
		want: []any{"networkview/*:default/true", "default", "extensibleattributedef/*:Tenant", "Tenant", "STRING"},
	},
	{
		name: "paging through fixed addresses with _paging, _max_results and _page_id",
		seed: func(s *wapisim.Server) {
			seedNetwork(s)
			for _, ip := range []string{"10.1.0.5", "10.1.0.6", "10.1.0.7"} {
				s.AddFixedAddress("default", ip, nil)
			}
		},
		run: func(t *testing.T, e *env) any {
			var first, second pagedFixed
			sf := map[string]string{"_paging": "1", "_max_results": "2", "_return_as_object": "1"}
			require.NoError(t, e.conn.GetObject(ibclient.NewEmptyFixedAddress(false), "", ibclient.NewQueryParams(false, sf), &first))
			require.NotEmpty(t, first.NextPageID)
			sf["_page_id"] = first.NextPageID
			require.NoError(t, e.conn.GetObject(ibclient.NewEmptyFixedAddress(false), "", ibclient.NewQueryParams(false, sf), &second))
			var again pagedFixed
			err := e.conn.GetObject(ibclient.NewEmptyFixedAddress(false), "", ibclient.NewQueryParams(false, sf), &again)
			return []any{fixedAddrs(first.Result), fixedAddrs(second.Result), second.NextPageID, err != nil}
		},
		// A page id is good for one request: the last page has no next
		// page, and asking for a used page id again fails.
		want: []any{[]string{"10.1.0.5", "10.1.0.6"}, []string{"10.1.0.7"}, "", true},
	},
	{
		// CreateMultiObject sends a MultiRequest: a JSON list of operations
		// to the request object, run in one transaction.
		name: "CreateMultiObject allocates distinct addresses and displays the state",
		seed: seedNetwork,
		run: func(t *testing.T, e *env) any {
			next := func(tenant string) *ibclient.RequestBody {
				return &ibclient.RequestBody{Method: "POST", Object: "fixedaddress",
					Data: map[string]any{"ipv4addr": "func:nextavailableip:10.1.0.0/24", "match_client": "RESERVED",
						"extattrs": map[string]any{"Tenant": map[string]any{"value": tenant}}},
					Args: map[string]string{"_return_fields": "ipv4addr"}}
			}
			res, err := e.om.(*ibclient.ObjectManager).CreateMultiObject(ibclient.NewMultiRequest([]*ibclient.RequestBody{
				next("a"), next("b"),
				{Method: "GET", Object: "network", Data: map[string]any{"*Site": "lab"},
					AssignState: map[string]string{"net": "network"}, Discard: true},
				{Method: "STATE:DISPLAY"},
			}))
			require.NoError(t, err)
			for _, r := range res {
				if v, ok := r["_ref"].(string); ok {
					r["_ref"] = ref(v)
				}
			}
			return res
		},
		want: []map[string]any{
			{"_ref": "fixedaddress/*:10.1.0.1/default", "ipv4addr": "10.1.0.1"},
			{"_ref": "fixedaddress/*:10.1.0.2/default", "ipv4addr": "10.1.0.2"},
			{"net": "10.1.0.0/24"},
		},
	},
	{
		// One failing operation rolls back the others; the client gets the
		// failing operation's error.
		name: "CreateMultiObject is all or nothing",
		seed: func(s *wapisim.Server) {
			seedNetwork(s)
			s.AddNetwork("default", "10.2.0.0/30", nil)
			s.AddFixedAddress("default", "10.2.0.1", nil)
			s.AddFixedAddress("default", "10.2.0.2", nil)
		},
		run: func(t *testing.T, e *env) any {
			body := func(network string) *ibclient.RequestBody {
				return &ibclient.RequestBody{Method: "POST", Object: "fixedaddress",
					Data: map[string]any{"ipv4addr": "func:nextavailableip:" + network, "match_client": "RESERVED"}}
			}
			_, err := e.om.(*ibclient.ObjectManager).CreateMultiObject(ibclient.NewMultiRequest([]*ibclient.RequestBody{
				body("10.1.0.0/24"), body("10.2.0.0/30"),
			}))
			require.Error(t, err)
			return []any{len(e.s.Objects("fixedaddress")), regexp.MustCompile(`Cannot find 1 available IP address\(es\)`).MatchString(err.Error())}
		},
		want: []any{2, true},
	},
}

func runClientCases(t *testing.T) {
	for _, tc := range append(clientCases, networkCases...) {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			if tc.seed != nil {
				tc.seed(e.s)
			}
			got := tc.run(t, e)
			assert.Equal(t, tc.want, got)
		})
	}
}
