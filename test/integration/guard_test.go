package integration

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/api/v1alpha1"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/reasons"
)

// TestAnAddressHeldInTheClusterIsNeverBoundAgain: claim a is bound to .2.
// The IPAM team moves a's record to .200 and keeps the marker, so the IPAM
// system thinks .2 free and answers it to the next claim, b. The provider
// never binds .2 to b while a's IPAddress holds it: the record at .2 is
// handed to a, whose machine uses that address, b gets the next address,
// and both claims and the pool say what happened.
func TestAnAddressHeldInTheClusterIsNeverBoundAgain(t *testing.T) {
	forEachSystem(t, func(t *testing.T, f *fixture) {
		network := netip.MustParsePrefix("10.144.0.0/24")
		f.seedNetwork(network.String())
		pool := f.createPool("guard", network.String())
		f.waitPoolReady(pool)
		a := f.createClaim("a", pool.GetName())
		held := netip.MustParseAddr(f.waitBound(a).Spec.Address)
		moved := netip.MustParseAddr("10.144.0.200")

		records := f.recordsWithMarker(f.marker(a.Name))
		require.Len(t, records, 1)
		f.sys.moveRecord(records[0], moved)

		b := f.createClaim("b", pool.GetName())
		bAddress := f.waitBound(b)
		assert.NotEqual(t, held.String(), bAddress.Spec.Address, "b was bound to the address a's machine uses")
		aAddress := &ipamv1.IPAddress{}
		require.NoError(t, k8s.Get(f.ctx, client.ObjectKeyFromObject(a), aAddress))
		assert.Equal(t, held.String(), aAddress.Spec.Address, "a keeps its address")

		f.waitEvent(f.ns, b.Name, reasons.AddressHeldInClusterReason)
		f.waitEvent(f.ns, a.Name, reasons.AddressHeldInClusterReason)
		f.waitEvent(f.ns, pool.GetName(), reasons.AddressHeldInClusterReason)
		cond := f.waitClaimCondition(a, v1alpha1.AddressReservedCondition, reasons.AddressHeldInClusterReason)
		assert.Equal(t, metav1.ConditionTrue, cond.Status, "a's machine's address is held for it again")
		assert.Contains(t, cond.Message, " "+held.String()+" ", "a's condition names its machine's address")
		assert.Contains(t, cond.Message, "claim "+b.Namespace+"/"+b.Name+":", "a's condition names the claim the address was answered to")
		// The IPAM system holds a's machine's address for a again, and b's
		// address for b.
		var aHolds, bHolds bool
		for _, r := range f.markedRecords() {
			if r.Marker == f.marker(a.Name) && r.Address.Addr() == held {
				aHolds = true
				require.NoError(t, k8s.Get(f.ctx, client.ObjectKeyFromObject(a), aAddress))
				assert.Equal(t, r.reference(), aAddress.Annotations[v1alpha1.ReservationRecordAnnotation],
					"a's IPAddress names the record handed to it, which its release goes by after a clusterctl move")
			}
			bHolds = bHolds || (r.Marker == f.marker(b.Name) && r.Address.Addr().String() == bAddress.Spec.Address)
		}
		assert.True(t, aHolds, "no record holds %s for a", held)
		assert.True(t, bHolds, "no record holds %s for b", bAddress.Spec.Address)
	})
}

// TestAHandOverWhoseAnswerIsLostIsReportedByTheAudit: the guard handed the
// record the IPAM system answered to the claim whose machine uses its
// address, but the answer to that change was lost, so the claim was never
// told. The audit finds the IPAddress's note, written before the change,
// and tells it.
func TestAHandOverWhoseAnswerIsLostIsReportedByTheAudit(t *testing.T) {
	forEachSystem(t, func(t *testing.T, f *fixture) {
		network := netip.MustParsePrefix("10.145.0.0/24")
		f.seedNetwork(network.String())
		pool := f.createPool("lost-hand-over", network.String())
		f.waitPoolReady(pool)
		a := f.createClaim("a", pool.GetName())
		held := netip.MustParseAddr(f.waitBound(a).Spec.Address)
		records := f.recordsWithMarker(f.marker(a.Name))
		require.Len(t, records, 1)
		f.sys.deleteRecord(records[0])

		// Every attempt of the hand-over, retries included, is applied and
		// its answer lost.
		f.sys.loseRemarkAnswers(50)
		b := f.createClaim("b", pool.GetName())
		bAddress := f.waitBound(b)
		f.sys.clearFaults()
		assert.NotEqual(t, held.String(), bAddress.Spec.Address, "b was bound to the address a's machine uses")
		require.Eventually(t, func() bool {
			return slices.ContainsFunc(f.recordsWithMarker(f.marker(a.Name)), func(r record) bool { return r.Address.Addr() == held })
		}, waitTimeout, pollInterval, "the hand-over was applied: a record holds %s for a", held)

		f.audit(pool)
		cond := f.waitClaimCondition(a, v1alpha1.AddressReservedCondition, reasons.AddressHeldInClusterReason)
		assert.Equal(t, metav1.ConditionTrue, cond.Status, "a's machine's address is held for it again")
		assert.Contains(t, cond.Message, held.String())
	})
}
