package wapisim

import (
	"encoding/json"
	"net/http"
	"testing"

	ibclient "github.com/infobloxopen/infoblox-go-client/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// requestSetup is a grid with 10.30.0.0/29 (six usable addresses), one of
// them held by a marked fixed address, and the Owner attribute defined.
func requestSetup(t *testing.T) (*Server, *apiClient) {
	s := newSim(t)
	s.AddEADefinition("Owner", "STRING")
	s.AddNetwork("default", "10.30.0.0/29", nil)
	s.AddFixedAddress("default", "10.30.0.1", map[string]string{"Owner": "a"})
	return s, client(t, s, writerUser)
}

func nextIn(network, owner string) map[string]any {
	return map[string]any{"ipv4addr": funcPrefix + network, "match_client": "RESERVED",
		"extattrs": map[string]any{"Owner": map[string]any{"value": owner}}}
}

func decodeList(t *testing.T, body string) []any {
	t.Helper()
	var out []any
	require.NoError(t, json.Unmarshal([]byte(body), &out), body)
	return out
}

func TestRequestObjectAnswers(t *testing.T) {
	tests := []struct {
		name   string
		body   any
		status int
		want   string // JSON the answer must equal
	}{
		{"a single GET answers as the plain search, fields in data",
			map[string]any{"method": "GET", "object": "fixedaddress", "data": map[string]any{"*Owner": "a"},
				"args": map[string]any{"_return_fields": "ipv4addr"}},
			200, `[{"_ref":"*","ipv4addr":"10.30.0.1"}]`},
		{"search arguments may also come in args",
			map[string]any{"method": "GET", "object": "fixedaddress", "args": map[string]any{"*Owner": "nobody"}},
			200, `[]`},
		{"a single POST answers 201 with the object asked for",
			map[string]any{"method": "POST", "object": "fixedaddress", "data": nextIn("10.30.0.0/29", "b"),
				"args": map[string]any{"_return_fields": "ipv4addr"}},
			201, `{"_ref":"*","ipv4addr":"10.30.0.2"}`},
		{"a list answers with one result per operation, in order",
			[]any{
				map[string]any{"method": "GET", "object": "fixedaddress", "data": map[string]any{"*Owner": "a"},
					"args": map[string]any{"_return_fields": "ipv4addr"}},
				map[string]any{"method": "POST", "object": "fixedaddress", "data": nextIn("10.30.0.0/29", "b"),
					"args": map[string]any{"_return_fields": "ipv4addr"}},
				map[string]any{"method": "POST", "object": "fixedaddress", "data": nextIn("10.30.0.0/29", "c"),
					"args": map[string]any{"_return_fields+": "ipv4addr"}, "discard": true},
				map[string]any{"method": "POST", "object": "fixedaddress", "data": nextIn("10.30.0.0/29", "d"),
					"args": map[string]any{"_return_fields": "ipv4addr"}},
			},
			200, `[[{"_ref":"*","ipv4addr":"10.30.0.1"}],{"_ref":"*","ipv4addr":"10.30.0.2"},{"_ref":"*","ipv4addr":"10.30.0.4"}]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, c := requestSetup(t)
			s.ResetCalls()
			status, body, _ := c.do(http.MethodPost, "request", tt.body)
			require.Equal(t, tt.status, status, body)
			assert.JSONEq(t, tt.want, maskRefs(t, body))
			assert.Len(t, s.Calls(), 1, "one request object is one call")
		})
	}
}

// maskRefs replaces every "_ref" value with "*".
func maskRefs(t *testing.T, body string) string {
	t.Helper()
	var v any
	require.NoError(t, json.Unmarshal([]byte(body), &v), body)
	var mask func(any) any
	mask = func(v any) any {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				if k == "_ref" {
					x[k] = "*"
				} else {
					x[k] = mask(e)
				}
			}
		case []any:
			for i, e := range x {
				x[i] = mask(e)
			}
		}
		return v
	}
	out, err := json.Marshal(mask(v))
	require.NoError(t, err)
	return string(out)
}

func TestRequestObjectGetPutDeleteByReference(t *testing.T) {
	s, c := requestSetup(t)
	ref := s.Objects("fixedaddress")[0].Ref
	status, body, _ := c.do(http.MethodPost, "request", []any{
		map[string]any{"method": "PUT", "object": ref, "data": map[string]any{"comment": "moved"}},
		map[string]any{"method": "GET", "object": ref, "args": map[string]any{"_return_fields": "comment"}},
		map[string]any{"method": "DELETE", "object": ref},
	})
	require.Equal(t, http.StatusOK, status, body)
	got := decodeList(t, body)
	require.Len(t, got, 3)
	assert.Equal(t, ref, got[0])
	assert.Equal(t, map[string]any{"_ref": ref, "comment": "moved"}, got[1])
	assert.Equal(t, ref, got[2])
	assert.Empty(t, s.Objects("fixedaddress"))
}

func TestRequestObjectIsOneTransaction(t *testing.T) {
	tests := []struct {
		name    string
		failing map[string]any
		status  int
		class   string
		code    string
		text    string
	}{
		{"an exhausted network",
			map[string]any{"method": "POST", "object": "fixedaddress", "data": nextIn("10.31.0.0/30", "z")},
			400, "AdmConDataError", codeData, "Cannot find 1 available IP address(es) in this network."},
		{"an unknown reference",
			map[string]any{"method": "DELETE", "object": "fixedaddress/ZG5z:10.30.0.9/default"},
			404, "AdmConDataNotFoundError", codeDataNotFound, "Reference fixedaddress/ZG5z:10.30.0.9/default not found"},
		{"an unknown field",
			map[string]any{"method": "POST", "object": "fixedaddress", "data": map[string]any{"ipv4addr": "10.30.0.6", "bogus": 1}},
			400, "AdmConProtoError", codeProto, "Unknown argument/field: 'bogus'"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, c := requestSetup(t)
			// A full network.
			s.AddNetwork("default", "10.31.0.0/30", nil)
			s.AddFixedAddress("default", "10.31.0.1", nil)
			s.AddFixedAddress("default", "10.31.0.2", nil)
			held := s.Objects("fixedaddress")
			status, body, resp := c.do(http.MethodPost, "request", []any{
				map[string]any{"method": "POST", "object": "fixedaddress", "data": nextIn("10.30.0.0/29", "b")},
				map[string]any{"method": "PUT", "object": held[1].Ref, "data": map[string]any{"comment": "changed"}},
				map[string]any{"method": "DELETE", "object": held[0].Ref},
				tt.failing,
				map[string]any{"method": "POST", "object": "fixedaddress", "data": nextIn("10.30.0.0/29", "never")},
			})
			requireWAPIError(t, status, body, resp, tt.status, tt.class, tt.code, tt.text)
			assert.Equal(t, held, s.Objects("fixedaddress"), "nothing the request did stays")
		})
	}
}

func TestRequestObjectNextAvailableGivesDistinctAddresses(t *testing.T) {
	s, c := requestSetup(t)
	var ops []any
	for _, owner := range []string{"b", "c", "d", "e", "f"} {
		ops = append(ops, map[string]any{"method": "POST", "object": "fixedaddress", "data": nextIn("10.30.0.0/29", owner),
			"args": map[string]any{"_return_fields": "ipv4addr,extattrs"}})
	}
	var allocated []string
	s.OnAllocate(func(o Object) { allocated = append(allocated, o.Addresses[0].String()) })
	status, body, _ := c.do(http.MethodPost, "request", ops)
	require.Equal(t, http.StatusOK, status, body)
	var got []string
	for _, r := range decodeList(t, body) {
		got = append(got, r.(map[string]any)["ipv4addr"].(string))
	}
	want := []string{"10.30.0.2", "10.30.0.3", "10.30.0.4", "10.30.0.5", "10.30.0.6"}
	assert.Equal(t, want, got)
	assert.Equal(t, want, allocated, "the allocation hook runs once per object, after the request")

	// One more than the network holds: the whole request is refused.
	s.OnAllocate(nil)
	status, body, resp := c.do(http.MethodPost, "request", []any{
		map[string]any{"method": "DELETE", "object": s.Objects("fixedaddress")[1].Ref},
		map[string]any{"method": "POST", "object": "fixedaddress", "data": nextIn("10.30.0.0/29", "g")},
		map[string]any{"method": "POST", "object": "fixedaddress", "data": nextIn("10.30.0.0/29", "h")},
	})
	requireWAPIError(t, status, body, resp, 400, "AdmConDataError", codeData, "Cannot find 1 available IP address(es) in this network.")
	assert.Len(t, s.Objects("fixedaddress"), 6)
}

func TestRequestObjectState(t *testing.T) {
	s, c := requestSetup(t)
	status, body, _ := c.do(http.MethodPost, "request", []any{
		map[string]any{"method": "STATE:ASSIGN", "data": map[string]any{"owner": "a"}},
		map[string]any{"method": "GET", "object": "fixedaddress", "data": map[string]any{"*Owner": "##STATE:owner:##"},
			"args": map[string]any{"_return_fields": "extattrs"}, "enable_substitution": true,
			"assign_state": map[string]any{"ref": "_ref", "was": "*Owner"}, "discard": true},
		map[string]any{"method": "PUT", "object": "##STATE:ref:##", "enable_substitution": true,
			"data": map[string]any{"comment": "owned by ##STATE:was:##"}, "discard": true},
		map[string]any{"method": "STATE:DISPLAY"},
	})
	require.Equal(t, http.StatusOK, status, body)
	ref := s.Objects("fixedaddress")[0].Ref
	assert.JSONEq(t, `[{"owner":"a","ref":"`+ref+`","was":"a"}]`, body)
	assert.Equal(t, "owned by a", s.Objects("fixedaddress")[0].Comment)
}

func TestRequestObjectRefusals(t *testing.T) {
	tests := []struct {
		name   string
		user   string
		method string
		path   string
		body   any
		status int
		text   string // in the answer
	}{
		{"only POST", writerUser, http.MethodGet, "request", nil, 400, "Method GET not allowed for object request"},
		{"no URI arguments", writerUser, http.MethodPost, "request?_return_fields=name", []any{}, 400, "does not support URI arguments"},
		{"not JSON", writerUser, http.MethodPost, "request", "nope", 400, "Invalid JSON"},
		{"an empty list", writerUser, http.MethodPost, "request", []any{}, 400, "at least one operation"},
		{"an unknown method", writerUser, http.MethodPost, "request", map[string]any{"method": "PATCH", "object": "network"}, 400, "Invalid value for method"},
		{"state methods only in a list", writerUser, http.MethodPost, "request", map[string]any{"method": "STATE:DISPLAY"}, 400, "Invalid value for method"},
		{"list-only fields in a single operation", writerUser, http.MethodPost, "request",
			map[string]any{"method": "GET", "object": "network", "discard": true}, 400, "Unknown argument/field: 'discard'"},
		{"an unknown object type", writerUser, http.MethodPost, "request", []any{map[string]any{"method": "GET", "object": "nope"}}, 400, "Unknown object type (nope)"},
		{"a reader may not write", readerUser, http.MethodPost, "request",
			[]any{map[string]any{"method": "POST", "object": "fixedaddress", "data": nextIn("10.30.0.0/29", "b")}}, 403, "Forbidden"},
		{"a reader may search", readerUser, http.MethodPost, "request",
			[]any{map[string]any{"method": "GET", "object": "network"}}, 200, "10.30.0.0/29"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := requestSetup(t)
			status, body, _ := client(t, s, tt.user).do(tt.method, tt.path, tt.body)
			assert.Equal(t, tt.status, status, body)
			assert.Contains(t, body, tt.text)
		})
	}
}

func TestRequestObjectFaultsApplyOncePerRequest(t *testing.T) {
	s, c := requestSetup(t)
	s.InjectFault(Fault{Kind: FaultLoseResponse, Method: "POST", PathContains: "/request"})
	ops := []any{
		map[string]any{"method": "POST", "object": "fixedaddress", "data": nextIn("10.30.0.0/29", "b")},
		map[string]any{"method": "POST", "object": "fixedaddress", "data": nextIn("10.30.0.0/29", "c")},
	}
	_, err := c.try(http.MethodPost, "request", ops)
	require.Error(t, err, "the answer is lost")
	assert.Len(t, s.Objects("fixedaddress"), 3, "but the request was applied, as a whole")
	assert.Equal(t, 1, s.CountObjectCalls("POST", "request"))
}

// infoblox-go-client sends a MultiRequest as a list of RequestBody.
func TestRequestObjectThroughTheGoClient(t *testing.T) {
	s, _ := requestSetup(t)
	_, om := objectManager(t, s, writerUser)
	res, err := om.(*ibclient.ObjectManager).CreateMultiObject(ibclient.NewMultiRequest([]*ibclient.RequestBody{
		{Method: "POST", Object: "fixedaddress", Data: nextIn("10.30.0.0/29", "b"), Args: map[string]string{"_return_fields": "ipv4addr"}},
		{Method: "GET", Object: "fixedaddress", Data: map[string]any{"*Owner": "a"}, Discard: true,
			AssignState: map[string]string{"first": "ipv4addr"}},
		{Method: "STATE:DISPLAY"},
	}))
	require.NoError(t, err)
	require.Len(t, res, 2)
	assert.Equal(t, "10.30.0.2", res[0]["ipv4addr"])
	assert.Equal(t, map[string]any{"first": "10.30.0.1"}, res[1])
}
