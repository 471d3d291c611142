package integration

import (
	"net/netip"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/api/v1alpha1"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/reasons"
)

// Two management clusters share one IPAM system, each with a claim
// <namespace>/foo (GitOps-cloned clusters name things alike). The IPAM team
// deletes this cluster's record by mistake, and the other cluster's claim
// gets the address. This cluster's audit reports that another holder has
// the address: it never marks the other cluster's record as its own, and
// the claim's release leaves it alone.
func TestAnAuditNeverTakesAnotherManagementClustersRecord(t *testing.T) {
	forEachSystem(t, func(t *testing.T, f *fixture) {
		f.seedNetwork("10.151.0.0/24")
		pool := f.createPool("pool", "10.151.0.0/24")
		claim := f.createClaim("foo", "pool")
		address := f.waitBound(claim)
		f.audit(pool)
		records := f.recordsWithMarker(f.marker("foo"))
		require.Len(t, records, 1)
		held := records[0].Address

		f.sys.deleteRecord(records[0])
		other := "other-cluster/" + f.ns + "/foo"
		f.sys.reserveForeign(held, other)

		report := f.audit(pool)
		assert.Len(t, findings(report, v1alpha1.FindingTaken), 1, "%+v", report)
		assert.Empty(t, findings(report, v1alpha1.FindingRestored), "%+v", report)
		cond := f.waitClaimCondition(claim, v1alpha1.AddressReservedCondition, v1alpha1.AddressTakenOverReason)
		assert.Equal(t, metav1.ConditionFalse, cond.Status)
		assert.Contains(t, cond.Message, other, "the claim names the record that holds its address")
		f.waitEvent(f.ns, address.Name, v1alpha1.AddressTakenOverReason)
		assert.Empty(t, f.recordsWithMarker(f.marker("foo")), "nothing holds the address under this cluster's marker")
		require.Len(t, f.recordsWithMarker(other), 1, "the other cluster's record keeps its marker")

		f.deleteClaim(claim)
		kept := f.recordsWithMarker(other)
		require.Len(t, kept, 1, "releasing this cluster's claim leaves the other cluster's record")
		assert.Equal(t, held, kept[0].Address)
	})
}

// After a clusterctl move the claim's record carries the source cluster's
// marker, which the IPAddress recorded and the move carried along: the
// target's audit marks that record, and no other, as the claim's, and the
// IPAddress then records the target's marker, so that a move back knows the
// record too.
func TestAnAuditTakesBackOnlyTheRecordItsIPAddressRecorded(t *testing.T) {
	forEachSystem(t, func(t *testing.T, f *fixture) {
		f.seedNetwork("10.152.0.0/24")
		pool := f.createPool("pool", "10.152.0.0/24")
		claim := f.createClaim("foo", "pool")
		address := f.waitBound(claim)
		f.audit(pool)
		assert.Equal(t, f.marker("foo"), address.Annotations[v1alpha1.ReservationMarkerAnnotation], "the IPAddress records its record's marker")
		records := f.recordsWithMarker(f.marker("foo"))
		require.Len(t, records, 1)
		held := records[0].Address

		// As made in the cluster the claim was moved from.
		source := "source-cluster/" + f.ns + "/foo"
		f.sys.deleteRecord(records[0])
		f.sys.reserveForeign(held, source)
		f.update(address, func() { address.Annotations[v1alpha1.ReservationMarkerAnnotation] = source })
		// A third management cluster's claim of the same namespace and name,
		// in the same network: its record is no record of this claim's,
		// whatever its identity.
		third := "third-cluster/" + f.ns + "/foo"
		thirdHeld := netip.PrefixFrom(held.Addr().Next().Next().Next(), held.Bits())
		f.sys.reserveForeign(thirdHeld, third)

		report := f.audit(pool)
		assert.Len(t, findings(report, v1alpha1.FindingRestored), 1, "%+v", report)
		marked := f.recordsWithMarker(f.marker("foo"))
		require.Len(t, marked, 1, "the moved record is the claim's again")
		assert.Equal(t, held, marked[0].Address)
		assert.Empty(t, f.recordsWithMarker(source))
		thirds := f.recordsWithMarker(third)
		require.Len(t, thirds, 1, "the third cluster's record is left as it was")
		assert.Equal(t, thirdHeld, thirds[0].Address)
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			got := &ipamv1.IPAddress{}
			require.NoError(c, k8s.Get(f.ctx, client.ObjectKeyFromObject(address), got))
			assert.Equal(c, f.marker("foo"), got.Annotations[v1alpha1.ReservationMarkerAnnotation])
		}, waitTimeout, pollInterval)
	})
}

// A machine is replaced: claim a is deleted, and its release's deletion is
// applied by the IPAM system but its answer is lost, and the retry is held,
// so for a while the address is free in the IPAM system while a's
// IPAddress still exists. Claim b, created then, is answered that address.
// The guard never binds it to b while a's IPAddress holds it, and never
// hands b's record to a, whose release may already have searched for its
// records: b keeps its record and gets the address once a is gone, and no
// record is left behind.
func TestAClaimBeingDeletedIsHandedNoRecord(t *testing.T) {
	forEachSystem(t, func(t *testing.T, f *fixture) {
		network := netip.MustParsePrefix("10.153.0.0/24")
		f.seedNetwork(network.String())
		pool := f.createPool("pool", network.String())
		f.waitPoolReady(pool)
		a := f.createClaim("a", pool.GetName())
		held := f.waitBound(a).Spec.Address

		gate := make(chan struct{})
		closeGate := sync.OnceFunc(func() { close(gate) })
		defer closeGate()
		f.sys.loseNextDeleteAnswer(gate)
		require.NoError(t, k8s.Delete(f.ctx, a))
		require.Eventually(t, func() bool { return !f.sys.holds(netip.MustParseAddr(held)) }, waitTimeout, pollInterval,
			"a's release never reached the IPAM system")
		b := f.createClaim("b", pool.GetName())
		f.waitClaimReason(b, reasons.AddressHeldInClusterReason)
		require.NoError(t, k8s.Get(f.ctx, client.ObjectKeyFromObject(a), &ipamv1.IPAddressClaim{}),
			"b was refused a's address while a still existed")

		closeGate()
		f.waitGone(a)
		bAddress := f.waitBound(b)
		assert.Equal(t, held, bAddress.Spec.Address, "b keeps the record it was answered, and gets its address once a is gone")
		marked := f.markedRecords()
		require.Len(t, marked, 1, "no record outlives its claim: %+v", marked)
		assert.Equal(t, f.marker(b.Name), marked[0].Marker)
		assert.Equal(t, held, marked[0].Address.Addr().String())
	})
}
