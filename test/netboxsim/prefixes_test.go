package netboxsim

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPrefixWrites: a prefix is created, found by its custom field and
// tag, changed and deleted through the API as NetBox 4.7 does it; a
// duplicate in the global table is refused.
func TestPrefixWrites(t *testing.T) {
	s := newSim(t)
	c := client(t, s)
	s.AddTag("cluster", "cluster")
	status, body, _ := c.do(http.MethodPost, "/api/extras/custom-fields/", map[string]any{
		"name": "claim", "type": "text", "object_types": []any{"ipam.prefix"}, "filter_logic": "exact"})
	require.Equal(t, http.StatusCreated, status, string(body))

	status, body, _ = c.do(http.MethodPost, "/api/ipam/prefixes/", map[string]any{"prefix": "10.30.1.7/24", "status": "reserved",
		"description": "cluster-a", "tags": []any{map[string]any{"slug": "cluster"}}, "custom_fields": map[string]any{"claim": "m1"}})
	require.Equal(t, http.StatusCreated, status, string(body))
	p := obj(t, decode(t, body))
	assert.Equal(t, "10.30.1.0/24", p["prefix"], "saved as its network")
	id := p["id"].(float64)
	// Another, which no filter below but mask_length's may find.
	status, body, _ = c.do(http.MethodPost, "/api/ipam/prefixes/", map[string]any{"prefix": "10.31.0.0/24"})
	require.Equal(t, http.StatusCreated, status, string(body))

	for _, q := range []string{"cf_claim=m1", "tag=cluster", "within=10.30.0.0/16", "within_include=10.30.1.0/24", "mask_length=24&within=10.30.0.0/15&cf_claim=m1"} {
		status, body, _ = c.do(http.MethodGet, "/api/ipam/prefixes/?"+q, nil)
		require.Equal(t, http.StatusOK, status, string(body))
		assert.Equal(t, float64(1), obj(t, decode(t, body))["count"], q)
	}
	for _, q := range []string{"cf_claim=m2", "within=10.30.1.0/24", "within_include=10.30.1.0/25", "mask_length=25"} {
		status, body, _ = c.do(http.MethodGet, "/api/ipam/prefixes/?"+q, nil)
		require.Equal(t, http.StatusOK, status, string(body))
		assert.Equal(t, float64(0), obj(t, decode(t, body))["count"], q)
	}

	path := fmt.Sprintf("/api/ipam/prefixes/%d/", int(id))
	status, body, _ = c.do(http.MethodPatch, path, map[string]any{"custom_fields": map[string]any{"claim": "m2"}})
	require.Equal(t, http.StatusOK, status, string(body))
	p = obj(t, decode(t, body))
	assert.Equal(t, map[string]any{"claim": "m2"}, p["custom_fields"])
	assert.Equal(t, "cluster-a", p["description"], "a PATCH keeps what it does not name")

	status, body, _ = c.do(http.MethodPost, "/api/ipam/prefixes/", map[string]any{"prefix": "10.30.1.0/24"})
	require.Equal(t, http.StatusBadRequest, status)
	assert.Equal(t, map[string]any{"prefix": []any{"Duplicate prefix found in global table: 10.30.1.0/24"}}, decode(t, body))

	status, _, _ = c.do(http.MethodDelete, path, nil)
	require.Equal(t, http.StatusNoContent, status)
	left := s.Prefixes()
	require.Len(t, left, 1)
	assert.Equal(t, "10.31.0.0/24", left[0].Prefix)
}
