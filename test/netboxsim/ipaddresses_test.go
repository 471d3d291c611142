package netboxsim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestListFilters(t *testing.T) {
	s := newSim(t)
	vrf := s.AddVRF("blue", "")
	s.AddTag("Managed", "managed")
	s.AddTag("Pool A", "pool-a")
	s.AddCustomField("claim", "exact")
	s.AddCustomField("owner", "loose")
	s.AddCustomField("secret", "disabled")
	s.AddIPAddress("10.0.0.1/24", IPOptions{Tags: []string{"managed", "pool-a"},
		CustomFields: map[string]any{"claim": "ns/a", "owner": "Team-Blue", "secret": "s1"}, Description: "one"})
	s.AddIPAddress("10.0.0.2/24", IPOptions{Tags: []string{"managed"},
		CustomFields: map[string]any{"claim": "ns/a-2", "owner": "team-red"}})
	s.AddIPAddress("10.0.1.1/32", IPOptions{VRF: vrf, Description: "one"})
	s.AddIPAddress("10.0.0.1/32", IPOptions{VRF: vrf})
	s.AddIPAddress("2001:db8::1/64", IPOptions{})

	tests := []struct {
		query string
		want  []string // in NetBox's order (inet, then id)
	}{
		{"", []string{"10.0.0.1/24", "10.0.0.2/24", "10.0.0.1/32", "10.0.1.1/32", "2001:db8::1/64"}},
		{"tag=managed", []string{"10.0.0.1/24", "10.0.0.2/24"}},
		{"tag=managed&tag=pool-a", []string{"10.0.0.1/24"}},
		{"cf_claim=ns/a", []string{"10.0.0.1/24"}},
		{"cf_claim=ns/a&cf_claim=ns/a-2", []string{"10.0.0.1/24", "10.0.0.2/24"}},
		{"cf_owner=TEAM", []string{"10.0.0.1/24", "10.0.0.2/24"}},
		{"cf_owner=blue", []string{"10.0.0.1/24"}},
		{"cf_secret=nothing-matches", []string{"10.0.0.1/24", "10.0.0.2/24", "10.0.0.1/32", "10.0.1.1/32", "2001:db8::1/64"}},
		{"cf_undefined=x", []string{"10.0.0.1/24", "10.0.0.2/24", "10.0.0.1/32", "10.0.1.1/32", "2001:db8::1/64"}},
		{"parent=10.0.0.0/24", []string{"10.0.0.1/24", "10.0.0.2/24", "10.0.0.1/32"}},
		{"parent=10.0.0.0/24&vrf_id=null", []string{"10.0.0.1/24", "10.0.0.2/24"}},
		{"parent=not-a-prefix", nil},
		{"address=10.0.0.1", []string{"10.0.0.1/24", "10.0.0.1/32"}},
		{"address=10.0.0.1/32", []string{"10.0.0.1/32"}},
		{"address=10.0.0.1/24&address=10.0.1.1", []string{"10.0.0.1/24", "10.0.1.1/32"}},
		{fmt.Sprintf("vrf_id=%d", vrf), []string{"10.0.0.1/32", "10.0.1.1/32"}},
		{fmt.Sprintf("vrf_id=null&vrf_id=%d&family=6", vrf), []string{"2001:db8::1/64"}},
		{"description=one", []string{"10.0.0.1/24", "10.0.1.1/32"}},
		{"mask_length=32", []string{"10.0.0.1/32", "10.0.1.1/32"}},
		{"id=2&id=5", []string{"10.0.0.2/24", "2001:db8::1/64"}},
		{"unknown_param=1", []string{"10.0.0.1/24", "10.0.0.2/24", "10.0.0.1/32", "10.0.1.1/32", "2001:db8::1/64"}},
	}
	c := client(t, s)
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			page := obj(t, c.getJSON("/api/ipam/ip-addresses/?"+tt.query, 200))
			assert.EqualValues(t, len(tt.want), page["count"])
			assert.Equal(t, tt.want, addresses(t, page["results"]))
		})
	}

	invalid := []struct{ query, field, msg string }{
		{"tag=ghost", "tag", "Select a valid choice. ghost is not one of the available choices."},
		{"vrf_id=99", "vrf_id", "Select a valid choice. 99 is not one of the available choices."},
		{"status=bogus", "status", "Select a valid choice. bogus is not one of the available choices."},
		{"id=abc", "id", "Enter a number."},
	}
	for _, tt := range invalid {
		t.Run(tt.query, func(t *testing.T) {
			status, body, _ := c.do(http.MethodGet, "/api/ipam/ip-addresses/?"+tt.query, nil)
			require.Equal(t, http.StatusBadRequest, status)
			assert.Equal(t, map[string]any{tt.field: []any{tt.msg}}, decode(t, body))
		})
	}
}

func TestPagination(t *testing.T) {
	s := newSim(t)
	for i := 1; i <= 120; i++ {
		s.AddIPAddress(fmt.Sprintf("10.0.0.%d/24", i), IPOptions{})
	}
	c := client(t, s)
	base := s.URL() + "/api/ipam/ip-addresses/"

	tests := []struct {
		query           string
		wantLen         int
		wantFirst       string
		wantNext, wantP any
	}{
		{"", 50, "10.0.0.1/24", base + "?limit=50&offset=50", nil},
		{"limit=50&offset=50", 50, "10.0.0.51/24", base + "?limit=50&offset=100", base + "?limit=50"},
		{"limit=50&offset=100", 20, "10.0.0.101/24", nil, base + "?limit=50&offset=50"},
		{"limit=10&offset=25&vrf_id=null", 10, "10.0.0.26/24", base + "?limit=10&offset=35&vrf_id=null", base + "?limit=10&offset=15&vrf_id=null"},
		{"limit=0", 120, "10.0.0.1/24", nil, nil},
		{"limit=5000", 120, "10.0.0.1/24", nil, nil},
		{"limit=-3", 50, "10.0.0.1/24", base + "?limit=50&offset=50", nil},
		{"offset=500", 0, "", nil, base + "?limit=50&offset=450"},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			page := obj(t, c.getJSON("/api/ipam/ip-addresses/?"+tt.query, 200))
			assert.EqualValues(t, 120, page["count"])
			results := list(t, page["results"])
			require.Len(t, results, tt.wantLen)
			if tt.wantLen > 0 {
				assert.Equal(t, tt.wantFirst, obj(t, results[0])["address"])
			}
			assert.Equal(t, tt.wantNext, page["next"])
			assert.Equal(t, tt.wantP, page["previous"])
		})
	}
}

func TestObjectShapes(t *testing.T) {
	s := newSim(t)
	vrf := s.AddVRF("blue", "65000:1")
	s.AddTag("Managed", "managed")
	s.AddCustomField("claim", "")
	pid := s.AddPrefix("10.0.0.0/24", PrefixOptions{VRF: vrf, IsPool: true})
	s.AddPrefix("10.0.0.0/16", PrefixOptions{VRF: vrf})
	rid := s.AddIPRange("10.0.0.10/24", "10.0.0.20/24", RangeOptions{VRF: vrf, MarkUtilized: true})
	ipID := s.AddIPAddress("10.0.0.5/24", IPOptions{VRF: vrf, Tags: []string{"managed"}})
	c := client(t, s)
	created := `^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{6})?Z$`

	ip := obj(t, c.getJSON(fmt.Sprintf("/api/ipam/ip-addresses/%d/", ipID), 200))
	requireKeys(t, ip, "id", "url", "display_url", "display", "family", "address", "vrf", "tenant", "status", "role",
		"assigned_object_type", "assigned_object_id", "assigned_object", "nat_inside", "nat_outside", "dns_name",
		"description", "comments", "tags", "custom_fields", "created", "last_updated")
	assert.Equal(t, fmt.Sprintf("%s/api/ipam/ip-addresses/%d/", s.URL(), ipID), ip["url"])
	assert.Equal(t, fmt.Sprintf("%s/ipam/ip-addresses/%d/", s.URL(), ipID), ip["display_url"])
	assert.Equal(t, "10.0.0.5/24", ip["display"])
	assert.Equal(t, map[string]any{"value": float64(4), "label": "IPv4"}, ip["family"])
	assert.Equal(t, map[string]any{"value": "active", "label": "Active"}, ip["status"])
	assert.Nil(t, ip["role"])
	assert.Nil(t, ip["tenant"])
	assert.Equal(t, []any{}, ip["nat_outside"])
	assert.Equal(t, map[string]any{"claim": nil}, ip["custom_fields"], "every defined field, null when unset")
	assert.Regexp(t, created, ip["created"])
	tag := obj(t, list(t, ip["tags"])[0])
	requireKeys(t, tag, "id", "url", "display", "name", "slug", "color")
	assert.Equal(t, "9e9e9e", tag["color"])
	v := obj(t, ip["vrf"])
	assert.Equal(t, map[string]any{"id": float64(vrf), "url": fmt.Sprintf("%s/api/ipam/vrfs/%d/", s.URL(), vrf),
		"display": "blue (65000:1)", "name": "blue", "rd": "65000:1", "description": ""}, v)

	p := obj(t, c.getJSON(fmt.Sprintf("/api/ipam/prefixes/%d/", pid), 200))
	requireKeys(t, p, "id", "url", "display", "family", "prefix", "vrf", "scope_type", "scope_id", "scope", "tenant",
		"vlan", "status", "role", "is_pool", "mark_utilized", "description", "comments", "tags", "custom_fields",
		"created", "last_updated", "children", "_depth")
	assert.Equal(t, "10.0.0.0/24", p["prefix"])
	assert.Equal(t, true, p["is_pool"])
	assert.EqualValues(t, 1, p["_depth"], "nested in the /16")

	r := obj(t, c.getJSON(fmt.Sprintf("/api/ipam/ip-ranges/%d/", rid), 200))
	requireKeys(t, r, "id", "url", "display", "family", "start_address", "end_address", "size", "vrf", "tenant",
		"status", "role", "description", "comments", "tags", "custom_fields", "created", "last_updated",
		"mark_populated", "mark_utilized")
	assert.EqualValues(t, 11, r["size"])
	assert.Equal(t, "10.0.0.10-20/24", r["display"])
	assert.Equal(t, true, r["mark_utilized"])

	prefixes := obj(t, c.getJSON("/api/ipam/prefixes/?prefix=10.0.0.0/24&vrf_id="+fmt.Sprint(vrf), 200))
	assert.EqualValues(t, 1, prefixes["count"])
	ranges := obj(t, c.getJSON("/api/ipam/ip-ranges/?start_address=10.0.0.10/24&end_address=10.0.0.20/24", 200))
	assert.EqualValues(t, 1, ranges["count"])
	vrfs := obj(t, c.getJSON("/api/ipam/vrfs/?name=blue", 200))
	assert.EqualValues(t, 1, obj(t, list(t, vrfs["results"])[0])["ipaddress_count"])
}

func TestIPAddressCRUD(t *testing.T) {
	s := newSim(t)
	s.AddTag("Managed", "managed")
	tenant := s.AddTenant("Acme", "acme")
	c := client(t, s)

	status, body, resp := c.do(http.MethodPost, "/api/ipam/ip-addresses/", map[string]any{
		"address": "192.0.2.10/24", "tags": []any{map[string]any{"slug": "managed"}}, "tenant": tenant})
	require.Equal(t, http.StatusCreated, status, string(body))
	assert.Equal(t, "application/json", resp.Header.Get("Content-Type"))
	assert.Equal(t, "4.3", resp.Header.Get("API-Version"))
	id := int(obj(t, decode(t, body))["id"].(float64))
	path := fmt.Sprintf("/api/ipam/ip-addresses/%d/", id)

	status, body, _ = c.do(http.MethodPatch, path, map[string]any{"description": "patched", "role": nil})
	require.Equal(t, http.StatusOK, status, string(body))
	ip := obj(t, decode(t, body))
	assert.Equal(t, "patched", ip["description"])
	assert.Equal(t, "192.0.2.10/24", ip["address"], "PATCH keeps other fields")
	assert.Len(t, list(t, ip["tags"]), 1)

	status, body, _ = c.do(http.MethodPut, path, map[string]any{"description": "no address"})
	require.Equal(t, http.StatusBadRequest, status)
	assert.Equal(t, map[string]any{"address": []any{"This field is required."}}, decode(t, body))

	validation := []struct {
		name string
		body any
		want any
	}{
		{"duplicate", map[string]any{"address": "192.0.2.10/32"},
			map[string]any{"address": []any{"Duplicate IP address found in global table: 192.0.2.10/24"}}},
		{"slaac on ipv4", map[string]any{"address": "192.0.2.11/24", "status": "slaac"},
			map[string]any{"status": []any{"Only IPv6 addresses can be assigned SLAAC status"}}},
		{"zero mask", map[string]any{"address": "192.0.2.12/0"},
			map[string]any{"address": []any{"Cannot create IP address with /0 mask."}}},
		{"bad address", map[string]any{"address": "nope"},
			map[string]any{"address": []any{"Enter a valid IPv4 or IPv6 address with optional mask."}}},
		{"missing address", map[string]any{}, map[string]any{"address": []any{"This field is required."}}},
		{"not a dict", "[1]", []any{map[string]any{"non_field_errors": []any{"Invalid data. Expected a dictionary, but got int."}}}},
	}
	for _, tt := range validation {
		t.Run(tt.name, func(t *testing.T) {
			status, body, _ := c.do(http.MethodPost, "/api/ipam/ip-addresses/", tt.body)
			require.Equal(t, http.StatusBadRequest, status, string(body))
			assert.Equal(t, tt.want, decode(t, body))
		})
	}

	t.Run("populated range", func(t *testing.T) {
		s.AddIPRange("198.51.100.10/24", "198.51.100.20/24", RangeOptions{MarkPopulated: true})
		status, body, _ := c.do(http.MethodPost, "/api/ipam/ip-addresses/", map[string]any{"address": "198.51.100.15/24"})
		require.Equal(t, http.StatusBadRequest, status)
		assert.Equal(t, map[string]any{"address": []any{"Cannot create IP address 198.51.100.15/24 inside range 198.51.100.10-20/24."}},
			decode(t, body))
	})

	status, body, _ = c.do(http.MethodDelete, path, nil)
	require.Equal(t, http.StatusNoContent, status)
	assert.Empty(t, body)
	status, body, _ = c.do(http.MethodGet, path, nil)
	require.Equal(t, http.StatusNotFound, status)
	assert.JSONEq(t, `{"detail":"No IPAddress matches the given query."}`, string(body))
}

func TestBulkDeleteIPAddresses(t *testing.T) {
	s := newSim(t)
	c := client(t, s)
	var ids []int
	for _, a := range []string{"192.0.2.1/24", "192.0.2.2/24", "192.0.2.3/24"} {
		status, body, _ := c.do(http.MethodPost, "/api/ipam/ip-addresses/", map[string]any{"address": a})
		require.Equal(t, http.StatusCreated, status, string(body))
		ids = append(ids, int(obj(t, decode(t, body))["id"].(float64)))
	}

	for _, tt := range []struct {
		name string
		body any
		want any
	}{
		{"not a list", map[string]any{"id": ids[0]},
			map[string]any{"detail": "Expected a list of objects, but got dict."}},
		{"without id", []any{map[string]any{"id": ids[0]}, map[string]any{}},
			map[string]any{"detail": "1 of 2 objects failed validation.",
				"errors": []any{map[string]any{"index": float64(1), "errors": map[string]any{"id": []any{"This field is required."}}}}}},
		{"id not a number", []any{map[string]any{"id": "x"}},
			map[string]any{"detail": "1 of 1 objects failed validation.",
				"errors": []any{map[string]any{"index": float64(0), "errors": map[string]any{"id": []any{"A valid integer is required."}}}}}},
		{"not an object", []any{map[string]any{"id": ids[0]}, 5},
			map[string]any{"detail": "1 of 2 objects failed validation.",
				"errors": []any{map[string]any{"index": float64(1), "errors": map[string]any{"__all__": []any{"Invalid data. Expected a dictionary, but got int."}}}}}},
		{"listed twice", []any{map[string]any{"id": ids[0]}, map[string]any{"id": ids[0]}},
			map[string]any{"detail": "1 of 2 objects are listed more than once.",
				"errors": []any{map[string]any{"id": float64(ids[0]), "errors": map[string]any{"id": []any{
					fmt.Sprintf("Each object may be specified only once; ID %d is listed 2 times", ids[0])}}}}}},
		{"an ID that does not exist", []any{map[string]any{"id": ids[0]}, map[string]any{"id": 9998}, map[string]any{"id": 9999}},
			map[string]any{"detail": "2 of 3 objects could not be found.", "errors": []any{
				map[string]any{"id": float64(9998), "errors": map[string]any{"id": []any{"Object with ID 9998 does not exist"}}},
				map[string]any{"id": float64(9999), "errors": map[string]any{"id": []any{"Object with ID 9999 does not exist"}}}}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			status, body, _ := c.do(http.MethodDelete, "/api/ipam/ip-addresses/", tt.body)
			require.Equal(t, http.StatusBadRequest, status, string(body))
			assert.Equal(t, tt.want, decode(t, body))
			assert.Len(t, s.IPAddresses(), 3, "a refused list deletes nothing")
		})
	}

	status, body, _ := c.do(http.MethodDelete, "/api/ipam/ip-addresses/", []any{map[string]any{"id": ids[0]}, map[string]any{"id": ids[2]}})
	require.Equal(t, http.StatusNoContent, status, string(body))
	left := s.IPAddresses()
	require.Len(t, left, 1)
	assert.Equal(t, "192.0.2.2/24", left[0].Address)
}

func TestCustomFieldsMustExist(t *testing.T) {
	s := newSim(t)
	c := client(t, s)
	ip := map[string]any{"address": "10.0.0.1/24", "custom_fields": map[string]any{"claim": "x"}}

	status, body, _ := c.do(http.MethodPost, "/api/ipam/ip-addresses/", ip)
	require.Equal(t, http.StatusBadRequest, status)
	assert.Equal(t, map[string]any{"__all__": []any{"Unknown field name 'claim' in custom field data."}}, decode(t, body))

	status, body, _ = c.do(http.MethodPost, "/api/extras/custom-fields/", map[string]any{
		"name": "claim", "type": "text", "object_types": []any{"ipam.ipaddress"}, "filter_logic": "exact"})
	require.Equal(t, http.StatusCreated, status, string(body))
	cf := obj(t, decode(t, body))
	assert.Equal(t, map[string]any{"value": "exact", "label": "Exact"}, cf["filter_logic"])
	assert.Equal(t, "Claim", cf["display"])
	requireKeys(t, cf, "id", "url", "display", "object_types", "type", "data_type", "name")

	status, body, _ = c.do(http.MethodPost, "/api/extras/custom-fields/", map[string]any{
		"name": "claim", "type": "text", "object_types": []any{"ipam.ipaddress"}})
	require.Equal(t, http.StatusBadRequest, status)
	assert.Equal(t, map[string]any{"name": []any{"custom field with this name already exists."}}, decode(t, body))

	status, body, _ = c.do(http.MethodPost, "/api/ipam/ip-addresses/", ip)
	require.Equal(t, http.StatusCreated, status, string(body))
	assert.Equal(t, map[string]any{"claim": "x"}, obj(t, decode(t, body))["custom_fields"])

	status, body, _ = c.do(http.MethodPost, "/api/ipam/ip-addresses/", map[string]any{
		"address": "10.0.0.2/24", "custom_fields": map[string]any{"claim": 5}})
	require.Equal(t, http.StatusBadRequest, status)
	assert.Equal(t, map[string]any{"__all__": []any{"Invalid value for custom field 'claim': Value must be a string."}}, decode(t, body))

	fields := obj(t, c.getJSON("/api/extras/custom-fields/?name=claim", 200))
	assert.EqualValues(t, 1, fields["count"])
}

func TestTagsEndpoint(t *testing.T) {
	s := newSim(t)
	c := client(t, s)
	status, body, _ := c.do(http.MethodPost, "/api/extras/tags/", map[string]any{"name": "Managed", "slug": "managed"})
	require.Equal(t, http.StatusCreated, status, string(body))
	tag := obj(t, decode(t, body))
	assert.Equal(t, "9e9e9e", tag["color"])
	requireKeys(t, tag, "id", "url", "display", "name", "slug")

	status, body, _ = c.do(http.MethodPost, "/api/extras/tags/", map[string]any{"name": "Other", "slug": "managed", "color": "red"})
	require.Equal(t, http.StatusBadRequest, status)
	assert.Equal(t, map[string]any{
		"slug":  []any{"tag with this slug already exists."},
		"color": []any{"Enter a valid hexadecimal RGB color code."},
	}, decode(t, body))

	page := obj(t, c.getJSON("/api/extras/tags/?slug=managed", 200))
	assert.EqualValues(t, 1, page["count"])
	page = obj(t, c.getJSON("/api/extras/tags/?slug=other", 200))
	assert.EqualValues(t, 0, page["count"])
	obj(t, c.getJSON(fmt.Sprintf("/api/extras/tags/%v/", tag["id"]), 200))
}

func TestRoutingAndErrors(t *testing.T) {
	s := newSim(t)
	c := client(t, s)
	c.hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

	tests := []struct {
		name, method, path string
		body               any
		wantStatus         int
		wantBody           string // JSON, or a substring for non-JSON bodies
	}{
		{"missing object", "GET", "/api/ipam/vrfs/7/", nil, 404, `{"detail":"No VRF matches the given query."}`},
		{"non-numeric id", "GET", "/api/ipam/ip-addresses/abc/", nil, 404, `{"detail":"Not found."}`},
		{"method not allowed", "DELETE", "/api/ipam/vrfs/", nil, 405, `{"detail":"Method \"DELETE\" not allowed."}`},
		{"malformed json", "POST", "/api/ipam/ip-addresses/", `{"address": `, 400,
			`{"detail":"JSON parse error - Expecting value: line 1 column 13 (char 12)"}`},
		{"unknown path", "GET", "/api/ipam/nothing/", nil, 404, "Page Not Found"},
		{"no trailing slash", "GET", "/api/ipam/ip-addresses?limit=1", nil, 301, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, body, resp := c.do(tt.method, tt.path, tt.body)
			require.Equal(t, tt.wantStatus, status, string(body))
			switch {
			case status == 301:
				assert.Equal(t, "/api/ipam/ip-addresses/?limit=1", resp.Header.Get("Location"))
			case resp.Header.Get("Content-Type") == "application/json":
				assert.JSONEq(t, tt.wantBody, string(body))
			default:
				assert.Contains(t, resp.Header.Get("Content-Type"), "text/html")
				assert.Contains(t, string(body), tt.wantBody)
			}
		})
	}

	t.Run("unsupported media type", func(t *testing.T) {
		req, err := http.NewRequest(http.MethodPost, s.URL()+"/api/extras/tags/", strings.NewReader("a=b"))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Token "+v1Token)
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		require.Equal(t, http.StatusUnsupportedMediaType, resp.StatusCode)
	})
}

func TestHumanEdits(t *testing.T) {
	s := newSim(t)
	s.AddTag("Managed", "managed")
	id := s.AddIPAddress("10.0.0.7/24", IPOptions{Tags: []string{"managed"}, CustomFields: map[string]any{"claim": "a"}})

	got := s.IPAddresses()
	got[0].CustomFields["claim"] = "mutated"
	got[0].Tags[0] = "mutated"
	assert.Equal(t, "a", s.IPAddresses()[0].CustomFields["claim"], "IPAddresses returns deep copies")

	s.EditIPAddress(id, func(ip *IPAddress) {
		ip.Description = "edited by hand"
		ip.Tags = nil
		ip.Status = "deprecated"
	})
	ip := obj(t, client(t, s).getJSON(fmt.Sprintf("/api/ipam/ip-addresses/%d/", id), 200))
	assert.Equal(t, "edited by hand", ip["description"])
	assert.Empty(t, ip["tags"])
	assert.Equal(t, "deprecated", obj(t, ip["status"])["value"])

	s.DeleteIPAddress(id)
	assert.Empty(t, s.IPAddresses())
	assert.Panics(t, func() { s.EditIPAddress(id, func(*IPAddress) {}) })
}

// An exact text custom field gets NetBox's character lookups
// (cf_<name>__isw, __nisw, __ic, …); a loose one gets none, so NetBox
// ignores them and lists everything.
func TestCustomFieldLookups(t *testing.T) {
	s := newSim(t)
	s.AddCustomField("marker", "exact")
	s.AddCustomField("note", "loose")
	for addr, marker := range map[string]string{"10.0.0.1/24": "uid-a/ns/one", "10.0.0.2/24": "UID-A/ns/two", "10.0.0.3/24": "uid-b/ns/one"} {
		s.AddIPAddress(addr, IPOptions{CustomFields: map[string]any{"marker": marker, "note": marker}})
	}
	c := client(t, s)
	addresses := func(query string) []string {
		var out []string
		for _, ip := range list(t, obj(t, c.getJSON("/api/ipam/ip-addresses/?"+query, 200))["results"]) {
			out = append(out, obj(t, ip)["address"].(string))
		}
		return out
	}
	for _, tt := range []struct {
		query string
		want  []string
	}{
		{"cf_marker__isw=uid-a/", []string{"10.0.0.1/24", "10.0.0.2/24"}},
		{"cf_marker__nisw=uid-a/", []string{"10.0.0.3/24"}},
		{"cf_marker__iew=/one", []string{"10.0.0.1/24", "10.0.0.3/24"}},
		{"cf_marker__ic=NS/T", []string{"10.0.0.2/24"}},
		{"cf_marker__ie=uid-a/ns/two", []string{"10.0.0.2/24"}},
		{"cf_note__isw=uid-a/", []string{"10.0.0.1/24", "10.0.0.2/24", "10.0.0.3/24"}},
	} {
		assert.ElementsMatch(t, tt.want, addresses(tt.query), tt.query)
	}
}

// TestUniquenessFollowsNetBoxsRules: a second IP address at a host address
// is refused where NetBox enforces uniqueness (the global table under
// ENFORCE_GLOBAL_UNIQUE, a VRF with enforce_unique), unless both have a
// role that may share an address; elsewhere it is accepted, whatever its
// mask.
func TestUniquenessFollowsNetBoxsRules(t *testing.T) {
	for _, tc := range []struct {
		name         string
		globalUnique bool
		vrfUnique    bool
		inVRF        bool
		heldRole     string
		role         string
		refused      string // NetBox's words, "" when accepted
	}{
		{name: "global table, enforced", globalUnique: true, refused: "Duplicate IP address found in global table: 192.0.2.10/24"},
		{name: "global table, ENFORCE_GLOBAL_UNIQUE off", globalUnique: false},
		{name: "global table, both vip", globalUnique: true, heldRole: "vip", role: "vip"},
		{name: "global table, only the new one vip", globalUnique: true, role: "vip", refused: "Duplicate IP address found in global table"},
		{name: "VRF with enforce_unique", globalUnique: true, vrfUnique: true, inVRF: true, refused: "Duplicate IP address found in VRF blue (65000:1)"},
		{name: "VRF without enforce_unique", globalUnique: true, vrfUnique: false, inVRF: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSim(t)
			c := client(t, s)
			s.SetEnforceGlobalUnique(tc.globalUnique)
			var vrf int32
			if tc.inVRF {
				vrf = s.AddVRF("blue", "65000:1")
				s.SetVRFEnforceUnique(vrf, tc.vrfUnique)
			}
			s.AddIPAddress("192.0.2.10/24", IPOptions{VRF: vrf, Role: tc.heldRole})
			body := map[string]any{"address": "192.0.2.10/32"}
			if tc.inVRF {
				body["vrf"] = vrf
			}
			if tc.role != "" {
				body["role"] = tc.role
			}
			status, answer, _ := c.do(http.MethodPost, "/api/ipam/ip-addresses/", body)
			if tc.refused == "" {
				require.Equal(t, http.StatusCreated, status, string(answer))
				return
			}
			require.Equal(t, http.StatusBadRequest, status, string(answer))
			assert.Contains(t, string(answer), tc.refused)
		})
	}
}

// NetBox 4.6 and later (ETagMixin) answer a read of one object with a weak
// ETag made from its last_updated, and refuse a write or deletion whose
// If-Match names another with 412 and the current ETag.
func TestIPAddressETagAndIfMatch(t *testing.T) {
	s := newSim(t)
	c := client(t, s)
	id := s.AddIPAddress("192.0.2.20/24", IPOptions{})
	path := fmt.Sprintf("/api/ipam/ip-addresses/%d/", id)
	send := func(method, ifMatch string, body any) *http.Response {
		raw, err := json.Marshal(body)
		require.NoError(t, err)
		req, err := http.NewRequest(method, c.base+path, bytes.NewReader(raw))
		require.NoError(t, err)
		req.Header.Set("Authorization", c.auth)
		req.Header.Set("Content-Type", "application/json")
		if ifMatch != "" {
			req.Header.Set("If-Match", ifMatch)
		}
		resp, err := c.hc.Do(req)
		require.NoError(t, err)
		_, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp
	}

	status, body, resp := c.do(http.MethodGet, path, nil)
	require.Equal(t, http.StatusOK, status, string(body))
	read := resp.Header.Get("ETag")
	assert.Regexp(t, `^W/"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{6})?\+00:00"$`, read)

	time.Sleep(2 * time.Microsecond)
	s.EditIPAddress(id, func(ip *IPAddress) { ip.Description = "edited" })
	stale := send(http.MethodPatch, read, map[string]any{"description": "mine"})
	assert.Equal(t, http.StatusPreconditionFailed, stale.StatusCode)
	current := stale.Header.Get("ETag")
	assert.NotEqual(t, read, current, "the answer names the current ETag")
	assert.Equal(t, http.StatusPreconditionFailed, send(http.MethodDelete, read, nil).StatusCode)
	assert.Equal(t, "edited", s.IPAddresses()[0].Description, "a refused write changes nothing")

	updated := send(http.MethodPatch, current, map[string]any{"description": "mine"})
	require.Equal(t, http.StatusOK, updated.StatusCode)
	assert.Equal(t, http.StatusNoContent, send(http.MethodDelete, updated.Header.Get("ETag"), nil).StatusCode)
	assert.Empty(t, s.IPAddresses())
}
