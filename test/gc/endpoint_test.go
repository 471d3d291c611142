package gc

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/api/v1alpha1"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/endpoint"
)

// A Cluster's control-plane endpoint, claimed from a pool for it, is
// released when the garbage collector deletes its claim after the Cluster,
// in either propagation mode; nothing is claimed again meanwhile.
func TestClusterDeletionReleasesItsEndpoint(t *testing.T) {
	for i, policy := range []metav1.DeletionPropagation{metav1.DeletePropagationBackground, metav1.DeletePropagationForeground} {
		t.Run(string(policy), func(t *testing.T) {
			forEachSystem(t, func(t *testing.T, sys system) {
				f := newFixture(t, sys)
				cidr := fmt.Sprintf("10.%d.0.0/24", 197+i)
				f.createPool("vips", cidr)
				cluster := &clusterv1.Cluster{
					ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "workload", Annotations: map[string]string{
						v1alpha1.ControlPlaneEndpointPoolAnnotation: sys.poolKind() + "/vips",
					}},
					Spec: clusterv1.ClusterSpec{ClusterNetwork: clusterv1.ClusterNetwork{ServiceDomain: "cluster.local"}},
				}
				require.NoError(t, k8s.Create(f.ctx, cluster))
				claim := &ipamv1.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: cluster.Name + endpoint.ClaimSuffix}}
				addresses := f.waitBound([]*ipamv1.IPAddressClaim{claim})
				require.EventuallyWithT(t, func(c *assert.CollectT) {
					got := &clusterv1.Cluster{}
					require.NoError(c, k8s.Get(f.ctx, client.ObjectKeyFromObject(cluster), got))
					assert.Equal(c, addresses[claim.Name].Spec.Address, got.Spec.ControlPlaneEndpoint.Host)
				}, waitTimeout, pollInterval)
				require.Len(t, sys.markedIn(f.ns), 1)
				allocations := sys.allocations()
				stop := f.watchAddresses()

				require.NoError(t, k8s.Delete(f.ctx, cluster, client.PropagationPolicy(policy)))
				f.waitGone(cluster, waitTimeout)
				if policy == metav1.DeletePropagationForeground {
					assert.Zero(t, f.countClaims(), "the Cluster outlives its endpoint's claim in the foreground")
				}
				f.waitNoneLeft()

				f.assertNothingRebuilt(stop(), allocations)
				f.assertReleased(cidr)
			})
		})
	}
}
