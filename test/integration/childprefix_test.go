package integration

import (
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/api/v1alpha1"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/pkg/poolkind"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/httpfault"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/netboxsim"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/wapisim"
)

func withChildPrefixes(length int32) poolOption {
	return func(spec *v1alpha1.NetboxIPPoolSpec) {
		spec.ChildPrefixes = &v1alpha1.NetboxChildPrefixes{ChildPrefixes: v1alpha1.ChildPrefixes{Length: length}}
	}
}

// emptyContainer makes parent a container prefix with nothing inside, and
// empties it again when the test ends (a real NetBox outlives the run).
func (f *fixture) emptyContainer(parent string) {
	f.sim.AddPrefix(parent, netboxsim.PrefixOptions{Status: "container"})
	clear := func() {
		for _, p := range f.sim.PrefixesWithin(parent) {
			f.sim.DeletePrefix(p.ID)
		}
	}
	clear()
	f.t.Cleanup(clear)
}

// childrenMarked lists the prefixes inside parent that carry marker.
func (f *fixture) childrenMarked(parent, marker string) []netboxsim.Prefix {
	var out []netboxsim.Prefix
	for _, p := range f.sim.PrefixesWithin(parent) {
		if p.CustomFields["capi_ipam_claim"] == marker {
			out = append(out, p)
		}
	}
	return out
}

// A pool with childPrefixes hands each claim a child of its parent, as the
// in-cluster provider's prefix pools do: the IPAddress holds the child's
// network address and length and no gateway; the child carries the claim's
// marker and description; deleting the claim deletes the child and frees
// its block.
func TestAClaimOfAChildPrefixPoolGetsAChildPrefix(t *testing.T) {
	f := newFixture(t)
	const parent = "2001:db8:42::/56"
	f.emptyContainer(parent)
	pool := f.createNetboxPool("nodes-v6", parent, withChildPrefixes(64))
	f.waitPoolReady(pool)

	first := f.createClaim("node-a", "nodes-v6")
	second := f.createClaim("node-b", "nodes-v6")
	a, b := f.waitBound(first), f.waitBound(second)
	for _, address := range []struct {
		name, got string
		prefix    *int32
		gateway   string
	}{{"node-a", a.Spec.Address, a.Spec.Prefix, a.Spec.Gateway}, {"node-b", b.Spec.Address, b.Spec.Prefix, b.Spec.Gateway}} {
		require.NotNil(t, address.prefix, address.name)
		child := netip.PrefixFrom(netip.MustParseAddr(address.got), int(*address.prefix))
		assert.Equal(t, 64, child.Bits(), "%s: the child's length", address.name)
		assert.Equal(t, child.Masked(), child, "%s: the child's network address", address.name)
		assert.True(t, netip.MustParsePrefix(parent).Contains(child.Addr()), "%s: inside the parent", address.name)
		assert.Empty(t, address.gateway, "%s: a child has no gateway", address.name)
		marked := f.childrenMarked(parent, f.marker(address.name))
		require.Len(t, marked, 1, "%s: one child carries the claim's marker", address.name)
		assert.Equal(t, child.String(), marked[0].Prefix)
		assert.Contains(t, marked[0].Description, address.name, "the IPAM team sees who holds it")
	}
	assert.NotEqual(t, a.Spec.Address, b.Spec.Address)

	f.deleteClaim(first)
	f.waitGone(first)
	assert.Empty(t, f.childrenMarked(parent, f.marker("node-a")), "the released child is deleted")
	assert.Len(t, f.childrenMarked(parent, f.marker("node-b")), 1, "the other is kept")

	require.EventuallyWithT(t, func(c *assert.CollectT) {
		got := &v1alpha1.NetboxIPPool{}
		require.NoError(c, k8s.Get(f.ctx, client.ObjectKeyFromObject(pool), got))
		require.NotNil(c, got.Status.Addresses)
		assert.Equal(c, int64(256), got.Status.Addresses.Total, "counted in /64s")
		assert.Equal(c, int64(1), got.Status.Addresses.Used)
	}, waitTimeout, pollInterval)
}

// A child the IPAM team deleted while its machine still uses it is
// reported, never carved again elsewhere: NetBox carves only the next free
// block atomically, and a plain create of the same block could race a carve.
func TestAChildDeletedInNetBoxIsReportedNotCarvedAgain(t *testing.T) {
	f := newFixture(t)
	const parent = "10.143.0.0/22"
	f.emptyContainer(parent)
	pool := f.createNetboxPool("nodes", parent, withChildPrefixes(26))
	f.waitPoolReady(pool)
	claim := f.createClaim("node", "nodes")
	address := f.waitBound(claim)
	f.audit(pool)
	marked := f.childrenMarked(parent, f.marker("node"))
	require.Len(t, marked, 1)
	f.sim.DeletePrefix(marked[0].ID)

	report := f.audit(pool)
	deleted := findings(report, v1alpha1.FindingDeleted)
	require.Len(t, deleted, 1, "%+v; pool: %s", report, f.auditedCondition(pool))
	assert.Equal(t, address.Spec.Address, deleted[0].Address)
	cond := f.waitClaimCondition(claim, v1alpha1.AddressReservedCondition, v1alpha1.RecordDeletedReason)
	assert.Equal(t, metav1.ConditionFalse, cond.Status)
	assert.Contains(t, cond.Message, "cannot hold it again")
	f.waitEvent(f.ns, address.Name, v1alpha1.RecordDeletedReason)
	assert.Empty(t, f.sim.PrefixesWithin(parent), "nothing carved again")
	assert.True(t, conditions.IsTrue(f.getClaim(claim), ipamv1.IPAddressClaimReadyCondition), "the claim keeps its IPAddress")
}

// An Infoblox pool with childPrefixes carves each claim a child network of
// its network container, with func:nextavailablenetwork, and deletes it
// with the claim.
func TestAClaimOfAnInfobloxChildPrefixPoolGetsAChildNetwork(t *testing.T) {
	f := newInfobloxFixture(t)
	sys := f.sys.(*infobloxSystem)
	const parent = "2001:db8:43::/56"
	sys.sim.AddNetworkContainer("default", parent)
	pool := f.sys.newPool(f.ns, "nodes-v6", parent, f.secret, false).(*v1alpha1.InfobloxIPPool)
	pool.Spec.ChildPrefixes = &v1alpha1.ChildPrefixes{Length: 64}
	pool.SetLabels(f.labels())
	require.NoError(t, k8s.Create(f.ctx, pool))
	f.waitPoolReady(pool)

	claim := f.createClaim("node-a", "nodes-v6")
	address := f.waitBound(claim)
	require.NotNil(t, address.Spec.Prefix)
	child := netip.PrefixFrom(netip.MustParseAddr(address.Spec.Address), int(*address.Spec.Prefix))
	assert.Equal(t, "2001:db8:43::/64", child.String(), "the container's first block")
	assert.Empty(t, address.Spec.Gateway)
	networks := func() []string {
		var out []string
		for _, o := range sys.sim.Objects("ipv6network") {
			if o.EAs["CAPI-IPAM-Claim"] == f.marker("node-a") {
				out = append(out, o.Prefix.String())
			}
		}
		return out
	}
	assert.Equal(t, []string{child.String()}, networks(), "one child network carries the claim's marker")

	f.deleteClaim(claim)
	f.waitGone(claim)
	assert.Empty(t, networks(), "the released child is deleted")
}

// A pool's claims hold records of one kind and length: childPrefixes can
// be neither added, removed nor changed once the pool exists.
func TestChildPrefixesCannotChangeOnAPool(t *testing.T) {
	f := newFixture(t)
	carving := f.createNetboxPool("carving", "10.144.0.0/16", withChildPrefixes(24))
	plain := f.createNetboxPool("plain", "10.145.0.0/24")
	for _, tc := range []struct {
		name string
		pool *v1alpha1.NetboxIPPool
		edit func(*v1alpha1.NetboxIPPoolSpec)
	}{
		{"removed", carving, func(s *v1alpha1.NetboxIPPoolSpec) { s.ChildPrefixes = nil }},
		{"changed", carving, func(s *v1alpha1.NetboxIPPoolSpec) {
			s.ChildPrefixes = &v1alpha1.NetboxChildPrefixes{ChildPrefixes: v1alpha1.ChildPrefixes{Length: 26}}
		}},
		{"added", plain, func(s *v1alpha1.NetboxIPPoolSpec) {
			s.ChildPrefixes = &v1alpha1.NetboxChildPrefixes{ChildPrefixes: v1alpha1.ChildPrefixes{Length: 28}}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := &v1alpha1.NetboxIPPool{}
			require.NoError(t, k8s.Get(f.ctx, client.ObjectKeyFromObject(tc.pool), got))
			tc.edit(&got.Spec)
			err := k8s.Update(f.ctx, got)
			require.Error(t, err)
			assert.Contains(t, err.Error(), "childPrefixes cannot be added, removed or changed")
		})
	}
}

// createCarvingPool creates a pool of the fixture's system carving children
// of length from parent, a container the system holds with nothing inside.
func (f *fixture) createCarvingPool(name, parent string, length int32) poolkind.Pool {
	f.t.Helper()
	if f.sim != nil {
		f.emptyContainer(parent)
		return f.createNetboxPool(name, parent, withChildPrefixes(length))
	}
	sys := f.sys.(*infobloxSystem)
	sys.sim.AddNetworkContainer("default", parent)
	pool := sys.newPool(f.ns, name, parent, f.secret, false).(*v1alpha1.InfobloxIPPool)
	pool.Spec.ChildPrefixes = &v1alpha1.ChildPrefixes{Length: length}
	pool.SetLabels(f.labels())
	require.NoError(f.t, k8s.Create(f.ctx, pool))
	return pool
}

// holdNextCarve holds the next carve in the system until gate closes, and
// says when it arrived.
func (f *fixture) holdNextCarve(gate <-chan struct{}) <-chan struct{} {
	arrived := make(chan struct{})
	if f.sim != nil {
		f.sim.InjectFault(netboxsim.Fault{Kind: httpfault.Before, Method: "POST", PathContains: "/available-prefixes/", Then: holdUntil(arrived, gate)})
		return arrived
	}
	f.sys.(*infobloxSystem).sim.InjectFault(wapisim.Fault{Kind: httpfault.Before, Method: "POST", BodyContains: "func:nextavailablenetwork", Then: holdUntil(arrived, gate)})
	return arrived
}

// childrenOf lists the children inside parent that carry marker.
func (f *fixture) childrenOf(parent, marker string) []netip.Prefix {
	var out []netip.Prefix
	if f.sim != nil {
		for _, p := range f.childrenMarked(parent, marker) {
			out = append(out, netip.MustParsePrefix(p.Prefix))
		}
		return out
	}
	for _, t := range []string{"network", "ipv6network"} {
		for _, o := range f.sys.(*infobloxSystem).sim.Objects(t) {
			if o.EAs["CAPI-IPAM-Claim"] == marker && netip.MustParsePrefix(parent).Contains(o.Prefix.Addr()) {
				out = append(out, o.Prefix)
			}
		}
	}
	return out
}

// A carve that the IPAM system holds outlives the manager that sent it
// (SIGKILLed mid-carve): the successor carves the claim's child anew, and
// the held carve lands afterwards, a second child for one claim. Within the
// late-record window the claim holds one child again, the one its
// IPAddress names.
func TestACarveThatLandsAfterItsManagerDiedIsDeletedSoon(t *testing.T) {
	bin := managerBinary(t)
	forEachSystem(t, func(t *testing.T, f *fixture) {
		const window = 40 * time.Second
		const parent = "10.146.0.0/22"
		f.filter = "latecarve-" + f.ns
		f.createCarvingPool("carving", parent, 26)
		gate := make(chan struct{})
		arrived := f.holdNextCarve(gate)
		t.Cleanup(func() {
			select {
			case <-gate:
			default:
				close(gate)
			}
		})
		mgr := startManagerProcess(t, bin, f.filter, "--late-record-window="+window.String())
		claim := f.createClaim("late-child", "carving")
		select {
		case <-arrived:
		case <-time.After(waitTimeout):
			t.Fatal("the claim's carve never reached the IPAM system")
		}
		mgr.Kill()
		require.NoError(t, mgr.Start())
		address := f.waitBound(claim)
		require.NotNil(t, address.Spec.Prefix)
		bound := netip.PrefixFrom(netip.MustParseAddr(address.Spec.Address), int(*address.Spec.Prefix))

		close(gate)
		marker := f.marker(claim.Name)
		require.Eventually(t, func() bool { return len(f.childrenOf(parent, marker)) == 2 }, waitTimeout, 50*time.Millisecond,
			"the dead manager's carve lands after its successor bound the claim")
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			children := f.childrenOf(parent, marker)
			if assert.Len(c, children, 1, "the late child is deleted") {
				assert.Equal(c, bound, children[0], "the child kept is the one the IPAddress names")
			}
		}, window+waitTimeout, 200*time.Millisecond)
		mgr.Stop()
	})
}

// A carving pool's children get the prefix role and the scope the pool
// names, resolved in NetBox by slug; a role NetBox does not have keeps the
// pool from validating, naming it, before anything is carved.
func TestACarvingPoolGivesItsChildrenARoleAndAScope(t *testing.T) {
	f := newFixture(t)
	const parent = "10.185.0.0/20"
	f.emptyContainer(parent)
	f.sim.AddRole("Cluster Nodes", "cluster-nodes")
	f.sim.AddScope("dcim.site", "Carve Site A", "carve-site-a")
	pool := f.createNetboxPool("scoped-children", parent, func(spec *v1alpha1.NetboxIPPoolSpec) {
		spec.ChildPrefixes = &v1alpha1.NetboxChildPrefixes{ChildPrefixes: v1alpha1.ChildPrefixes{Length: 24},
			Role: "cluster-nodes", Scope: &v1alpha1.NetboxPrefixScope{Kind: "Site", Slug: "carve-site-a"}}
	})
	f.waitPoolReady(pool)
	claim := f.createClaim("scoped-child", pool.Name)
	address := f.waitBound(claim)

	children := f.childrenMarked(parent, f.marker(claim.Name))
	require.Len(t, children, 1)
	assert.Equal(t, address.Spec.Address+"/24", children[0].Prefix)
	assert.Equal(t, "cluster-nodes", children[0].Role)
	assert.Equal(t, "dcim.site", children[0].ScopeType)
	assert.Equal(t, "carve-site-a", children[0].Scope)

	missing := f.createNetboxPool("unknown-role", parent, func(spec *v1alpha1.NetboxIPPoolSpec) {
		spec.ChildPrefixes = &v1alpha1.NetboxChildPrefixes{ChildPrefixes: v1alpha1.ChildPrefixes{Length: 24}, Role: "no-such-role"}
	})
	cond := f.waitPoolReason(missing, metav1.ConditionFalse, v1alpha1.SourceNotFoundReason)
	assert.Contains(t, cond.Message, `prefix role "no-such-role" does not exist in NetBox`)
	f.deleteClaim(claim)
	assert.Empty(t, f.sim.PrefixesWithin(parent), "the child goes with its claim")
}
