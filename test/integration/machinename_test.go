package integration

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/api/v1alpha1"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/netboxsim"
)

// The Machine a claim is for names its NetBox record, and the name is kept
// on the claim: from the Machine that owns the claim, from the claim itself
// when nothing does, and as set beforehand when it is.
func TestMachineNameInRecords(t *testing.T) {
	f := newFixture(t)
	f.seedPrefix("10.120.0.0/24", netboxsim.PrefixOptions{})
	pool := f.createNetboxPool("pool", "10.120.0.0/24", func(s *v1alpha1.NetboxIPPoolSpec) {
		s.Reservation.DNSNamePattern = "{{ .MachineName }}.{{ .Namespace }}.example.com"
		s.Reservation.DescriptionPattern = "{{ .ClaimName }} of Machine {{ .MachineName }}"
	})
	f.waitPoolReady(pool)

	machine := &clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "prod-md-0-x7k2p"},
		Spec: clusterv1.MachineSpec{
			ClusterName: "prod",
			Bootstrap:   clusterv1.Bootstrap{DataSecretName: ptr.To("bootstrap")},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "Metal3Machine", Name: "prod-md-0-x7k2p",
			},
		},
	}
	require.NoError(t, k8s.Create(f.ctx, machine))

	tests := []struct {
		claim       string
		mutate      func(*ipamv1.IPAddressClaim)
		wantMachine string
	}{
		{"owned", func(c *ipamv1.IPAddressClaim) {
			require.NoError(t, controllerutil.SetControllerReference(machine, c, testScheme))
		}, machine.Name},
		{"unowned", func(*ipamv1.IPAddressClaim) {}, "unowned"},
		{"named", func(c *ipamv1.IPAddressClaim) {
			c.Annotations = map[string]string{v1alpha1.MachineNameAnnotation: "chosen-by-hand"}
			require.NoError(t, controllerutil.SetControllerReference(machine, c, testScheme))
		}, "chosen-by-hand"},
	}
	for _, tt := range tests {
		t.Run(tt.claim, func(t *testing.T) {
			claim := f.newClaim(tt.claim, pool.GetName())
			tt.mutate(claim)
			require.NoError(t, k8s.Create(f.ctx, claim))
			address := f.waitBound(claim)

			got := &ipamv1.IPAddressClaim{}
			require.NoError(t, k8s.Get(f.ctx, client.ObjectKeyFromObject(claim), got))
			assert.Equal(t, tt.wantMachine, got.Annotations[v1alpha1.MachineNameAnnotation])

			var found bool
			for _, ip := range f.netboxRecords() {
				if ip.CustomFields["capi_ipam_claim"] == f.marker(tt.claim) {
					found = true
					assert.Equal(t, address.Spec.Address+"/24", ip.Address)
					assert.Equal(t, tt.wantMachine+"."+f.ns+".example.com", ip.DNSName)
					assert.Equal(t, tt.claim+" of Machine "+tt.wantMachine, ip.Description)
				}
			}
			assert.True(t, found, "no NetBox record for claim %s", tt.claim)
		})
	}
}
