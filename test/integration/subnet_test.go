package integration

import (
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/api/v1alpha1"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/reasons"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/subnet"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/netboxsim"
)

// createSubnet asks for a subnet for cluster, carved by the parent pool.
func (f *fixture) createSubnet(name, cluster, parentKind, parent string, mutate ...func(*v1alpha1.ClusterSubnet)) *v1alpha1.ClusterSubnet {
	f.t.Helper()
	s := &v1alpha1.ClusterSubnet{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: name, Labels: f.labels()},
		Spec: v1alpha1.ClusterSubnetSpec{ClusterName: cluster,
			ParentPoolRef: v1alpha1.SubnetParentReference{Kind: parentKind, Name: parent}},
	}
	for _, m := range mutate {
		m(s)
	}
	require.NoError(f.t, k8s.Create(f.ctx, s))
	return s
}

// waitSubnet waits for the subnet's Ready condition to have status and
// reason, and returns the subnet as it then is.
func (f *fixture) waitSubnet(s *v1alpha1.ClusterSubnet, status metav1.ConditionStatus, reason string) *v1alpha1.ClusterSubnet {
	f.t.Helper()
	got := &v1alpha1.ClusterSubnet{}
	require.EventuallyWithT(f.t, func(c *assert.CollectT) {
		require.NoError(c, k8s.Get(f.ctx, client.ObjectKeyFromObject(s), got))
		cond := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ReadyCondition)
		require.NotNil(c, cond, "no Ready condition yet")
		assert.Equal(c, status, cond.Status, "%s: %s", cond.Reason, cond.Message)
		assert.Equal(c, reason, cond.Reason, cond.Message)
	}, waitTimeout, pollInterval)
	return got
}

func (f *fixture) getSubnetCondition(s *v1alpha1.ClusterSubnet) *metav1.Condition {
	got := &v1alpha1.ClusterSubnet{}
	require.NoError(f.t, k8s.Get(f.ctx, client.ObjectKeyFromObject(s), got))
	return meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ReadyCondition)
}

// A Cluster's subnet, end to end on NetBox: the child is carved with the
// subnet's claim's marker, its gateway is held by a record of its own, the
// nodes pool hands the machines addresses inside it with that gateway, a
// claim of the subnet deleted by hand keeps the child while machines use it,
// and deleting the subnet waits for the machines' addresses before the
// child, leaving the parent whole.
func TestAClusterSubnetIsCarvedServedAndReturnedOnNetBox(t *testing.T) {
	f := newFixture(t)
	const parent = "10.176.0.0/16"
	f.emptyContainer(parent)
	parentPool := f.createNetboxPool("clusters", parent, withChildPrefixes(24))
	f.waitPoolReady(parentPool)
	cluster := f.createCluster("prod-a")

	s := f.createSubnet("prod-a", "prod-a", "NetboxIPPool", "clusters")
	got := f.waitSubnet(s, metav1.ConditionTrue, v1alpha1.SubnetReadyReason)
	child := netip.MustParsePrefix(got.Status.Prefix)
	assert.Equal(t, 24, child.Bits())
	assert.True(t, netip.MustParsePrefix(parent).Contains(child.Addr()), "%s inside the parent", child)
	assert.Equal(t, child.Addr().Next().String(), got.Status.Gateway, "the first usable address")
	require.NotNil(t, got.Status.PoolRef)
	assert.Equal(t, v1alpha1.SubnetPoolReference{APIGroup: v1alpha1.GroupVersion.Group, Kind: "NetboxIPPool", Name: "prod-a-nodes"}, *got.Status.PoolRef)
	assert.True(t, metav1.IsControlledBy(got, cluster) || hasOwner(got, cluster), "the Cluster owns its subnet: %v", got.OwnerReferences)

	marked := f.childrenMarked(parent, f.marker("prod-a"))
	require.Len(t, marked, 1, "one child carries the subnet's claim's marker")
	assert.Equal(t, child.String(), marked[0].Prefix)
	gateway := f.recordsWithMarker(f.marker("prod-a" + subnet.GatewaySuffix))
	require.Len(t, gateway, 1, "the gateway is held by a record of its own")
	assert.Equal(t, got.Status.Gateway, gateway[0].Address.Addr().String())

	machine := f.createClaim("prod-a-md-0-abc", "prod-a-nodes", inCluster("prod-a"))
	address := f.waitBound(machine)
	addr := netip.MustParseAddr(address.Spec.Address)
	assert.True(t, child.Contains(addr), "the machine's %s inside %s", addr, child)
	assert.NotEqual(t, got.Status.Gateway, address.Spec.Address, "never the router's address")
	assert.Equal(t, got.Status.Gateway, address.Spec.Gateway)
	require.NotNil(t, address.Spec.Prefix)
	assert.Equal(t, int32(24), *address.Spec.Prefix)

	// The subnet's own claim deleted by hand while a machine uses the
	// child: the child stays, and so does the subnet.
	require.NoError(t, k8s.Delete(f.ctx, &ipamv1.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "prod-a"}}))
	f.waitClaimCondition(&ipamv1.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "prod-a"}},
		ipamv1.IPAddressClaimReadyCondition, reasons.AddressKeptReason)
	assert.Len(t, f.childrenMarked(parent, f.marker("prod-a")), 1, "the child is kept")
	require.Never(t, func() bool { return f.getSubnetCondition(s).Status != metav1.ConditionTrue }, 3*time.Second, pollInterval,
		"the subnet stays ready while its claim is kept")

	// Deleting the subnet waits for the machine's address first.
	require.NoError(t, k8s.Delete(f.ctx, s))
	waiting := f.waitSubnet(s, metav1.ConditionFalse, v1alpha1.SubnetDeletingReason)
	assert.Contains(t, meta.FindStatusCondition(waiting.Status.Conditions, v1alpha1.ReadyCondition).Message, "prod-a-nodes")
	assert.Len(t, f.childrenMarked(parent, f.marker("prod-a")), 1, "the child stays while a machine holds an address in it")
	assert.Len(t, f.recordsWithMarker(f.marker("prod-a-md-0-abc")), 1)
	assert.Len(t, f.recordsWithMarker(f.marker("prod-a"+subnet.GatewaySuffix)), 1, "the gateway stays while a machine uses it")

	f.deleteClaim(machine)
	f.waitGone(s)
	assert.Empty(t, f.sim.PrefixesWithin(parent), "the parent is whole again")
	assert.Empty(t, f.markedRecords(), "no record of the machine or the gateway is left")
	for _, name := range []string{"prod-a-nodes", "prod-a" + subnet.GatewaySuffix} {
		f.waitGone(&v1alpha1.NetboxIPPool{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: name}})
	}
}

func hasOwner(o metav1.Object, owner metav1.Object) bool {
	for _, ref := range o.GetOwnerReferences() {
		if ref.UID == owner.GetUID() {
			return true
		}
	}
	return false
}

// A subnet whose parent is full waits and says so with the claim's reason,
// naming the parent; a subnet of a pool that hands out addresses is refused
// before anything is claimed; a name in use is left alone.
func TestAClusterSubnetSaysWhyItWaits(t *testing.T) {
	f := newFixture(t)
	const parent = "10.177.0.0/22"
	f.emptyContainer(parent)
	parentPool := f.createNetboxPool("small", parent, withChildPrefixes(24))
	f.waitPoolReady(parentPool)
	f.createCluster("a")
	f.createCluster("b")
	f.createCluster("c")
	f.waitSubnet(f.createSubnet("a", "a", "NetboxIPPool", "small", func(s *v1alpha1.ClusterSubnet) {
		s.Spec.Pool.GatewayPolicy = v1alpha1.GatewayNone
	}), metav1.ConditionTrue, v1alpha1.SubnetReadyReason)
	b := f.waitSubnet(f.createSubnet("b", "b", "NetboxIPPool", "small", func(s *v1alpha1.ClusterSubnet) {
		s.Spec.Pool.GatewayPolicy = v1alpha1.GatewayNone
	}), metav1.ConditionTrue, v1alpha1.SubnetReadyReason)
	assert.Empty(t, b.Status.Gateway, "gatewayPolicy None holds no gateway")
	assert.Empty(t, f.markedRecords(), "and reserves nothing")

	// Nothing is made for a Cluster that does not exist yet; its creation
	// brings the subnet back.
	late := f.waitSubnet(f.createSubnet("late", "late", "NetboxIPPool", "small", func(s *v1alpha1.ClusterSubnet) {
		s.Spec.Pool.GatewayPolicy = v1alpha1.GatewayNone
	}), metav1.ConditionFalse, v1alpha1.SubnetClusterNotFoundReason)
	assert.Empty(t, k8sClaimsNamed(f, "late"), "nothing claimed before the Cluster exists")
	f.createCluster("late")
	f.waitSubnet(late, metav1.ConditionTrue, v1alpha1.SubnetReadyReason)

	// The nodes pool cannot change: machines hold addresses from it.
	var err error
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		renamed := &v1alpha1.ClusterSubnet{}
		require.NoError(c, k8s.Get(f.ctx, client.ObjectKeyFromObject(late), renamed))
		renamed.Spec.Pool.Name = "elsewhere"
		err = k8s.Update(f.ctx, renamed)
		assert.False(c, apierrors.IsConflict(err), "%v", err)
	}, waitTimeout, pollInterval)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "pool cannot be added, removed or changed")

	f.createCluster("fourth")
	f.waitSubnet(f.createSubnet("fourth", "fourth", "NetboxIPPool", "small", func(s *v1alpha1.ClusterSubnet) {
		s.Spec.Pool.GatewayPolicy = v1alpha1.GatewayNone
	}), metav1.ConditionTrue, v1alpha1.SubnetReadyReason)
	full := f.waitSubnet(f.createSubnet("c", "c", "NetboxIPPool", "small"), metav1.ConditionFalse, "PoolExhausted")
	cond := meta.FindStatusCondition(full.Status.Conditions, v1alpha1.ReadyCondition)
	assert.Contains(t, cond.Message, "NetboxIPPool small")
	assert.Empty(t, full.Status.Prefix)
	// Nor added to a subnet made without one (a field's own rule would
	// not see an absent old value).
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		added := &v1alpha1.ClusterSubnet{}
		require.NoError(c, k8s.Get(f.ctx, client.ObjectKey{Namespace: f.ns, Name: "c"}, added))
		require.Empty(c, added.Spec.Pool.Name)
		added.Spec.Pool.Name = "elsewhere"
		err = k8s.Update(f.ctx, added)
		assert.False(c, apierrors.IsConflict(err), "%v", err)
	}, waitTimeout, pollInterval)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "pool cannot be added, removed or changed")

	f.seedPrefix("10.178.0.0/24", netboxsim.PrefixOptions{})
	addresses := f.createNetboxPool("addresses", "10.178.0.0/24")
	f.waitPoolReady(addresses)
	f.createCluster("d")
	f.createCluster("e")
	refused := f.waitSubnet(f.createSubnet("d", "d", "NetboxIPPool", "addresses"), metav1.ConditionFalse, v1alpha1.ParentPoolUnsupportedReason)
	assert.Contains(t, meta.FindStatusCondition(refused.Status.Conditions, v1alpha1.ReadyCondition).Message, "childPrefixes")
	f.waitSubnet(f.createSubnet("e", "e", "NetboxIPPool", "missing"), metav1.ConditionFalse, v1alpha1.ParentPoolNotFoundReason)
	for _, name := range []string{"d", "e"} {
		assert.Empty(t, k8sClaimsNamed(f, name), "nothing claimed for subnet %s", name)
	}

	// A claim named as the subnet's, made by someone else, is not taken.
	f.createCluster("taken")
	f.createClaim("taken", "addresses")
	f.waitSubnet(f.createSubnet("taken", "taken", "NetboxIPPool", "small"), metav1.ConditionFalse, v1alpha1.NameTakenReason)
	f.waitEvent(f.ns, "taken", v1alpha1.NameTakenReason)

	// A nodes pool's name that another pool holds is found before anything
	// is carved.
	f.createCluster("other")
	f.createNetboxPool("other-nodes", "10.178.0.0/24")
	named := f.waitSubnet(f.createSubnet("other", "other", "NetboxIPPool", "small"), metav1.ConditionFalse, v1alpha1.NameTakenReason)
	assert.Contains(t, meta.FindStatusCondition(named.Status.Conditions, v1alpha1.ReadyCondition).Message, "NetboxIPPool other-nodes")
	assert.Empty(t, k8sClaimsNamed(f, "other"), "nothing carved for a subnet that could not make its pool")

	// A second subnet for one Cluster names the same nodes pool: the older
	// subnet keeps it, and nothing is carved for the younger.
	twin := f.waitSubnet(f.createSubnet("twin", "a", "NetboxIPPool", "small"), metav1.ConditionFalse, v1alpha1.NameTakenReason)
	assert.Contains(t, meta.FindStatusCondition(twin.Status.Conditions, v1alpha1.ReadyCondition).Message, "ClusterSubnet a's nodes pool")
	assert.Empty(t, k8sClaimsNamed(f, "twin"))
}

func k8sClaimsNamed(f *fixture, name string) []ipamv1.IPAddressClaim {
	claims := &ipamv1.IPAddressClaimList{}
	require.NoError(f.t, k8s.List(f.ctx, claims, client.InNamespace(f.ns)))
	var out []ipamv1.IPAddressClaim
	for _, c := range claims.Items {
		if c.Name == name {
			out = append(out, c)
		}
	}
	return out
}

// A Cluster's subnet on Infoblox: a child network of the parent's network
// container, its gateway held by a fixed address, the machines' fixed
// addresses inside it, and the container empty again after the subnet is
// deleted.
func TestAClusterSubnetIsCarvedServedAndReturnedOnInfoblox(t *testing.T) {
	f := newInfobloxFixture(t)
	sys := f.sys.(*infobloxSystem)
	const parent = "10.179.0.0/20"
	f.infobloxCarvingParent("clusters", parent, 26)
	f.createCluster("edge")

	s := f.createSubnet("edge", "edge", "InfobloxIPPool", "clusters")
	got := f.waitSubnet(s, metav1.ConditionTrue, v1alpha1.SubnetReadyReason)
	child := netip.MustParsePrefix(got.Status.Prefix)
	assert.Equal(t, "10.179.0.0/26", child.String(), "the container's first block")
	assert.Equal(t, "10.179.0.1", got.Status.Gateway)
	networks := func() []string {
		var out []string
		for _, o := range sys.sim.Objects("network") {
			if netip.MustParsePrefix(parent).Contains(o.Prefix.Addr()) {
				out = append(out, o.Prefix.String()+" "+o.EAs["CAPI-IPAM-Claim"])
			}
		}
		return out
	}
	assert.Equal(t, []string{child.String() + " " + f.marker("edge")}, networks())
	assert.True(t, sys.holds(netip.MustParseAddr("10.179.0.1")), "the gateway is held")

	machine := f.createClaim("edge-md-0-xyz", "edge-nodes", poolRef("InfobloxIPPool", "edge-nodes"), inCluster("edge"))
	address := f.waitBound(machine)
	assert.True(t, child.Contains(netip.MustParseAddr(address.Spec.Address)))
	assert.Equal(t, "10.179.0.1", address.Spec.Gateway)

	require.NoError(t, k8s.Delete(f.ctx, s))
	f.waitSubnet(s, metav1.ConditionFalse, v1alpha1.SubnetDeletingReason)
	assert.Len(t, networks(), 1, "the child stays while a machine holds an address in it")
	f.deleteClaim(machine)
	defer func() {
		if t.Failed() {
			t.Logf("subnet: %+v", f.getSubnetCondition(s))
			claims := &ipamv1.IPAddressClaimList{}
			_ = k8s.List(f.ctx, claims, client.InNamespace(f.ns))
			for _, c := range claims.Items {
				t.Logf("claim %s deleting=%v finalizers=%v conditions=%+v", c.Name, c.DeletionTimestamp, c.Finalizers, c.Status.Conditions)
			}
			pools := &v1alpha1.InfobloxIPPoolList{}
			_ = k8s.List(f.ctx, pools, client.InNamespace(f.ns))
			for _, p := range pools.Items {
				t.Logf("pool %s deleting=%v conditions=%+v", p.Name, p.DeletionTimestamp, p.Status.Conditions)
			}
		}
	}()
	f.waitGone(s)
	assert.Empty(t, networks(), "the container is empty again")
	assert.Empty(t, f.markedRecords())
}

// An IPv6 subnet: a /64 of a /56 for the Cluster, its gateway the /64's
// first usable address (::1), the machines' addresses inside it.
func TestAClusterSubnetOfIPv6(t *testing.T) {
	f := newFixture(t)
	const parent = "2001:db8:150::/56"
	f.emptyContainer(parent)
	f.waitPoolReady(f.createNetboxPool("clusters-v6", parent, withChildPrefixes(64)))
	f.createCluster("v6")
	got := f.waitSubnet(f.createSubnet("v6", "v6", "NetboxIPPool", "clusters-v6"), metav1.ConditionTrue, v1alpha1.SubnetReadyReason)
	child := netip.MustParsePrefix(got.Status.Prefix)
	assert.Equal(t, "2001:db8:150::/64", child.String(), "the parent's first block")
	assert.Equal(t, "2001:db8:150::1", got.Status.Gateway)

	address := f.waitBound(f.createClaim("v6-md-0-abc", "v6-nodes", inCluster("v6")))
	assert.True(t, child.Contains(netip.MustParseAddr(address.Spec.Address)), "%s inside %s", address.Spec.Address, child)
	assert.NotEqual(t, "2001:db8:150::1", address.Spec.Address)
	assert.Equal(t, "2001:db8:150::1", address.Spec.Gateway)
	assert.Equal(t, int32(64), *address.Spec.Prefix)
}

// The manager binary killed while a fleet's subnets are carved, and again
// while they are deleted: each subnet ends with one child, one gateway
// record and its nodes pool, and the parent is whole after the deletion.
func TestClusterSubnetsSurviveTheirManagerKilledMidway(t *testing.T) {
	bin := managerBinary(t)
	f := newFixture(t)
	f.filter = "subnetkill-" + f.ns
	const parent = "10.181.0.0/20"
	f.emptyContainer(parent)
	mgr := startManagerProcess(t, bin, f.filter)
	f.waitPoolReady(f.createNetboxPool("clusters", parent, withChildPrefixes(24)))

	names := []string{"k0", "k1", "k2", "k3", "k4", "k5"}
	var subnets []*v1alpha1.ClusterSubnet
	for _, name := range names {
		f.createCluster(name)
		subnets = append(subnets, f.createSubnet(name, name, "NetboxIPPool", "clusters"))
	}
	some := func(done func(*v1alpha1.ClusterSubnet) bool) func() bool {
		return func() bool {
			list := &v1alpha1.ClusterSubnetList{}
			if err := k8s.List(f.ctx, list, client.InNamespace(f.ns)); err != nil {
				return false
			}
			for i := range list.Items {
				if done(&list.Items[i]) {
					return true
				}
			}
			return len(list.Items) < len(names)
		}
	}
	require.Eventually(t, some(func(s *v1alpha1.ClusterSubnet) bool { return s.Status.Prefix != "" }), waitTimeout, 20*time.Millisecond)
	mgr.Kill()
	require.NoError(t, mgr.Start())

	prefixes := map[string]bool{}
	for _, s := range subnets {
		got := f.waitSubnet(s, metav1.ConditionTrue, v1alpha1.SubnetReadyReason)
		prefixes[got.Status.Prefix] = true
		assert.Len(t, f.childrenMarked(parent, f.marker(s.Name)), 1, "%s: one child", s.Name)
		assert.Len(t, f.recordsWithMarker(f.marker(s.Name+subnet.GatewaySuffix)), 1, "%s: one gateway record", s.Name)
	}
	assert.Len(t, prefixes, len(names), "every subnet its own child")
	assert.Len(t, f.sim.PrefixesWithin(parent), len(names), "and no other")

	for _, s := range subnets {
		require.NoError(t, k8s.Delete(f.ctx, s))
	}
	require.Eventually(t, some(func(s *v1alpha1.ClusterSubnet) bool {
		c := meta.FindStatusCondition(s.Status.Conditions, v1alpha1.ReadyCondition)
		return c != nil && c.Reason == v1alpha1.SubnetDeletingReason
	}), waitTimeout, 20*time.Millisecond)
	mgr.Kill()
	require.NoError(t, mgr.Start())
	for _, s := range subnets {
		f.waitGone(s)
	}
	assert.Empty(t, f.sim.PrefixesWithin(parent), "the parent is whole again")
	assert.Empty(t, f.markedRecords(), "no gateway record is left")
	mgr.Stop()
}

// infobloxCarvingParent makes parent a network container and a ready
// InfobloxIPPool name carving children of length from it.
func (f *fixture) infobloxCarvingParent(name, parent string, length int32) *v1alpha1.InfobloxIPPool {
	f.t.Helper()
	f.sys.(*infobloxSystem).sim.AddNetworkContainer("default", parent)
	pool := f.sys.newPool(f.ns, name, parent, f.secret, false).(*v1alpha1.InfobloxIPPool)
	pool.Spec.ChildPrefixes = &v1alpha1.ChildPrefixes{Length: length}
	pool.SetLabels(f.labels())
	require.NoError(f.t, k8s.Create(f.ctx, pool))
	f.waitPoolReady(pool)
	return pool
}
