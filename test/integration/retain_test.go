package integration

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/api/v1alpha1"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends/infoblox"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/reasons"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/subnet"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/netboxsim"
)

// addressesWithin lists NetBox's IP addresses inside network, whatever
// their marker, and deletes them when the test ends: a record kept for the
// IPAM team would otherwise hold its address in the next run on a real
// NetBox.
func (f *fixture) addressesWithin(network netip.Prefix) []netboxsim.IPAddress {
	var out []netboxsim.IPAddress
	for _, ip := range f.sim.IPAddresses() {
		if a, err := netip.ParsePrefix(ip.Address); err == nil && network.Contains(a.Addr()) {
			out = append(out, ip)
		}
	}
	return out
}

func (f *fixture) deleteAddressesWithinAtEnd(network netip.Prefix) {
	f.t.Cleanup(func() {
		for _, ip := range f.addressesWithin(network) {
			f.sim.DeleteIPAddress(ip.ID)
		}
	})
}

func retained(s *v1alpha1.ClusterSubnet) { s.Spec.ReclaimPolicy = v1alpha1.ReclaimRetain }

// A subnet whose reclaim policy is Retain, deleted with its Cluster: the
// machines' addresses are released as always, but the child and its
// gateway's record stay in NetBox for the IPAM team, without the provider's
// markers; the parent never carves that block for another cluster, and
// the audit no longer lists them.
func TestARetainedClusterSubnetStaysInNetBoxForTheIPAMTeam(t *testing.T) {
	f := newFixture(t)
	const parent = "10.182.0.0/16"
	f.emptyContainer(parent)
	f.deleteAddressesWithinAtEnd(netip.MustParsePrefix(parent))
	parentPool := f.createNetboxPool("clusters", parent, withChildPrefixes(24))
	f.waitPoolReady(parentPool)
	f.createCluster("keep-a")

	s := f.createSubnet("keep-a", "keep-a", "NetboxIPPool", "clusters", retained)
	got := f.waitSubnet(s, metav1.ConditionTrue, v1alpha1.SubnetReadyReason)
	assert.Equal(t, v1alpha1.ReclaimRetain, got.Spec.ReclaimPolicy)
	child := netip.MustParsePrefix(got.Status.Prefix)
	machine := f.createClaim("keep-a-md-0", "keep-a-nodes", inCluster("keep-a"))
	address := f.waitBound(machine)

	require.NoError(t, k8s.Delete(f.ctx, s))
	f.waitSubnet(s, metav1.ConditionFalse, v1alpha1.SubnetDeletingReason)
	f.deleteClaim(machine)
	f.waitGone(s)

	within := f.sim.PrefixesWithin(parent)
	require.Len(t, within, 1, "the child stays")
	assert.Equal(t, child.String(), within[0].Prefix)
	assert.Empty(t, within[0].CustomFields["capi_ipam_claim"], "without the subnet's marker")
	records := f.addressesWithin(child)
	require.Len(t, records, 1, "the gateway's record stays, the machine's is released")
	assert.Equal(t, got.Status.Gateway, netip.MustParsePrefix(records[0].Address).Addr().String())
	assert.NotEqual(t, address.Spec.Address, netip.MustParsePrefix(records[0].Address).Addr().String())
	assert.Empty(t, records[0].CustomFields["capi_ipam_claim"], "without the gateway claim's marker")
	assert.Empty(t, f.markedRecords(), "nothing of the provider's holds them")
	f.waitEvent(f.ns, "keep-a", reasons.AddressRetainedReason)
	f.waitEvent(f.ns, "keep-a"+subnet.GatewaySuffix, reasons.AddressRetainedReason)

	f.createCluster("keep-b")
	next := f.waitSubnet(f.createSubnet("keep-b", "keep-b", "NetboxIPPool", "clusters"), metav1.ConditionTrue, v1alpha1.SubnetReadyReason)
	assert.NotEqual(t, child.String(), next.Status.Prefix, "the kept block is not carved for another cluster")
}

// The same on Infoblox: the child network and the gateway's fixed address
// stay in the grid, their marker attribute removed.
func TestARetainedClusterSubnetStaysInTheGridForTheIPAMTeam(t *testing.T) {
	f := newInfobloxFixture(t)
	sys := f.sys.(*infobloxSystem)
	const parent = "10.183.0.0/20"
	f.infobloxCarvingParent("clusters", parent, 26)
	f.createCluster("edge-keep")

	s := f.createSubnet("edge-keep", "edge-keep", "InfobloxIPPool", "clusters", retained)
	got := f.waitSubnet(s, metav1.ConditionTrue, v1alpha1.SubnetReadyReason)
	require.NoError(t, k8s.Delete(f.ctx, s))
	f.waitGone(s)

	var networks []string
	for _, o := range sys.sim.Objects("network") {
		if netip.MustParsePrefix(parent).Contains(o.Prefix.Addr()) {
			_, marked := o.EAs[infoblox.DefaultMarkerEA]
			assert.False(t, marked, "the child's marker attribute is removed: %v", o.EAs)
			networks = append(networks, o.Prefix.String())
		}
	}
	assert.Equal(t, []string{got.Status.Prefix}, networks, "the child stays")
	gateway := netip.MustParseAddr(got.Status.Gateway)
	assert.True(t, sys.holds(gateway), "the gateway's fixed address stays")
	for _, o := range sys.objects() {
		if len(o.Addresses) > 0 && o.Addresses[0] == gateway {
			_, marked := o.EAs[infoblox.DefaultMarkerEA]
			assert.False(t, marked, "the gateway's marker attribute is removed: %v", o.EAs)
		}
	}
	assert.Empty(t, f.markedRecords())
}

// A claim's own reclaim-policy annotation: a value that is neither policy
// stops the release and says so, the record untouched; corrected to
// Retain, the record stays in the IPAM system without the claim's marker
// and the claim goes.
func TestAClaimsReclaimPolicyIsReadBeforeItsRelease(t *testing.T) {
	f := newFixture(t)
	const cidr = "10.184.0.0/28"
	f.seedPrefix(cidr, netboxsim.PrefixOptions{})
	f.deleteAddressesWithinAtEnd(netip.MustParsePrefix(cidr))
	pool := f.createNetboxPool("retaining", cidr)
	f.waitPoolReady(pool)
	claim := f.createClaim("kept-by-policy", "retaining", func(c *ipamv1.IPAddressClaim) {
		c.Annotations = map[string]string{v1alpha1.ReclaimPolicyAnnotation: "retain"}
	})
	address := f.waitBound(claim)

	require.NoError(t, k8s.Delete(f.ctx, claim))
	cond := f.waitClaimCondition(claim, ipamv1.IPAddressClaimReadyCondition, reasons.ReclaimPolicyUnknownReason)
	assert.Contains(t, cond.Message, `"retain"`)
	f.waitEvent(f.ns, claim.Name, reasons.ReclaimPolicyUnknownReason)
	assert.Len(t, f.recordsWithMarker(f.marker(claim.Name)), 1, "nothing is released or kept")

	f.update(claim, func() { claim.Annotations[v1alpha1.ReclaimPolicyAnnotation] = string(v1alpha1.ReclaimRetain) })
	f.waitGone(claim)
	assert.Empty(t, f.recordsWithMarker(f.marker(claim.Name)))
	var kept []string
	for _, ip := range f.addressesWithin(netip.MustParsePrefix(cidr)) {
		if netip.MustParsePrefix(ip.Address).Addr().String() == address.Spec.Address {
			kept = append(kept, ip.Address)
			assert.Empty(t, ip.CustomFields["capi_ipam_claim"])
		}
	}
	assert.Len(t, kept, 1, "the record stays for the IPAM team")
	f.waitEvent(f.ns, claim.Name, reasons.AddressRetainedReason)
}
