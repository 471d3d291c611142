package integration

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/api/v1alpha1"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/endpoint"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/reasons"
)

// The VIP's three promises, with the manager binary as its own process and
// one small pool (a /29: five addresses) shared with machines: a Cluster
// whose endpoint claim is deleted keeps its VIP, a VIP picked by hand is
// reserved, so that the machines that then fill the pool get neither; and
// a Cluster that opts in to the full pool says on itself that it waits.
func TestControlPlaneEndpointPromisesWithTheManagerBinary(t *testing.T) {
	bin := managerBinary(t)
	forEachSystem(t, func(t *testing.T, f *fixture) {
		f.filter = "endpoint-e2e-" + f.ns
		mgr := startManagerProcess(t, bin, f.filter)
		f.seedNetwork("10.159.0.0/29")
		pool := f.createPool("vips", "10.159.0.0/29")
		f.waitPoolReady(pool)
		optIn := f.optIn(v1alpha1.ControlPlaneEndpointPoolAnnotation, f.sys.poolKind(false)+"/vips")

		kept := f.createCluster("kept", optIn)
		keptClaim := f.endpointClaim(kept.Name)
		keptVIP := f.waitBound(keptClaim).Spec.Address
		// The VIP is the Cluster's once it is written into its endpoint; a
		// claim deleted before that is released, as nothing uses it yet.
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			got := &clusterv1.Cluster{}
			require.NoError(c, k8s.Get(f.ctx, client.ObjectKeyFromObject(kept), got))
			assert.Equal(c, keptVIP, got.Spec.ControlPlaneEndpoint.Host)
		}, waitTimeout, pollInterval)
		require.NoError(t, k8s.Delete(f.ctx, keptClaim))
		f.waitClaimReason(keptClaim, reasons.AddressKeptReason)
		f.waitEvent(f.ns, kept.Name, endpoint.ControlPlaneEndpointKeptReason)

		const handPicked = "10.159.0.6"
		picked := f.createCluster("picked", optIn, func(c *clusterv1.Cluster) {
			c.Spec.ControlPlaneEndpoint = clusterv1.APIEndpoint{Host: handPicked, Port: 6443}
		})
		assert.Equal(t, handPicked, f.waitBound(f.endpointClaim(picked.Name)).Spec.Address, "exactly the address picked by hand")

		// Machines fill what is left: three of the four get an address, and
		// none the VIPs.
		machines := make([]*ipamv1.IPAddressClaim, 4)
		for i := range machines {
			machines[i] = f.createClaim(fmt.Sprintf("machine-%d", i), "vips")
		}
		var given []string
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			given = nil
			exhausted := 0
			for _, m := range machines {
				got := &ipamv1.IPAddressClaim{}
				require.NoError(c, k8s.Get(f.ctx, client.ObjectKeyFromObject(m), got))
				ready := conditions.Get(got, ipamv1.IPAddressClaimReadyCondition)
				switch {
				case got.Status.AddressRef.Name != "":
					address := &ipamv1.IPAddress{}
					require.NoError(c, k8s.Get(f.ctx, client.ObjectKeyFromObject(m), address))
					given = append(given, address.Spec.Address)
				case ready != nil && ready.Reason == ipamv1.IPAddressClaimReadyPoolExhaustedReason:
					exhausted++
				}
			}
			assert.Len(c, given, 3)
			assert.Equal(c, 1, exhausted)
		}, waitTimeout, pollInterval)
		assert.NotContains(t, given, keptVIP, "no machine is given the VIP whose claim was deleted")
		assert.NotContains(t, given, handPicked, "no machine is given the VIP picked by hand")
		assert.Len(t, f.recordsWithMarker(f.marker(keptClaim.Name)), 1, "the IPAM system still holds the kept VIP")

		waiting := f.createCluster("waiting", optIn)
		e := f.waitEvent(f.ns, waiting.Name, endpoint.ControlPlaneEndpointWaitingReason)
		assert.Equal(t, corev1.EventTypeWarning, e.Type)
		assert.Contains(t, e.Note, ipamv1.IPAddressClaimReadyPoolExhaustedReason, "the Cluster says why it waits")
		t.Logf("%s, manager binary: VIP %s kept after its claim was deleted, %s picked by hand reserved, machines got %v, and Cluster %s says: %s",
			f.sys.name(), keptVIP, handPicked, given, waiting.Name, e.Note)
		mgr.Stop()
	})
}
