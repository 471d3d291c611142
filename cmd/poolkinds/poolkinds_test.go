package poolkinds

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
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
			assert.NotNil(t, k.NewBackend)
		})
	}
}
