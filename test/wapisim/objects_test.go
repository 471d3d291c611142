package wapisim

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"testing"

	ibclient "github.com/infobloxopen/infoblox-go-client/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestFixedAddressLifecycleWithGoClient(t *testing.T) {
	s := newSim(t)
	s.AddNetwork("default", "10.10.0.0/24", nil)
	s.AddEADefinition("CAPI-Claim", "STRING")
	conn, om := objectManager(t, s, writerUser)

	fa, err := om.AllocateIP("default", "10.10.0.0/24", "", false, "", "vm1.example.com", "claimed",
		ibclient.EA{"CAPI-Claim": "ns/name"}, "RESERVED", "", "", nil, "", false, nil, false)
	require.NoError(t, err)
	assert.Equal(t, "10.10.0.1", fa.IPv4Address)
	assert.Equal(t, "default", fa.NetviewName)
	assert.Equal(t, "10.10.0.0/24", fa.Cidr)
	assert.Equal(t, "RESERVED", *fa.MatchClient)
	assert.Equal(t, "00:00:00:00:00:00", *fa.Mac)
	assert.Equal(t, "vm1.example.com", *fa.Name)
	assert.Equal(t, "claimed", fa.Comment)
	assert.Equal(t, ibclient.EA{"CAPI-Claim": "ns/name"}, fa.Ea)
	assert.Regexp(t, `^fixedaddress/\w+:10\.10\.0\.1/default$`, fa.Ref)
	require.Len(t, fa.Options, 1, "NIOS reports the inherited lease-time option")

	t.Run("EA search with the client's query params", func(t *testing.T) {
		var res []ibclient.FixedAddress
		err := conn.GetObject(ibclient.NewEmptyFixedAddress(false), "",
			ibclient.NewQueryParams(false, map[string]string{"*CAPI-Claim": "ns/name"}), &res)
		require.NoError(t, err)
		require.Len(t, res, 1)
		assert.Equal(t, fa.Ref, res[0].Ref)

		err = conn.GetObject(ibclient.NewEmptyFixedAddress(false), "",
			ibclient.NewQueryParams(false, map[string]string{"*CAPI-Claim": "ns/other"}), &res)
		var nf *ibclient.NotFoundError
		require.ErrorAs(t, err, &nf, "an empty result is the client's NotFoundError")
	})

	t.Run("network", func(t *testing.T) {
		n, err := om.GetNetwork("default", "10.10.0.0/24", false, nil)
		require.NoError(t, err)
		assert.Equal(t, "10.10.0.0/24", n.Cidr)
		assert.Regexp(t, `^network/\w+:10\.10\.0\.0/24/default$`, n.Ref)
		_, err = ibclient.BuildNetworkFromRef(n.Ref)
		require.NoError(t, err, "the client can parse our network refs")

		_, err = om.GetNetwork("default", "10.99.0.0/24", false, nil)
		var nf *ibclient.NotFoundError
		require.ErrorAs(t, err, &nf)
	})

	t.Run("update EAs then delete", func(t *testing.T) {
		_, err := conn.UpdateObject(&ibclient.FixedAddress{Ea: ibclient.EA{}, Comment: "released"}, fa.Ref)
		require.NoError(t, err)
		o, _ := s.Object(fa.Ref)
		assert.Empty(t, o.EAs)
		assert.Equal(t, "released", o.Comment)

		ref, err := om.DeleteFixedAddress(fa.Ref)
		require.NoError(t, err)
		assert.Equal(t, fa.Ref, ref)
		assert.Empty(t, s.Objects("fixedaddress"))

		_, err = om.GetFixedAddressByRef(fa.Ref)
		var nf *ibclient.NotFoundError
		require.ErrorAs(t, err, &nf, "NIOS answers 404 for a deleted ref")
	})
}

func TestCreateErrors(t *testing.T) {
	s := newSim(t)
	s.AddNetwork("default", "10.11.0.0/24", nil)
	s.AddFixedAddress("default", "10.11.0.5", nil)
	s.AddEADefinition("Count", "INTEGER")
	tests := []struct {
		name, objtype string
		body          any
		status        int
		class, code   string
		text          string
	}{
		{"undefined EA", "fixedaddress", map[string]any{"ipv4addr": "10.11.0.6", "match_client": "RESERVED",
			"extattrs": map[string]any{"Nope": map[string]any{"value": "x"}}},
			400, "AdmConProtoError", codeProto, "Unknown extensible attribute: Nope"},
		{"address in use", "fixedaddress", map[string]any{"ipv4addr": "10.11.0.5", "mac": "aa:bb:cc:dd:ee:ff"},
			400, "AdmConDataError: None (IBDataConflictError", codeDataConflict,
			"The IP address 10.11.0.5 is already in use by a fixed address in network view default."},
		{"outside every network", "fixedaddress", map[string]any{"ipv4addr": "10.99.0.5", "match_client": "RESERVED"},
			400, "AdmConDataError: None (IBDataConflictError", codeDataConflict,
			"The action is not allowed. A parent was not found."},
		{"unknown field", "fixedaddress", map[string]any{"ipv4addr": "10.11.0.7", "colour": "red"},
			400, "AdmConProtoError", codeProto, "Unknown argument/field: 'colour'"},
		{"duplicate network", "network", map[string]any{"network": "10.11.0.0/24"},
			400, "AdmConDataError: None (IBDataConflictError", codeDataConflict,
			"The network 10.11.0.0/24 already exists.  Select another network."},
		{"unknown DNS view", "record:host", map[string]any{"name": "a.example.com", "view": "internal",
			"ipv4addrs": []any{map[string]any{"ipv4addr": "10.11.0.9"}}},
			404, "AdmConDataNotFoundError", codeDataNotFound, "View internal not found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, body, resp := client(t, s, adminUser).do(http.MethodPost, tt.objtype, tt.body)
			require.Equal(t, tt.status, status, body)
			assert.Equal(t, "application/json", resp.Header.Get("Content-Type"))
			e := wapiErr(t, body)
			assert.Equal(t, tt.code, e["code"])
			assert.Equal(t, tt.text, e["text"])
			if tt.code == codeDataConflict {
				assert.Equal(t, tt.class+": IB.Data.Conflict:"+tt.text+")", e["Error"])
			} else {
				assert.Equal(t, tt.class+": "+tt.text, e["Error"])
			}
		})
	}
	assert.Len(t, s.Objects("fixedaddress"), 1, "failed creates store nothing")
}

func TestSearchAndReturnFields(t *testing.T) {
	s := newSim(t)
	s.AddEADefinition("CAPI-Claim", "STRING")
	s.AddNetwork("default", "10.12.0.0/24", map[string]string{"Site": "x"})
	a := s.AddFixedAddress("default", "10.12.0.5", map[string]string{"CAPI-Claim": "ns/a"})
	s.AddFixedAddress("default", "10.12.0.6", map[string]string{"CAPI-Claim": "ns/b"})
	c := client(t, s, readerUser)

	t.Run("basic fields", func(t *testing.T) {
		l := c.getList("fixedaddress?ipv4addr=10.12.0.5")
		require.Len(t, l, 1)
		assert.Equal(t, map[string]any{"_ref": a, "ipv4addr": "10.12.0.5", "network_view": "default"}, l[0])
	})
	t.Run("_return_fields and _return_fields+", func(t *testing.T) {
		l := c.getList("fixedaddress?ipv4addr=10.12.0.5&_return_fields=extattrs,mac")
		assert.Equal(t, map[string]any{"_ref": a, "mac": "00:00:00:00:00:00",
			"extattrs": map[string]any{"CAPI-Claim": map[string]any{"value": "ns/a"}}}, l[0])
		l = c.getList("fixedaddress?ipv4addr=10.12.0.5&_return_fields%2B=comment,match_client")
		assert.Equal(t, map[string]any{"_ref": a, "ipv4addr": "10.12.0.5", "network_view": "default",
			"match_client": "RESERVED"}, l[0], "unset comment is left out")
	})
	t.Run("EA search is exact", func(t *testing.T) {
		assert.Len(t, c.getList("fixedaddress?*CAPI-Claim=ns/a"), 1)
		assert.Len(t, c.getList("fixedaddress?*CAPI-Claim=ns/A"), 0)
		assert.Len(t, c.getList("fixedaddress?*CAPI-Claim:=NS/A"), 1, "':=' is case-insensitive")
		assert.Len(t, c.getList("fixedaddress?*CAPI-Claim~=^ns/"), 2)
		assert.Equal(t, "[]", func() string { _, b, _ := c.do(http.MethodGet, "fixedaddress?*CAPI-Claim=none", nil); return b }())
	})
	errCases := []struct{ query, text string }{
		{"fixedaddress?*Undefined=x", "Unknown extensible attribute: Undefined"},
		{"fixedaddress?colour=red", "Unknown argument/field: 'colour'"},
		{"fixedaddress?_return_fields=colour", "Unknown argument/field: 'colour'"},
		{"fixedaddress?extattrs=x", "Field is not searchable: extattrs"},
		{"record:host?configure_for_dns=true", "Field is not searchable: configure_for_dns"},
	}
	for _, ec := range errCases {
		t.Run(ec.query, func(t *testing.T) {
			status, body, resp := c.do(http.MethodGet, ec.query, nil)
			requireWAPIError(t, status, body, resp, 400, "AdmConProtoError", codeProto, ec.text)
		})
	}
	t.Run("GET by ref", func(t *testing.T) {
		status, body, _ := c.do(http.MethodGet, a+"?_return_fields=name,ipv4addr", nil)
		require.Equal(t, http.StatusOK, status)
		assert.JSONEq(t, fmt.Sprintf(`{"_ref": %q, "ipv4addr": "10.12.0.5"}`, a), body)
		status, body, resp := c.do(http.MethodGet, "fixedaddress/ZG5zLmZpeGVkX2FkZHJlc3MkMTAuMC4wLjUuMC4u:10.0.0.5/default", nil)
		requireWAPIError(t, status, body, resp, 404, "AdmConDataNotFoundError", codeDataNotFound,
			"Reference fixedaddress/ZG5zLmZpeGVkX2FkZHJlc3MkMTAuMC4wLjUuMC4u:10.0.0.5/default not found")
	})
	t.Run("modifiers on addresses", func(t *testing.T) {
		l := c.getList("fixedaddress?" + url.Values{"ipv4addr>": {"10.12.0.6"}}.Encode())
		require.Len(t, l, 1)
		assert.Equal(t, "10.12.0.6", l[0]["ipv4addr"])
	})
}

func TestMaxResultsAndPaging(t *testing.T) {
	s := newSim(t)
	s.AddNetwork("default", "10.13.0.0/20", nil)
	for i := range 1001 {
		s.AddFixedAddress("default", fmt.Sprintf("10.13.%d.%d", 1+i/250, 1+i%250), nil)
	}
	c := client(t, s, readerUser)

	status, body, resp := c.do(http.MethodGet, "fixedaddress", nil)
	requireWAPIError(t, status, body, resp, 400, "AdmConProtoError", codeProto, "Result set too large (> 1000)")
	status, body, resp = c.do(http.MethodGet, "fixedaddress?_max_results=-10", nil)
	requireWAPIError(t, status, body, resp, 400, "AdmConProtoError", codeProto, "Result set too large (> 10)")
	assert.Len(t, c.getList("fixedaddress?_max_results=10"), 10, "a positive limit truncates")
	assert.Len(t, c.getList("fixedaddress?_max_results=-2000"), 1001)

	var all []any
	path := "fixedaddress?_paging=1&_return_as_object=1&_max_results=400"
	for pages := 0; ; pages++ {
		require.Less(t, pages, 5)
		status, body, _ := c.do(http.MethodGet, path, nil)
		require.Equal(t, http.StatusOK, status, body)
		var page struct {
			Result     []any  `json:"result"`
			NextPageID string `json:"next_page_id"`
		}
		require.NoError(t, json.Unmarshal([]byte(body), &page))
		all = append(all, page.Result...)
		if page.NextPageID == "" {
			break
		}
		path = "fixedaddress?_page_id=" + page.NextPageID
	}
	assert.Len(t, all, 1001)
}

func TestAddressObjects(t *testing.T) {
	s := newSim(t)
	s.AddNetwork("default", "10.14.0.0/28", nil)
	s.AddRange("default", "10.14.0.8", "10.14.0.10")
	fa := s.AddFixedAddress("default", "10.14.0.2", nil)
	s.AddHostRecord(HostRecord{Name: "h", Addresses: []string{"10.14.0.9"}})
	c := client(t, s, readerUser)

	used := c.getList("ipv4address?network=10.14.0.0/28&status=USED")
	var ips []string
	for _, u := range used {
		ips = append(ips, u["ip_address"].(string))
	}
	assert.Equal(t, []string{"10.14.0.0", "10.14.0.2", "10.14.0.9", "10.14.0.15"}, ips)
	assert.Equal(t, []any{fa}, used[1]["objects"])
	assert.Equal(t, []any{"RESERVATION"}, used[1]["types"])
	assert.Equal(t, []any{"HOST"}, used[2]["types"])
	assert.Equal(t, []any{"NETWORK"}, used[0]["types"])

	inRange := c.getList("ipv4address?network=10.14.0.0/28&" +
		url.Values{"ip_address>": {"10.14.0.8"}, "ip_address<": {"10.14.0.10"}}.Encode())
	require.Len(t, inRange, 3)
	assert.Equal(t, "UNUSED", inRange[0]["status"])
	assert.Equal(t, "USED", inRange[1]["status"])

	all := c.getList("ipv4address?network=10.14.0.0/28")
	assert.Len(t, all, 16)

	status, body, _ := c.do(http.MethodGet, used[1]["_ref"].(string), nil)
	require.Equal(t, http.StatusOK, status, body)
	assert.Contains(t, body, `"ip_address": "10.14.0.2"`)
}

func TestDeleteAndUnknownRef(t *testing.T) {
	s := newSim(t)
	s.AddNetwork("default", "10.15.0.0/24", nil)
	ref := s.AddFixedAddress("default", "10.15.0.7", nil)
	c := client(t, s, writerUser)

	status, body, resp := c.do(http.MethodDelete, ref, nil)
	require.Equal(t, http.StatusOK, status)
	assert.Equal(t, "application/json", resp.Header.Get("Content-Type"))
	assert.Equal(t, `"`+ref+`"`, body)

	status, body, resp = c.do(http.MethodDelete, ref, nil)
	requireWAPIError(t, status, body, resp, 404, "AdmConDataNotFoundError", codeDataNotFound,
		"Reference "+ref+" not found")

	// NIOS makes a fixed address's reference of its address and network
	// view: made again there, it has the same one.
	ref2 := s.AddFixedAddress("default", "10.15.0.7", nil)
	assert.Equal(t, ref, ref2, "a fixed address made again at the same address has the same reference")
}

func TestRefsAndObjectTypes(t *testing.T) {
	s := newSim(t)
	c := client(t, s, adminUser)
	nv := c.post("networkview", map[string]any{"name": "lab"})
	assert.Regexp(t, `^networkview/\w+:lab/false$`, nv)
	assert.Equal(t, "lab", *ibclient.BuildNetworkViewFromRef(nv).Name)
	n := c.post("network", map[string]any{"network": "10.16.0.0/24", "network_view": "lab"})
	assert.Regexp(t, `^network/\w+:10\.16\.0\.0/24/lab$`, n)
	r := c.post("range", map[string]any{"start_addr": "10.16.0.10", "end_addr": "10.16.0.20", "network_view": "lab"})
	assert.Regexp(t, `^range/\w+:10\.16\.0\.10/10\.16\.0\.20/lab$`, r)
	ea := c.post("extensibleattributedef", map[string]any{"name": "CAPI-Claim", "type": "STRING", "comment": "claims"})
	assert.Regexp(t, `^extensibleattributedef/\w+:CAPI-Claim$`, ea)
	z := c.post("zone_auth", map[string]any{"fqdn": "example.com"})
	assert.Regexp(t, `^zone_auth/\w+:example\.com/default$`, z)
	n6 := c.post("ipv6network", map[string]any{"network": "2001:db8:16::/64"})
	assert.Regexp(t, `^ipv6network/\w+:2001%3Adb8%3A16%3A%3A/64/default$`, n6)

	l := c.getList("extensibleattributedef?name=CAPI-Claim")
	assert.Equal(t, []map[string]any{{"_ref": ea, "name": "CAPI-Claim", "type": "STRING", "comment": "claims"}}, l)
	assert.Equal(t, []map[string]any{{"_ref": nv, "name": "lab", "is_default": false}},
		c.getList("networkview?name=lab"))
	assert.Len(t, c.getList("range?network_view=lab"), 1)
	assert.Len(t, c.getList("zone_auth?fqdn=example.com&view=default"), 1)

	status, body, _ := c.do(http.MethodGet, n6, nil)
	require.Equal(t, http.StatusOK, status, body)
	assert.Contains(t, body, `"network": "2001:db8:16::/64"`)
}

// TestFixedAddressMAC: NIOS checks a fixed address's MAC and refuses a MAC
// another fixed address of the same network carries, on create and update;
// reservations (the zero MAC) and other networks are not concerned.
func TestFixedAddressMAC(t *testing.T) {
	s := newSim(t)
	s.AddNetwork("default", "10.13.0.0/24", nil)
	s.AddNetwork("default", "10.14.0.0/24", nil)
	c := client(t, s, adminUser)
	create := func(body map[string]any) (int, string) {
		status, resp, _ := c.do(http.MethodPost, "fixedaddress", body)
		return status, resp
	}
	status, body := create(map[string]any{"ipv4addr": "10.13.0.5", "mac": "AA-BB-CC-DD-EE-01"})
	require.Equal(t, http.StatusCreated, status, body)
	l := c.getList("fixedaddress?ipv4addr=10.13.0.5&_return_fields=mac,match_client")
	require.Len(t, l, 1)
	assert.Equal(t, "aa:bb:cc:dd:ee:01", l[0]["mac"], "NIOS stores the MAC in lower case with colons")
	assert.Equal(t, "MAC_ADDRESS", l[0]["match_client"])

	tests := []struct {
		name   string
		body   map[string]any
		status int
		text   string
	}{
		{"same MAC, same network", map[string]any{"ipv4addr": "10.13.0.6", "mac": "aa:bb:cc:dd:ee:01"}, 400,
			"MAC address aa:bb:cc:dd:ee:01 is used in two fixed addresses 10.13.0.5 and 10.13.0.6, which are in the same network 10.13.0.0/24."},
		{"malformed MAC", map[string]any{"ipv4addr": "10.13.0.7", "mac": "aa:bb:cc:dd:ee"}, 400,
			"Invalid value for mac: aa:bb:cc:dd:ee"},
		{"same MAC, other network", map[string]any{"ipv4addr": "10.14.0.5", "mac": "aa:bb:cc:dd:ee:01"}, 201, ""},
		{"two reservations", map[string]any{"ipv4addr": "10.13.0.8", "match_client": "RESERVED"}, 201, ""},
		{"another reservation", map[string]any{"ipv4addr": "10.13.0.9", "match_client": "RESERVED"}, 201, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, body := create(tt.body)
			require.Equal(t, tt.status, status, body)
			if tt.text != "" {
				assert.Equal(t, tt.text, wapiErr(t, body)["text"])
			}
		})
	}

	t.Run("update to a held MAC", func(t *testing.T) {
		ref := c.getList("fixedaddress?ipv4addr=10.13.0.8")[0]["_ref"].(string)
		status, body, _ := c.do(http.MethodPut, ref, map[string]any{"mac": "AA:BB:CC:DD:EE:01", "match_client": "MAC_ADDRESS"})
		require.Equal(t, 400, status, body)
		assert.Equal(t, "MAC address aa:bb:cc:dd:ee:01 is used in two fixed addresses 10.13.0.5 and 10.13.0.8, which are in the same network 10.13.0.0/24.",
			wapiErr(t, body)["text"])
		status, body, _ = c.do(http.MethodPut, ref, map[string]any{"mac": "not-a-mac"})
		require.Equal(t, 400, status, body)
		assert.Equal(t, "00:00:00:00:00:00", c.getList("fixedaddress?ipv4addr=10.13.0.8&_return_fields=mac")[0]["mac"],
			"a refused update changes nothing")
		status, body, _ = c.do(http.MethodPut, ref, map[string]any{"mac": "aa:bb:cc:dd:ee:02", "match_client": "MAC_ADDRESS"})
		require.Equal(t, 200, status, body)
	})
}
