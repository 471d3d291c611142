package conformance_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/netip"
	"net/url"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go4.org/netipx"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/netboxsim"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/netboxtarget"
)

// netboxAPI is a bare REST client of a NetBox under test.
type netboxAPI struct {
	base  string
	token string
}

// call sends body (nil for none) and returns the status and the decoded
// answer (nil for none); t is the test a failure is reported to.
func (a netboxAPI) call(t require.TestingT, method, path string, body any) (int, any) {
	if h, ok := t.(interface{ Helper() }); ok {
		h.Helper()
	}
	var rd io.Reader
	if body != nil {
		raw, err := json.Marshal(body)
		require.NoError(t, err)
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, a.base+path, rd)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Token "+a.token)
	req.Header.Set("Accept", "application/json")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	var out any
	if len(raw) > 0 {
		require.NoError(t, json.Unmarshal(raw, &out), string(raw))
	}
	return resp.StatusCode, out
}

// prefixesWithin lists the prefixes strictly inside parent (and matching
// the extra filters), by prefix.
func (a netboxAPI) prefixesWithin(t *testing.T, parent netip.Prefix, extra url.Values) map[string]map[string]any {
	t.Helper()
	q := url.Values{"within": {parent.String()}, "limit": {"0"}}
	for k, v := range extra {
		q[k] = v
	}
	status, out := a.call(t, http.MethodGet, "/api/ipam/prefixes/?"+q.Encode(), nil)
	require.Equal(t, http.StatusOK, status, out)
	found := map[string]map[string]any{}
	for _, r := range out.(map[string]any)["results"].([]any) {
		p := r.(map[string]any)
		found[p["prefix"].(string)] = p
	}
	return found
}

// TestNetBoxCarvesChildPrefixesAsTheProviderAsks pins what per-cluster
// subnets rest on: NetBox's available-prefixes POST picks and creates in
// one request, first fit from the lowest free block, a list all or none;
// a full parent is 409 and creates nothing; concurrent carves never
// overlap; the child carries the fields sent with it (a custom field for
// the marker), and is found again by it. It runs against the real NetBox
// in make test-real-netbox, and the simulator otherwise.
func TestNetBoxCarvesChildPrefixesAsTheProviderAsks(t *testing.T) {
	target := netboxtarget.New(t)
	const token = "c4a90000000000000000000000000000000000c4"
	target.AddToken(token, true)
	api := netboxAPI{base: target.URL(), token: token}

	// A custom field on prefixes for the marker, get-or-create: a real
	// NetBox is shared by the runs' tests.
	const field = "capi_subnet_claim"
	status, out := api.call(t, http.MethodGet, "/api/extras/custom-fields/?name="+field, nil)
	require.Equal(t, http.StatusOK, status, out)
	if out.(map[string]any)["count"].(float64) == 0 {
		status, out = api.call(t, http.MethodPost, "/api/extras/custom-fields/", map[string]any{
			"name": field, "type": "text", "object_types": []string{"ipam.prefix"}, "filter_logic": "exact"})
		require.Equal(t, http.StatusCreated, status, out)
	}

	parent := netip.MustParsePrefix(fmt.Sprintf("10.%d.%d.0/22", 200+rand.IntN(50), 4*rand.IntN(64)))
	parentID := target.AddPrefix(parent.String(), netboxsim.PrefixOptions{Status: "container"})
	carve := fmt.Sprintf("/api/ipam/prefixes/%d/available-prefixes/", parentID)
	// A prefix of a VRF inside the global parent: NetBox carves from the
	// parent's own VRF only (get_available_prefixes), so it counts for
	// nothing below. Probed on the real NetBox 4.7.3.
	vrf := target.AddVRF("carve-test", "65000:42")
	lastBlock := netip.PrefixFrom(parent.Addr(), 24)
	for range 3 {
		lastBlock = netip.PrefixFrom(netipx.PrefixLastIP(lastBlock).Next(), 24)
	}
	target.AddPrefix(lastBlock.String(), netboxsim.PrefixOptions{VRF: vrf})
	t.Cleanup(func() { api.deleteParent(t, parent, parentID) })
	block := func(third, bits int) string {
		a := parent.Addr().As4()
		a[2] += byte(third / 256)
		a[3] = byte(third % 256)
		return netip.PrefixFrom(netip.AddrFrom4(a), bits).String()
	}

	// One child, with the fields the provider sends.
	status, out = api.call(t, http.MethodPost, carve, map[string]any{"prefix_length": 24, "status": "reserved",
		"description": "cluster-a", "custom_fields": map[string]any{field: "marker-a"}})
	require.Equal(t, http.StatusCreated, status, out)
	child := out.(map[string]any)
	assert.Equal(t, block(0, 24), child["prefix"], "the lowest free block")
	assert.Nil(t, child["vrf"], "the parent's VRF: the global table")
	assert.Equal(t, "reserved", child["status"].(map[string]any)["value"])
	assert.Equal(t, "cluster-a", child["description"])
	assert.Equal(t, "marker-a", child["custom_fields"].(map[string]any)[field])
	assert.Equal(t, float64(0), child["_depth"], "the answer is the instance before NetBox counts its depth")
	status, out = api.call(t, http.MethodGet, fmt.Sprintf("/api/ipam/prefixes/%d/", parentID), nil)
	require.Equal(t, http.StatusOK, status, out)
	parentDepth := out.(map[string]any)["_depth"].(float64)
	status, out = api.call(t, http.MethodGet, fmt.Sprintf("/api/ipam/prefixes/%v/", child["id"]), nil)
	require.Equal(t, http.StatusOK, status, out)
	assert.Equal(t, parentDepth+1, out.(map[string]any)["_depth"], "a read counts it")

	// A list: in order, each from what the earlier ones left.
	status, out = api.call(t, http.MethodPost, carve, []any{
		map[string]any{"prefix_length": 24}, map[string]any{"prefix_length": 25}, map[string]any{"prefix_length": 25}})
	require.Equal(t, http.StatusCreated, status, out)
	var got []string
	for _, c := range out.([]any) {
		got = append(got, c.(map[string]any)["prefix"].(string))
	}
	assert.Equal(t, []string{block(256, 24), block(512, 25), block(512+128, 25)}, got)

	status, out = api.call(t, http.MethodGet, carve, nil)
	require.Equal(t, http.StatusOK, status, out)
	require.Len(t, out, 1)
	assert.Equal(t, map[string]any{"family": float64(4), "prefix": block(768, 24), "vrf": nil}, out.([]any)[0])

	// Not enough space for the whole list: nothing of it is created.
	status, out = api.call(t, http.MethodPost, carve, []any{map[string]any{"prefix_length": 24}, map[string]any{"prefix_length": 24}})
	assert.Equal(t, http.StatusConflict, status, out)
	assert.Equal(t, map[string]any{"detail": "Insufficient resources are available to satisfy the request"}, out)
	assert.Len(t, api.prefixesWithin(t, parent, nil), 5, "the four children and the VRF's prefix")

	for _, tc := range []struct {
		name string
		body any
		want any
	}{
		{"no length", map[string]any{"description": "x"}, []any{map[string]any{"prefix_length": "this field can not be missing"}}},
		{"a length as text", map[string]any{"prefix_length": "24"}, []any{map[string]any{"prefix_length": "this field must be int type"}}},
		{"too long", []any{map[string]any{"prefix_length": 26}, map[string]any{"prefix_length": 33}},
			[]any{map[string]any{}, map[string]any{"prefix_length": "Invalid prefix length (33) for IPv4"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, out := api.call(t, http.MethodPost, carve, tc.body)
			assert.Equal(t, http.StatusBadRequest, status, out)
			assert.Equal(t, tc.want, out)
		})
	}

	// Carves at once never overlap, and stop at a full parent.
	var wg sync.WaitGroup
	statuses := make([]int, 6)
	for i := range statuses {
		wg.Add(1)
		go func() {
			defer wg.Done()
			statuses[i], _ = api.call(&assert.CollectT{}, http.MethodPost, carve, map[string]any{"prefix_length": 26,
				"custom_fields": map[string]any{field: fmt.Sprintf("marker-%d", i)}})
		}()
	}
	wg.Wait()
	created := 0
	for _, s := range statuses {
		if s == http.StatusCreated {
			created++
		} else {
			assert.Equal(t, http.StatusConflict, s)
		}
	}
	assert.Equal(t, 4, created, "the last /24 holds four /26s")
	children := api.prefixesWithin(t, parent, url.Values{"mask_length": {"26"}})
	assert.Len(t, children, 4, "four distinct children")

	// The marker finds its child again.
	marked := api.prefixesWithin(t, parent, url.Values{"cf_" + field: {"marker-a"}})
	require.Len(t, marked, 1)
	assert.Contains(t, marked, block(0, 24))
}

// A child carved with a prefix role and a scope, as a pool's
// childPrefixes.role and scope ask, and NetBox's answers to references it
// cannot resolve. Probed on the real NetBox 4.7.3.
func TestNetBoxCarvesChildrenWithARoleAndAScope(t *testing.T) {
	target := netboxtarget.New(t)
	const token = "c4a90000000000000000000000000000000000c5"
	target.AddToken(token, true)
	api := netboxAPI{base: target.URL(), token: token}
	role := target.AddRole("Carve Test Nodes", "carve-test-nodes")
	site := target.AddScope("dcim.site", "Carve Test Site", "carve-test-site")

	parent := netip.MustParsePrefix(fmt.Sprintf("10.%d.%d.0/22", 200+rand.IntN(50), 4*rand.IntN(64)))
	parentID := target.AddPrefix(parent.String(), netboxsim.PrefixOptions{Status: "container"})
	t.Cleanup(func() { api.deleteParent(t, parent, parentID) })
	carve := fmt.Sprintf("/api/ipam/prefixes/%d/available-prefixes/", parentID)

	status, out := api.call(t, http.MethodPost, carve, []map[string]any{{"prefix_length": 24, "role": role, "scope_type": "dcim.site", "scope_id": site}})
	require.Equal(t, http.StatusCreated, status, out)
	child := out.([]any)[0].(map[string]any)
	assert.Equal(t, "carve-test-nodes", child["role"].(map[string]any)["slug"])
	assert.Equal(t, "dcim.site", child["scope_type"])
	assert.Equal(t, float64(site), child["scope_id"])
	assert.Equal(t, "carve-test-site", child["scope"].(map[string]any)["slug"])
	within := target.PrefixesWithin(parent.String())
	require.Len(t, within, 1)
	assert.Equal(t, "carve-test-nodes", within[0].Role)
	assert.Equal(t, "dcim.site", within[0].ScopeType)
	assert.Equal(t, "carve-test-site", within[0].Scope)

	for _, tc := range []struct {
		name  string
		child map[string]any
		want  map[string]any
	}{
		{"a role that does not exist", map[string]any{"role": 2147483000},
			map[string]any{"role": []any{"Related object not found using the provided numeric ID: 2147483000"}}},
		{"a scope that does not exist", map[string]any{"scope_type": "dcim.site", "scope_id": 2147483000},
			map[string]any{"scope_id": []any{"Related object not found using the provided value: 2147483000."}}},
		{"a scope type prefixes do not take", map[string]any{"scope_type": "dcim.device", "scope_id": site},
			map[string]any{"scope_type": []any{"Invalid content type: dcim.device"}}},
		{"a scope without its type", map[string]any{"scope_id": site},
			map[string]any{"scope_type": []any{"This field cannot be null."}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.child["prefix_length"] = 24
			status, out := api.call(t, http.MethodPost, carve, []map[string]any{tc.child})
			require.Equal(t, http.StatusBadRequest, status, out)
			assert.Equal(t, []any{tc.want}, out)
		})
	}
	assert.Len(t, target.PrefixesWithin(parent.String()), 1, "nothing carved by a refused request")
}

// deleteParent deletes parent, whose ID is parentID, and every prefix
// inside it: a real NetBox outlives the run.
func (a netboxAPI) deleteParent(t *testing.T, parent netip.Prefix, parentID int32) {
	var ids []map[string]any
	for _, p := range a.prefixesWithin(t, parent, nil) {
		ids = append(ids, map[string]any{"id": p["id"]})
	}
	ids = append(ids, map[string]any{"id": parentID})
	status, out := a.call(t, http.MethodDelete, "/api/ipam/prefixes/", ids)
	assert.Equal(t, http.StatusNoContent, status, out)
}
