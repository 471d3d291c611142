package subnet

import (
	"context"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/api/v1alpha1"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/internal/apitest"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/pkg/poolkind"
)

// netboxParents is a pool kind whose every pool may parent a subnet; the
// test never gets as far as making a child pool.
var netboxParents = poolkind.Kinds{{
	Kind: "NetboxIPPool", Namespaced: true,
	New:       func() poolkind.Pool { return &v1alpha1.NetboxIPPool{} },
	CanParent: func(poolkind.Pool) error { return nil },
	ChildPool: func(poolkind.Pool, netip.Prefix, v1alpha1.Gateway) (poolkind.Pool, error) {
		return &v1alpha1.NetboxIPPool{}, nil
	},
}}

func createSubnet(t *testing.T, c client.Client, ns, name, cluster string) *v1alpha1.ClusterSubnet {
	t.Helper()
	s := &v1alpha1.ClusterSubnet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1alpha1.ClusterSubnetSpec{ClusterName: cluster,
			ParentPoolRef: v1alpha1.SubnetParentReference{Kind: "NetboxIPPool", Name: "parent"}},
	}
	require.NoError(t, c.Create(context.Background(), s))
	return s
}

// clusterOfItsOwn is a namespace of the test's own with a Cluster in it.
func clusterOfItsOwn(t *testing.T) (client.Client, string, *clusterv1.Cluster) {
	t.Helper()
	_, c := apitest.Server(t)
	ns := apitest.Namespace(t, c)
	cluster := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "prod-a"},
		Spec: clusterv1.ClusterSpec{ClusterNetwork: clusterv1.ClusterNetwork{ServiceDomain: "cluster.local"}}}
	require.NoError(t, c.Create(context.Background(), cluster))
	return c, ns, cluster
}

// A new subnet's first reconcile writes its finalizer and its Cluster's
// ownership and goes on to claim its child: a fleet's carves are not held
// back by a wait for each write's own event.
func TestANewSubnetClaimsItsChildInItsFirstReconcile(t *testing.T) {
	c, ns, cluster := clusterOfItsOwn(t)
	ctx := context.Background()
	require.NoError(t, c.Create(ctx, &v1alpha1.NetboxIPPool{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "parent"},
		Spec: v1alpha1.NetboxIPPoolSpec{
			Connection: v1alpha1.NetboxConnection{URL: "https://netbox.example.com", CredentialsSecretRef: v1alpha1.SecretReference{Name: "netbox"}},
			Sources:    []v1alpha1.NetboxAddressSource{{Prefix: &v1alpha1.NetboxPrefixSource{ID: ptr.To[int32](1)}}},
		}}))
	subnet := createSubnet(t, c, ns, "prod-a", cluster.Name)

	r := &Reconciler{Client: c, APIReader: c, Recorder: events.NewFakeRecorder(10), Kinds: netboxParents}
	_, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(subnet)})
	require.NoError(t, err)

	got := &v1alpha1.ClusterSubnet{}
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(subnet), got))
	assert.True(t, controllerutil.ContainsFinalizer(got, v1alpha1.ClusterSubnetFinalizer))
	assert.True(t, ownedBy(got, cluster), "the Cluster owns its subnet: %v", got.OwnerReferences)
	child := &ipamv1.IPAddressClaim{}
	require.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: ns, Name: subnet.Name}, child), "the child's claim is made in the same reconcile")
	assert.True(t, metav1.IsControlledBy(child, got))
}

// The finalizer and the owner are written in one write locked to the
// subnet as read: a subnet read from a stale cache writes nothing and is
// left as read, one deleted meanwhile is let be, and one without its
// Cluster gets the finalizer alone. The owner is the Cluster there is, not
// the one a cache behind it holds.
func TestSubnetMetadataIsWrittenOnlyToTheSubnetAsRead(t *testing.T) {
	c, ns, cluster := clusterOfItsOwn(t)
	ctx := context.Background()
	// The cache still holds the Cluster deleted before this one was made
	// under its name.
	staleCopy := cluster.DeepCopy()
	staleCopy.UID = "00000000-0000-0000-0000-000000000000"
	for _, tc := range []struct {
		name, subnet string
		cluster      *clusterv1.Cluster
		meanwhile    func(t *testing.T, subnet *v1alpha1.ClusterSubnet)
		wantErr      func(error) bool
		wantOwner    bool
	}{
		{name: "a new subnet of an existing Cluster", subnet: "new", cluster: cluster, wantOwner: true},
		{name: "a subnet without its Cluster", subnet: "no-cluster"},
		{name: "its Cluster as a cache behind a new one holds it", subnet: "stale-cluster", cluster: staleCopy, wantOwner: true},
		{name: "changed since it was read", subnet: "changed", cluster: cluster, meanwhile: func(t *testing.T, subnet *v1alpha1.ClusterSubnet) {
			changed := subnet.DeepCopy()
			changed.Labels = map[string]string{"changed": "meanwhile"}
			require.NoError(t, c.Update(ctx, changed))
		}, wantErr: apierrors.IsConflict},
		{name: "deleted since it was read", subnet: "deleted", cluster: cluster, meanwhile: func(t *testing.T, subnet *v1alpha1.ClusterSubnet) {
			require.NoError(t, c.Delete(ctx, subnet.DeepCopy()))
		}, wantErr: apierrors.IsNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			subnet := createSubnet(t, c, ns, tc.subnet, cluster.Name)
			if tc.meanwhile != nil {
				tc.meanwhile(t, subnet)
			}
			read := subnet.DeepCopy()
			r := &Reconciler{Client: c, APIReader: c}
			err := r.writeMetadata(ctx, &scope{subnet: subnet, cluster: tc.cluster})

			stored := &v1alpha1.ClusterSubnet{}
			getErr := c.Get(ctx, client.ObjectKeyFromObject(subnet), stored)
			if tc.wantErr != nil {
				require.Error(t, err)
				assert.True(t, tc.wantErr(err), "%v", err)
				assert.Equal(t, read, subnet, "the subnet is left as read")
				if getErr == nil {
					assert.False(t, controllerutil.ContainsFinalizer(stored, v1alpha1.ClusterSubnetFinalizer), "nothing was written")
				}
				return
			}
			require.NoError(t, err)
			require.NoError(t, getErr)
			assert.True(t, controllerutil.ContainsFinalizer(stored, v1alpha1.ClusterSubnetFinalizer))
			assert.Equal(t, tc.wantOwner, ownedBy(stored, cluster))
			assert.False(t, ownedBy(stored, staleCopy), "never owned by a UID nothing has")
			assert.Equal(t, stored.ResourceVersion, subnet.ResourceVersion, "the reconcile goes on with the subnet as written")

			// Written once: a second call sends nothing.
			require.NoError(t, r.writeMetadata(ctx, &scope{subnet: subnet, cluster: tc.cluster}))
			again := &v1alpha1.ClusterSubnet{}
			require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(subnet), again))
			assert.Equal(t, stored.ResourceVersion, again.ResourceVersion)
		})
	}
}
