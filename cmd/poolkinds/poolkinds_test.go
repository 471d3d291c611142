package poolkinds

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/api/v1alpha1"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/shared"
)

func TestAllServesEachBackendsNamespacedAndGlobalKinds(t *testing.T) {
	want := []struct {
		kind, backend, object, list string
		namespaced                  bool
	}{
		{"NetboxIPPool", "netbox", "*v1alpha1.NetboxIPPool", "*v1alpha1.NetboxIPPoolList", true},
		{"GlobalNetboxIPPool", "netbox", "*v1alpha1.GlobalNetboxIPPool", "*v1alpha1.GlobalNetboxIPPoolList", false},
		{"InfobloxIPPool", "infoblox", "*v1alpha1.InfobloxIPPool", "*v1alpha1.InfobloxIPPoolList", true},
		{"GlobalInfobloxIPPool", "infoblox", "*v1alpha1.GlobalInfobloxIPPool", "*v1alpha1.GlobalInfobloxIPPoolList", false},
	}
	kinds := All()
	assert.Len(t, kinds, len(want))
	for i, w := range want {
		if i >= len(kinds) {
			break
		}
		k := kinds[i]
		t.Run(w.kind, func(t *testing.T) {
			assert.Equal(t, w.kind, k.Kind)
			assert.Equal(t, w.backend, k.Backend)
			assert.Equal(t, w.namespaced, k.Namespaced)
			assert.Equal(t, w.object, fmt.Sprintf("%T", k.New()))
			assert.Equal(t, w.list, fmt.Sprintf("%T", k.NewList()))
			assert.NotNil(t, k.SecretName)
			assert.NotNil(t, k.RateLimit)
			assert.NotNil(t, k.InsecureConnection)
			assert.NotNil(t, k.Endpoint)
			assert.NotNil(t, k.NewBackend)
		})
	}
}

// TestEndpoint: the URL an administrator's allowed endpoints are held
// against is the one the backend connects to.
func TestEndpoint(t *testing.T) {
	for _, tc := range []struct {
		name string
		pool shared.Pool
		want string
	}{
		{"netbox", &v1alpha1.NetboxIPPool{Spec: v1alpha1.NetboxIPPoolSpec{Connection: v1alpha1.NetboxConnection{URL: "https://netbox.example.com/netbox/"}}},
			"https://netbox.example.com/netbox/"},
		{"infoblox, default port", &v1alpha1.InfobloxIPPool{Spec: v1alpha1.InfobloxIPPoolSpec{Connection: v1alpha1.InfobloxConnection{Host: "grid.example.com"}}},
			"https://grid.example.com:443"},
		{"infoblox, IPv6 and port", &v1alpha1.GlobalInfobloxIPPool{Spec: v1alpha1.InfobloxIPPoolSpec{Connection: v1alpha1.InfobloxConnection{Host: "fd00::1", Port: 8443}}},
			"https://[fd00::1]:8443"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var endpoints []string
			for _, k := range All() {
				if fmt.Sprintf("%T", k.New()) == fmt.Sprintf("%T", tc.pool) {
					endpoints = append(endpoints, k.Endpoint(tc.pool))
				}
			}
			assert.Equal(t, []string{tc.want}, endpoints)
		})
	}
}
