package fidelity

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/wapisim"
)

// httpCase is one raw WAPI request, modelled on the WAPI reference's
// examples, and the answer NIOS documents for it. References in the
// answer are compared with their opaque part replaced by "*" (see ref)
// and next_page_id values as "<page id>", unless raw is set.
type httpCase struct {
	name   string
	method string // GET unless set
	path   string // relative to /wapi/v2.12/ unless it starts with "/"
	body   string
	// before runs after seeding, before the request (e.g. to page once).
	before func(t *testing.T, s *wapisim.Server, c *rawClient) string
	status int
	want   string // JSON
	raw    bool
}

// seedHTTP is the grid every HTTP case starts from.
func seedHTTP(s *wapisim.Server) {
	s.AddEADefinition("Tenant", "STRING")
	s.AddEADefinition("Rack", "INTEGER")
	s.AddNetwork("default", "10.1.0.0/24", map[string]string{"Tenant": "a"})
	s.AddNetwork("default", "2001:db8::/64", nil)
	s.AddRange("default", "10.1.0.10", "10.1.0.20")
	s.AddHostRecord(wapisim.HostRecord{Name: "vm1.example.com", Addresses: []string{"10.1.0.7"},
		EAs: map[string]string{"Tenant": "a"}, Comment: "Web"})
	s.AddHostRecord(wapisim.HostRecord{Name: "vm2.example.com", Addresses: []string{"10.1.0.8"},
		EAs: map[string]string{"Tenant": "b"}})
	s.AddFixedAddress("default", "10.1.0.5", map[string]string{"Rack": "3"})
	s.AddFixedAddress("default", "10.1.0.6", map[string]string{"Rack": "7"})
}

type rawClient struct {
	t    *testing.T
	base string
}

func (c *rawClient) do(method, path, body string) (int, string) {
	c.t.Helper()
	if !strings.HasPrefix(path, "/") {
		path = "/wapi/v" + wapiVersion + "/" + path
	}
	req, err := http.NewRequest(method, c.base+path, strings.NewReader(body))
	require.NoError(c.t, err)
	req.SetBasicAuth(user, password)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(c.t, err)
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	require.NoError(c.t, err)
	return resp.StatusCode, string(out)
}

// normalize rewrites references and page ids in a decoded answer.
func normalize(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			switch s, isStr := e.(string); {
			case isStr && k == "next_page_id":
				x[k] = "<page id>"
			case isStr && (k == "_ref" || k == "result"):
				x[k] = ref(s)
			default:
				x[k] = normalize(e)
			}
		}
	case []any:
		for i, e := range x {
			if s, isStr := e.(string); isStr && strings.Contains(s, "/") && opaqueRef.MatchString(s) {
				x[i] = ref(s)
			} else {
				x[i] = normalize(e)
			}
		}
	case string:
		if opaqueRef.MatchString(x) {
			return ref(x)
		}
	}
	return v
}

// firstPage requests the first page of fixed addresses, one at a time, and
// returns the next page id.
func firstPage(t *testing.T, _ *wapisim.Server, c *rawClient) string {
	status, body := c.do(http.MethodGet, "fixedaddress?_paging=1&_max_results=1&_return_as_object=1", "")
	require.Equal(t, http.StatusOK, status, body)
	var p struct {
		NextPageID string `json:"next_page_id"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &p))
	require.NotEmpty(t, p.NextPageID)
	return p.NextPageID
}

func protoError(text string) string {
	b, _ := json.Marshal(map[string]string{"Error": "AdmConProtoError: " + text, "code": "Client.Ibap.Proto", "text": text})
	return string(b)
}

const (
	host1 = `{"_ref": "record:host/*:vm1.example.com/%20", "ipv4addrs": [{"_ref": "record:host_ipv4addr/*:10.1.0.7/vm1.example.com/%20",
		"configure_for_dhcp": false, "host": "vm1.example.com", "ipv4addr": "10.1.0.7"}], "ipv6addrs": [], "name": "vm1.example.com", "view": " "}`
	host2 = `{"_ref": "record:host/*:vm2.example.com/%20", "ipv4addrs": [{"_ref": "record:host_ipv4addr/*:10.1.0.8/vm2.example.com/%20",
		"configure_for_dhcp": false, "host": "vm2.example.com", "ipv4addr": "10.1.0.8"}], "ipv6addrs": [], "name": "vm2.example.com", "view": " "}`
	fixed5 = `{"_ref": "fixedaddress/*:10.1.0.5/default", "ipv4addr": "10.1.0.5", "network_view": "default"}`
	fixed6 = `{"_ref": "fixedaddress/*:10.1.0.6/default", "ipv4addr": "10.1.0.6", "network_view": "default"}`
)

var httpCases = []httpCase{
	// Default return fields and the shape of each object.
	{name: "network, basic fields", path: "network?network=10.1.0.0/24", status: 200,
		want: `[{"_ref": "network/*:10.1.0.0/24/default", "network": "10.1.0.0/24", "network_view": "default"}]`},
	{name: "ipv6network, basic fields; the name part escapes colons", path: "ipv6network", status: 200,
		want: `[{"_ref": "ipv6network/*:2001%3Adb8%3A%3A/64/default", "network": "2001:db8::/64", "network_view": "default"}]`},
	{name: "range, basic fields", path: "range", status: 200,
		want: `[{"_ref": "range/*:10.1.0.10/10.1.0.20/default", "end_addr": "10.1.0.20", "network": "10.1.0.0/24",
			"network_view": "default", "start_addr": "10.1.0.10"}]`},
	{name: "networkview, basic fields", path: "networkview", status: 200,
		want: `[{"_ref": "networkview/*:default/true", "is_default": true, "name": "default"}]`},
	{name: "record:host, basic fields with nested ipv4addrs", path: "record:host", status: 200,
		want: `[` + host1 + `,` + host2 + `]`},
	{name: "fixedaddress, basic fields", path: "fixedaddress", status: 200, want: `[` + fixed5 + `,` + fixed6 + `]`},
	{name: "ipv4address, basic fields of a host's address", path: "ipv4address?ip_address=10.1.0.7", status: 200,
		want: `[{"_ref": "ipv4address/*:10.1.0.7", "dhcp_client_identifier": "", "ip_address": "10.1.0.7", "is_conflict": false,
			"mac_address": "", "names": ["vm1.example.com"], "network": "10.1.0.0/24", "network_view": "default",
			"objects": ["record:host/*:vm1.example.com/%20"], "status": "USED", "types": ["HOST"], "usage": [], "username": ""}]`},
	{name: "ipv6address, basic fields of an unused address", path: "ipv6address?ip_address=2001:db8::5", status: 200,
		want: `[{"_ref": "ipv6address/*:2001%3Adb8%3A%3A5", "duid": "", "ip_address": "2001:db8::5", "is_conflict": false,
			"names": [], "network": "2001:db8::/64", "network_view": "default", "objects": [], "status": "UNUSED",
			"types": [], "usage": []}]`},
	{name: "extensibleattributedef, basic fields", path: "extensibleattributedef?name=Rack", status: 200,
		want: `[{"_ref": "extensibleattributedef/*:Rack", "name": "Rack", "type": "INTEGER"}]`},
	{name: "grid: the basic version has no fields", path: "grid", status: 200, raw: true,
		want: `[{"_ref": "grid/b25lLmNsdXN0ZXIkMA:Infoblox"}]`},
	{name: "grid by reference with _return_fields", path: "grid/b25lLmNsdXN0ZXIkMA:Infoblox?_return_fields=name", status: 200, raw: true,
		want: `{"_ref": "grid/b25lLmNsdXN0ZXIkMA:Infoblox", "name": "Infoblox"}`},
	{name: "grid cannot be created", method: http.MethodPost, path: "grid", body: `{"name": "x"}`, status: 400,
		want: protoError("Operation create not allowed for grid")},

	// Repeated parameters.
	{name: "repeated _return_fields", path: "fixedaddress?ipv4addr=10.1.0.5&_return_fields=ipv4addr&_return_fields=extattrs,network",
		status: 200, want: `[{"_ref": "fixedaddress/*:10.1.0.5/default", "ipv4addr": "10.1.0.5", "network": "10.1.0.0/24",
			"extattrs": {"Rack": {"value": 3}}}]`},
	{name: "repeated _return_fields+", path: "fixedaddress?ipv4addr=10.1.0.5&_return_fields%2B=network&_return_fields%2B=match_client",
		status: 200, want: `[{"_ref": "fixedaddress/*:10.1.0.5/default", "ipv4addr": "10.1.0.5", "network_view": "default",
			"network": "10.1.0.0/24", "match_client": "RESERVED"}]`},
	{name: "repeated search argument: any of the values", path: "record:host?name=vm1.example.com&name=vm2.example.com",
		status: 200, want: `[` + host1 + `,` + host2 + `]`},
	{name: "repeated negated search argument: none of the values", path: "fixedaddress?ipv4addr!=10.1.0.5&ipv4addr!=10.1.0.9",
		status: 200, want: `[` + fixed6 + `]`},

	// Search modifiers.
	{name: "':=' is case-insensitive", path: "record:host?comment:=WEB", status: 200, want: `[` + host1 + `]`},
	{name: "'~=' is an unanchored regular expression", path: "record:host?name~=vm2", status: 200, want: `[` + host2 + `]`},
	{name: "':~=' combines both", path: "record:host?name:~=^VM1", status: 200, want: `[` + host1 + `]`},
	{name: "'!:=' negates a case-insensitive match", path: "record:host?comment!:=WEB", status: 200, want: `[` + host2 + `]`},
	{name: "'<=' and '>=' on addresses", path: "fixedaddress?ipv4addr%3E=10.1.0.6&ipv4addr%3C=10.1.0.6", status: 200,
		want: `[` + fixed6 + `]`},
	{name: "'*' searches an extensible attribute", path: "record:host?*Tenant=b", status: 200, want: `[` + host2 + `]`},
	{name: "'*' with '!='", path: "record:host?*Tenant!=b", status: 200, want: `[` + host1 + `]`},
	{name: "'*' with '<=' on an INTEGER attribute", path: "fixedaddress?*Rack%3C=5", status: 200, want: `[` + fixed5 + `]`},
	{name: "'*' with '<=' on a STRING attribute is refused", path: "record:host?*Tenant%3C=b", status: 400,
		want: protoError("Search modifier '<=' not allowed for field: Tenant")},
	{name: "a modifier the field does not support", path: "network?network:=10.1.0.0/24", status: 400,
		want: protoError("Search modifier ':=' not allowed for field: network")},
	{name: "two of '~', '<', '>' at once", path: "fixedaddress?ipv4addr~%3C=10", status: 400,
		want: protoError("Invalid search modifier combination: ipv4addr~<")},
	{name: "a readable field that is not searchable", path: "record:host?configure_for_dns=false", status: 400,
		want: protoError("Field is not searchable: configure_for_dns")},
	{name: "an undefined extensible attribute", path: "record:host?*Colour=red", status: 400,
		want: protoError("Unknown extensible attribute: Colour")},

	// _max_results, _return_as_object, paging.
	{name: "_max_results positive truncates", path: "fixedaddress?_max_results=1", status: 200, want: `[` + fixed5 + `]`},
	{name: "_max_results negative fails when more match", path: "fixedaddress?_max_results=-1", status: 400,
		want: protoError("Result set too large (> 1)")},
	{name: "_max_results negative with few enough matches", path: "fixedaddress?_max_results=-2", status: 200,
		want: `[` + fixed5 + `,` + fixed6 + `]`},
	{name: "_return_as_object wraps the result", path: "fixedaddress?ipv4addr=10.1.0.6&_return_as_object=1", status: 200,
		want: `{"result": [` + fixed6 + `]}`},
	{name: "_paging: the first page and its next_page_id", path: "fixedaddress?_paging=1&_max_results=1&_return_as_object=1",
		status: 200, want: `{"result": [` + fixed5 + `], "next_page_id": "<page id>"}`},
	{name: "_page_id: the last page has no next_page_id", before: firstPage,
		path: "fixedaddress?_paging=1&_max_results=2&_return_as_object=1&_page_id={page}", status: 200,
		want: `{"result": [` + fixed6 + `]}`},
	{name: "_paging needs _return_as_object", path: "fixedaddress?_paging=1&_max_results=1", status: 400,
		want: protoError("_return_as_object needs to be enabled for paging requests.")},
	{name: "_page_id that does not exist", path: "fixedaddress?_paging=1&_return_as_object=1&_page_id=789c00", status: 400,
		want: protoError("Page id 789c00 is invalid or expired")},
	{name: "_page_id after it expired",
		before: func(t *testing.T, s *wapisim.Server, c *rawClient) string {
			id := firstPage(t, s, c)
			s.SetClock(func() time.Time { return time.Now().Add(time.Hour) })
			return id
		},
		path: "fixedaddress?_paging=1&_return_as_object=1&_page_id={page}", status: 400,
		want: protoError("Page id {page} is invalid or expired")},

	// Other options.
	{name: "_proxy_search=GM is answered by the grid master", path: "fixedaddress?ipv4addr=10.1.0.5&_proxy_search=GM",
		status: 200, want: `[` + fixed5 + `]`},
	{name: "_proxy_search=LOCAL", path: "fixedaddress?ipv4addr=10.1.0.5&_proxy_search=LOCAL", status: 200,
		want: `[` + fixed5 + `]`},
	{name: "_proxy_search with another value", path: "fixedaddress?_proxy_search=MEMBER", status: 400,
		want: protoError("Invalid value for _proxy_search: MEMBER")},
	{name: "_return_type=json-pretty", path: "fixedaddress?ipv4addr=10.1.0.5&_return_type=json-pretty", status: 200,
		want: `[` + fixed5 + `]`},
	{name: "_return_type=xml is not simulated", path: "fixedaddress?_return_type=xml", status: 400,
		want: protoError("_return_type=xml is not supported by the WAPI simulator")},
	{name: "an unknown option", path: "fixedaddress?_colour=red", status: 400,
		want: protoError("Unknown argument/field: '_colour'")},
	{name: "_schema of the grid", path: "?_schema", status: 200,
		want: `{"requested_version": "2.12", "supported_objects": ["extensibleattributedef", "fixedaddress", "grid",
			"ipv4address", "ipv6address", "ipv6fixedaddress", "ipv6network", "ipv6networkcontainer", "ipv6range", "network", "networkcontainer", "networkview",
			"range", "record:host", "view", "zone_auth"],
			"supported_versions": ["1.0", "1.1", "1.2", "1.3", "1.4", "1.5", "1.6", "1.7", "2.0", "2.1", "2.2", "2.3",
			"2.4", "2.5", "2.6", "2.7", "2.8", "2.9", "2.10", "2.11", "2.12", "2.13"]}`},
	{name: "_schema of an object", path: "grid?_schema", status: 200,
		want: `{"type": "grid", "version": "2.12", "wapi_primitive": "object", "cloud_additional_restrictions": [],
			"restrictions": ["create", "delete", "update"],
			"fields": [{"name": "name", "supports": "r", "standard_field": true}]}`},
	{name: "_schema_version is not simulated", path: "network?_schema&_schema_version=2", status: 400,
		want: protoError("_schema_version is not supported by the WAPI simulator")},
}

func runHTTPCases(t *testing.T) {
	for _, tc := range httpCases {
		t.Run(tc.name, func(t *testing.T) {
			s := wapisim.New(wapisim.WithUser(user, password, wapisim.Permissions{Write: true, Superuser: true}))
			t.Cleanup(s.Close)
			seedHTTP(s)
			c := &rawClient{t: t, base: s.URL()}
			path, want := tc.path, tc.want
			if tc.before != nil {
				id := tc.before(t, s, c)
				path, want = strings.ReplaceAll(path, "{page}", id), strings.ReplaceAll(want, "{page}", id)
			}
			method := tc.method
			if method == "" {
				method = http.MethodGet
			}
			status, body := c.do(method, path, tc.body)
			require.Equal(t, tc.status, status, body)
			if tc.raw {
				assert.JSONEq(t, want, body)
				return
			}
			var got any
			require.NoError(t, json.Unmarshal([]byte(body), &got), body)
			norm, err := json.Marshal(normalize(got))
			require.NoError(t, err)
			assert.JSONEq(t, want, string(norm))
		})
	}
}
