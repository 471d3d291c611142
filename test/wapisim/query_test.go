package wapisim

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRepeatedReturnFields: the WAPI reference says that using
// _return_fields repeatedly is the same as listing the fields with commas.
// infoblox-go-client sends it repeated whenever a caller passes
// _return_fields with commas among its search fields (it splits every
// comma-separated search value into repeated parameters).
func TestRepeatedReturnFields(t *testing.T) {
	s := newSim(t)
	s.AddEADefinition("Tenant", "STRING")
	s.AddNetwork("default", "10.20.0.0/24", nil)
	ref := s.AddHostRecord(HostRecord{Name: "vm1.example.com", Addresses: []string{"10.20.0.7"},
		EAs: map[string]string{"Tenant": "t1"}})
	c := client(t, s, readerUser)
	addr := func() map[string]any {
		return map[string]any{"_ref": hostAddrRef(s, ref, 0),
			"configure_for_dhcp": false, "host": "vm1.example.com", "ipv4addr": "10.20.0.7"}
	}
	eas := map[string]any{"Tenant": map[string]any{"value": "t1"}}

	tests := []struct {
		name  string
		query string
		want  map[string]any
	}{
		{"the query infoblox-go-client sends (issue 14)",
			"record:host?name=vm1.example.com&_return_fields=extattrs,ipv4addrs,ipv6addrs,name,view,zone,comment,network_view,aliases,use_ttl,ttl,configure_for_dns&_return_fields=ipv4addrs&_return_fields=name",
			map[string]any{"_ref": ref, "extattrs": eas, "ipv4addrs": []any{addr()}, "ipv6addrs": []any{},
				"name": "vm1.example.com", "view": " ", "network_view": "default", "aliases": []any{},
				"use_ttl": false, "configure_for_dns": false}},
		{"one field per parameter",
			"record:host?name=vm1.example.com&_return_fields=name&_return_fields=extattrs",
			map[string]any{"_ref": ref, "name": "vm1.example.com", "extattrs": eas}},
		{"repeated _return_fields+ adds every field to the basic ones",
			"record:host?name=vm1.example.com&_return_fields%2B=extattrs&_return_fields%2B=network_view",
			map[string]any{"_ref": ref, "ipv4addrs": []any{addr()}, "ipv6addrs": []any{}, "name": "vm1.example.com",
				"view": " ", "extattrs": eas, "network_view": "default"}},
		{"_return_fields and _return_fields+ together",
			"record:host?name=vm1.example.com&_return_fields=extattrs&_return_fields%2B=network_view",
			map[string]any{"_ref": ref, "ipv4addrs": []any{addr()}, "ipv6addrs": []any{}, "name": "vm1.example.com",
				"view": " ", "extattrs": eas, "network_view": "default"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := c.getList(tt.query)
			require.Len(t, l, 1)
			assert.Equal(t, tt.want, l[0])
		})
	}
	t.Run("GET by reference", func(t *testing.T) {
		status, body, _ := c.do(http.MethodGet, ref+"?_return_fields=name&_return_fields=network_view", nil)
		require.Equal(t, http.StatusOK, status, body)
		assert.JSONEq(t, fmt.Sprintf(`{"_ref": %q, "name": "vm1.example.com", "network_view": "default"}`, ref), body)
	})
}

// hostAddrRef is the reference of the i-th ipv4addrs entry of a host.
func hostAddrRef(s *Server, hostRef string, i int) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	h, _ := s.db.get(hostRef)
	return s.db.hostAddrRef(h, h.v4[i])
}
