package integration

import (
	"context"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/api/v1alpha1"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/reasons"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/pkg/poolkind"
)

// The audit compares what the IPAM system holds under this management
// cluster's marker with the claims. Each test asks for an audit with the
// annotation and waits for status.audit to answer it.

// setAuditSpec changes a pool's orphan policy and release settings.
func (f *fixture) setAuditSpec(pool poolkind.Pool, orphans v1alpha1.Orphans, release v1alpha1.ReleaseSettings) {
	f.t.Helper()
	f.update(pool, func() {
		switch p := pool.(type) {
		case interface {
			GetNetboxSpec() *v1alpha1.NetboxIPPoolSpec
		}:
			p.GetNetboxSpec().Orphans, p.GetNetboxSpec().Release = orphans, release
		case interface {
			GetInfobloxSpec() *v1alpha1.InfobloxIPPoolSpec
		}:
			p.GetInfobloxSpec().Orphans, p.GetInfobloxSpec().Release = orphans, release
		}
	})
}

// audit asks for an audit of the pool and returns its report.
func (f *fixture) audit(pool poolkind.Pool) *v1alpha1.AuditStatus {
	f.t.Helper()
	request := randomHex(4)
	f.update(pool, func() {
		a := pool.GetAnnotations()
		if a == nil {
			a = map[string]string{}
		}
		a[v1alpha1.AuditAnnotation] = request
		pool.SetAnnotations(a)
	})
	var report *v1alpha1.AuditStatus
	require.EventuallyWithT(f.t, func(c *assert.CollectT) {
		got := pool.DeepCopyObject().(poolkind.Pool)
		require.NoError(c, k8s.Get(f.ctx, client.ObjectKeyFromObject(pool), got))
		report = got.GetPoolStatus().Audit
		require.NotNil(c, report, "no audit yet")
		assert.Equal(c, request, report.Request, "audit not done yet")
	}, waitTimeout, pollInterval)
	return report
}

// auditedCondition describes the pool's Audited condition, for failures.
func (f *fixture) auditedCondition(pool poolkind.Pool) string {
	got := pool.DeepCopyObject().(poolkind.Pool)
	if err := k8s.Get(f.ctx, client.ObjectKeyFromObject(pool), got); err != nil {
		return err.Error()
	}
	if c := conditions.Get(got, v1alpha1.AuditedCondition); c != nil {
		return fmt.Sprintf("Audited=%s %s: %s", c.Status, c.Reason, c.Message)
	}
	return "no Audited condition"
}

func findings(report *v1alpha1.AuditStatus, t v1alpha1.FindingType) []v1alpha1.AuditFinding {
	var out []v1alpha1.AuditFinding
	for _, f := range report.Findings {
		if f.Type == t {
			out = append(out, f)
		}
	}
	return out
}

var noMinAge = v1alpha1.Orphans{MinAge: &metav1.Duration{}}

// forceRemove deletes a claim and its IPAddress without a release, as
// someone removing finalizers by hand does; the pool is paused meanwhile so
// that the provider does not release it first.
func (f *fixture) forceRemove(pool poolkind.Pool, claim *ipamv1.IPAddressClaim) {
	f.t.Helper()
	f.setPaused(pool, true)
	// A bound claim is not woken by its pool's pausing: touch it.
	f.update(claim, func() { claim.SetAnnotations(map[string]string{"touched": randomHex(2)}) })
	f.waitPaused(claim)
	require.NoError(f.t, k8s.Delete(f.ctx, claim))
	for _, o := range []client.Object{&ipamv1.IPAddress{}, &ipamv1.IPAddressClaim{}} {
		o.SetNamespace(claim.Namespace)
		o.SetName(claim.Name)
		f.update(o, func() { o.SetFinalizers(nil) })
		require.NoError(f.t, client.IgnoreNotFound(k8s.Delete(f.ctx, o)))
		f.waitGone(o)
	}
	f.setPaused(pool, false)
}

func (f *fixture) setPaused(pool poolkind.Pool, paused bool) {
	f.update(pool, func() {
		a := pool.GetAnnotations()
		if a == nil {
			a = map[string]string{}
		}
		if paused {
			a[clusterv1.PausedAnnotation] = "true"
		} else {
			delete(a, clusterv1.PausedAnnotation)
		}
		pool.SetAnnotations(a)
	})
}

func TestAuditReportsAnOrphanAndReleasesItUnderRelease(t *testing.T) {
	forEachSystem(t, func(t *testing.T, f *fixture) {
		f.seedNetwork("10.131.0.0/24")
		pool := f.createPool("pool", "10.131.0.0/24")
		f.setAuditSpec(pool, noMinAge, v1alpha1.ReleaseSettings{})
		kept := f.createClaim("kept", "pool")
		f.waitBound(kept)
		claim := f.createClaim("orphaned", "pool")
		address := f.waitBound(claim)
		f.forceRemove(pool, claim)
		require.Len(t, f.recordsWithMarker(f.marker("orphaned")), 1, "the record outlived its claim")

		report := f.audit(pool)
		assert.Equal(t, int32(2), report.Records)
		assert.Equal(t, int32(1), report.Orphans)
		orphans := findings(report, v1alpha1.FindingOrphan)
		require.Len(t, orphans, 1)
		assert.Equal(t, address.Spec.Address, orphans[0].Address)
		assert.Equal(t, f.marker("orphaned"), orphans[0].Marker)
		assert.False(t, orphans[0].Released, "Report only reports")
		assert.Len(t, f.recordsWithMarker(f.marker("orphaned")), 1, "Report keeps the record")
		f.waitPoolCondition(pool, v1alpha1.AuditedCondition, metav1.ConditionTrue, v1alpha1.FindingsReportedReason)
		f.waitEvent(pool.GetNamespace(), pool.GetName(), v1alpha1.FindingsReportedReason)

		// A changed policy is applied by an audit at once.
		f.setAuditSpec(pool, v1alpha1.Orphans{Policy: v1alpha1.OrphansRelease, MinAge: &metav1.Duration{}}, v1alpha1.ReleaseSettings{})
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			assert.Empty(c, f.recordsWithMarker(f.marker("orphaned")), "released")
		}, waitTimeout, pollInterval)
		event := f.waitEvent(pool.GetNamespace(), pool.GetName(), reasons.AuditActionReason)
		assert.Contains(t, event.Note, address.Spec.Address)
		assert.Len(t, f.recordsWithMarker(f.marker("kept")), 1, "a bound claim's record is never an orphan")

		report = f.audit(pool)
		assert.Zero(t, report.Orphans)
		f.waitPoolCondition(pool, v1alpha1.AuditedCondition, metav1.ConditionTrue, v1alpha1.AuditCleanReason)
	})
}

func TestAuditWaitsMinAgeBeforeReleasingAnOrphan(t *testing.T) {
	forEachSystem(t, func(t *testing.T, f *fixture) {
		f.seedNetwork("10.132.0.0/24")
		pool := f.createPool("pool", "10.132.0.0/24")
		f.setAuditSpec(pool, v1alpha1.Orphans{Policy: v1alpha1.OrphansRelease, MinAge: &metav1.Duration{Duration: time.Hour}}, v1alpha1.ReleaseSettings{})
		claim := f.createClaim("orphaned", "pool")
		f.waitBound(claim)
		f.forceRemove(pool, claim)

		report := f.audit(pool)
		assert.Equal(t, int32(1), report.Orphans)
		assert.False(t, findings(report, v1alpha1.FindingOrphan)[0].Released, "an orphan seen for less than minAge is kept")
		assert.Len(t, f.recordsWithMarker(f.marker("orphaned")), 1)
	})
}

func TestAuditNeverCountsAClaimBeingAllocatedAsAnOrphan(t *testing.T) {
	forEachSystem(t, func(t *testing.T, f *fixture) {
		f.seedNetwork("10.133.0.0/24")
		pool := f.createPool("pool", "10.133.0.0/24")
		f.setAuditSpec(pool, v1alpha1.Orphans{Policy: v1alpha1.OrphansRelease, MinAge: &metav1.Duration{}}, v1alpha1.ReleaseSettings{})
		// A reservation made, its IPAddress not yet written: the claim's
		// Cluster is paused, so the provider does not get further.
		f.createCluster("paused", paused)
		claim := f.createClaim("allocating", "pool", inCluster("paused"))
		f.waitPaused(claim)
		f.sys.reserveForeign(netip.MustParsePrefix("10.133.0.77/24"), f.marker("allocating"))

		report := f.audit(pool)
		assert.Zero(t, report.Orphans, "the claim exists")
		assert.Zero(t, report.Duplicates, "the claim has no IPAddress yet")
		assert.Len(t, f.recordsWithMarker(f.marker("allocating")), 1, "kept")

		unpause(t, f, "paused")
		address := f.waitBound(claim)
		assert.Equal(t, "10.133.0.77", address.Spec.Address, "the claim finds its reservation")
	})
}

func TestAuditDeletesALateDuplicateOfABoundClaim(t *testing.T) {
	forEachSystem(t, func(t *testing.T, f *fixture) {
		f.seedNetwork("10.134.0.0/24")
		pool := f.createPool("pool", "10.134.0.0/24")
		f.setAuditSpec(pool, noMinAge, v1alpha1.ReleaseSettings{})
		claim := f.createClaim("machine", "pool")
		address := f.waitBound(claim)
		// The audit the pool's readiness started must be over before the
		// duplicate lands, or, late on a loaded machine or a real NetBox, it
		// deletes the duplicate before the audit this test asks for.
		f.audit(pool)
		// What a request of a killed manager leaves when it lands after the
		// restarted manager reserved the claim's address.
		f.sys.reserveForeign(netip.MustParsePrefix("10.134.0.200/24"), f.marker("machine"))
		require.Len(t, f.recordsWithMarker(f.marker("machine")), 2)

		report := f.audit(pool)
		assert.Equal(t, int32(1), report.Duplicates)
		dup := findings(report, v1alpha1.FindingDuplicate)
		require.Len(t, dup, 1)
		assert.Equal(t, "10.134.0.200", dup[0].Address)
		assert.True(t, dup[0].Released, "deleted under the default Report policy too")
		records := f.recordsWithMarker(f.marker("machine"))
		require.Len(t, records, 1)
		assert.Equal(t, address.Spec.Address, records[0].Address.Addr().String(), "the IPAddress's record is kept")
	})
}

func TestAuditRestoresARecordDeletedInTheIPAMSystem(t *testing.T) {
	forEachSystem(t, func(t *testing.T, f *fixture) {
		f.seedNetwork("10.135.0.0/24")
		pool := f.createPool("pool", "10.135.0.0/24")
		claim := f.createClaim("machine", "pool")
		address := f.waitBound(claim)
		// The audit the pool's readiness started must be over before the
		// record goes, or, late on a loaded machine, it restores the record
		// before the audit this test asks for.
		f.audit(pool)
		records := f.recordsWithMarker(f.marker("machine"))
		require.Len(t, records, 1)
		f.sys.deleteRecord(records[0])
		require.False(t, f.sys.holds(netip.MustParseAddr(address.Spec.Address)))

		report := f.audit(pool)
		assert.Equal(t, int32(1), report.Drifted, "%+v; pool: %s", report, f.auditedCondition(pool))
		require.Len(t, findings(report, v1alpha1.FindingRestored), 1)
		records = f.recordsWithMarker(f.marker("machine"))
		require.Len(t, records, 1, "reserved again, with the marker")
		assert.Equal(t, address.Spec.Address, records[0].Address.Addr().String(), "at the same address")
		f.waitEvent(f.ns, address.Name, reasons.ReservationRestoredReason)
		cond := f.waitClaimCondition(claim, v1alpha1.AddressReservedCondition, v1alpha1.RecordDeletedReason)
		assert.Equal(t, metav1.ConditionTrue, cond.Status)
		assert.Contains(t, cond.Message, address.Spec.Address, "the claim says which record was deleted")

		after := &ipamv1.IPAddress{}
		require.NoError(t, k8s.Get(f.ctx, client.ObjectKeyFromObject(address), after))
		assert.Equal(t, address.Spec, after.Spec, "the IPAddress's address is never changed")
		assert.Equal(t, records[0].reference(), after.Annotations[v1alpha1.ReservationRecordAnnotation],
			"it names the restored record, which its release goes by after a clusterctl move")

		report = f.audit(pool)
		assert.Zero(t, report.Drifted, "nothing left to restore")
		again := &ipamv1.IPAddress{}
		require.NoError(t, k8s.Get(f.ctx, client.ObjectKeyFromObject(address), again))
		assert.Equal(t, after.ResourceVersion, again.ResourceVersion, "an audit that finds the noted record held writes nothing")
	})
}

// The IPAM team moves a bound claim's record (NetBox keeps its ID), the
// audit holds the machine's address again with a new record, and the claim
// is deleted under reclaimPolicy Retain: the record kept for the IPAM team
// is the one at the machine's address, which the IPAddress names since the
// restore, and no record keeps the claim's marker.
func TestARetainedClaimKeepsTheRecordItsMachineUsesAfterARestore(t *testing.T) {
	forEachSystem(t, func(t *testing.T, f *fixture) {
		f.seedNetwork("10.148.0.0/24")
		pool := f.createPool("pool", "10.148.0.0/24")
		f.setAuditSpec(pool, noMinAge, v1alpha1.ReleaseSettings{})
		claim := f.createClaim("machine", "pool", func(c *ipamv1.IPAddressClaim) {
			c.Annotations = map[string]string{v1alpha1.ReclaimPolicyAnnotation: string(v1alpha1.ReclaimRetain)}
		})
		address := f.waitBound(claim)
		machine := netip.MustParseAddr(address.Spec.Address)
		f.audit(pool)
		records := f.recordsWithMarker(f.marker("machine"))
		require.Len(t, records, 1)
		moved := netip.MustParseAddr("10.148.0.200")
		f.sys.moveRecord(records[0], moved)
		report := f.audit(pool)
		require.Len(t, findings(report, v1alpha1.FindingMoved), 1, "%+v", report.Findings)
		require.Len(t, f.recordsWithMarker(f.marker("machine")), 2, "the machine's address held again beside the moved record")

		require.NoError(t, k8s.Delete(f.ctx, claim))
		f.waitGone(claim)
		assert.Empty(t, f.recordsWithMarker(f.marker("machine")), "no record keeps the claim's marker")
		assert.True(t, f.sys.holds(machine), "the record at the machine's address is kept for the IPAM team")
		assert.False(t, f.sys.holds(moved), "the moved record, a second of the claim's, is released")
		f.waitEvent(f.ns, claim.Name, reasons.AddressRetainedReason)
	})
}

// A restore whose answer was lost after the IPAM system applied it (or
// that the client resent, to find the address taken) is the claim's record
// held again, not an address taken over.
func TestAuditRestoreWhoseAnswerWasLostHoldsTheAddressOnce(t *testing.T) {
	forEachSystem(t, func(t *testing.T, f *fixture) {
		f.seedNetwork("10.139.0.0/24")
		pool := f.createPool("pool", "10.139.0.0/24")
		claim := f.createClaim("machine", "pool")
		address := f.waitBound(claim)
		f.audit(pool)
		records := f.recordsWithMarker(f.marker("machine"))
		require.Len(t, records, 1)
		f.sys.deleteRecord(records[0])

		f.sys.loseNextRestoreAnswer()
		report := f.audit(pool)
		f.sys.clearFaults()
		require.Len(t, findings(report, v1alpha1.FindingRestored), 1, "%+v; pool: %s", report, f.auditedCondition(pool))
		assert.Empty(t, findings(report, v1alpha1.FindingTaken))
		records = f.recordsWithMarker(f.marker("machine"))
		require.Len(t, records, 1, "held once")
		assert.Equal(t, address.Spec.Address, records[0].Address.Addr().String())
		cond := f.waitClaimCondition(claim, v1alpha1.AddressReservedCondition, v1alpha1.RecordDeletedReason)
		assert.Equal(t, metav1.ConditionTrue, cond.Status, cond.Message)
	})
}

func TestAuditReportsAnAddressTakenOverAndDeletesNothing(t *testing.T) {
	forEachSystem(t, func(t *testing.T, f *fixture) {
		f.seedNetwork("10.136.0.0/24")
		pool := f.createPool("pool", "10.136.0.0/24")
		claim := f.createClaim("machine", "pool")
		address := f.waitBound(claim)
		records := f.recordsWithMarker(f.marker("machine"))
		require.Len(t, records, 1)
		f.sys.disown(records[0])

		report := f.audit(pool)
		assert.Equal(t, int32(1), report.Drifted)
		require.Len(t, findings(report, v1alpha1.FindingTaken), 1)
		got := f.getClaim(claim)
		cond := conditions.Get(got, v1alpha1.AddressReservedCondition)
		require.NotNil(t, cond)
		assert.Equal(t, metav1.ConditionFalse, cond.Status)
		assert.Equal(t, v1alpha1.AddressTakenOverReason, cond.Reason)
		assert.Contains(t, cond.Message, address.Spec.Address)
		assert.True(t, conditions.IsTrue(got, ipamv1.IPAddressClaimReadyCondition), "the claim keeps its IPAddress")
		f.waitEvent(f.ns, address.Name, v1alpha1.AddressTakenOverReason)
		assert.True(t, f.sys.holds(netip.MustParseAddr(address.Spec.Address)), "the other owner's record is kept")
		assert.Empty(t, f.recordsWithMarker(f.marker("machine")), "and not taken back")

		after := &ipamv1.IPAddress{}
		require.NoError(t, k8s.Get(f.ctx, client.ObjectKeyFromObject(address), after))
		assert.Equal(t, address.ResourceVersion, after.ResourceVersion, "the IPAddress is never changed")
	})
}

func TestAuditNeverTouchesAnotherManagementClustersRecords(t *testing.T) {
	forEachSystem(t, func(t *testing.T, f *fixture) {
		f.seedNetwork("10.137.0.0/24")
		pool := f.createPool("pool", "10.137.0.0/24")
		f.setAuditSpec(pool, v1alpha1.Orphans{Policy: v1alpha1.OrphansRelease, MinAge: &metav1.Duration{}}, v1alpha1.ReleaseSettings{})
		foreign := "other-cluster/" + f.ns + "/machine"
		f.sys.reserveForeign(netip.MustParsePrefix("10.137.0.50/24"), foreign)
		f.sys.reserveForeign(netip.MustParsePrefix("10.137.0.51/24"), f.ns+"/machine")

		report := f.audit(pool)
		assert.Zero(t, report.Records, "neither another identity's records nor unprefixed ones are listed")
		assert.Zero(t, report.Orphans)
		assert.Len(t, f.recordsWithMarker(foreign), 1, "untouched")
		assert.Len(t, f.recordsWithMarker(f.ns+"/machine"), 1, "untouched")
	})
}

// A grace period keeps a released address's record as a tombstone: a new
// claim gets another address, and the record is deleted when the period is
// over, also when the manager restarted meanwhile.
func TestGracePeriodHoldsTheAddressAcrossARestart(t *testing.T) {
	forEachSystem(t, func(t *testing.T, f *fixture) {
		f.filter = "grace-" + f.ns
		firstCtx, stopFirst := context.WithCancel(f.ctx)
		firstDone, err := startManager(firstCtx, f.filter, "", nil)
		require.NoError(t, err)
		f.seedNetwork("10.138.0.0/24")
		pool := f.createPool("pool", "10.138.0.0/24")
		grace := 10 * time.Second
		f.setAuditSpec(pool, v1alpha1.Orphans{}, v1alpha1.ReleaseSettings{GracePeriod: &metav1.Duration{Duration: grace}})
		first := f.createClaim("first", "pool")
		released := f.waitBound(first).Spec.Address
		f.deleteClaim(first)

		var tombstone record
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			for _, r := range f.markedRecords() {
				if m, _, ok := backends.ParseTombstone(r.Marker); ok && m == f.marker("first") {
					tombstone = r
					return
				}
			}
			assert.Fail(c, "no tombstone")
		}, waitTimeout, pollInterval)
		assert.Equal(t, released, tombstone.Address.Addr().String())
		second := f.createClaim("second", "pool")
		assert.NotEqual(t, released, f.waitBound(second).Spec.Address, "a tombstone's address is not handed out")

		stopFirst()
		<-firstDone
		_, err = startManager(f.ctx, f.filter, "", nil)
		require.NoError(t, err)
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			assert.False(c, f.sys.holds(netip.MustParseAddr(released)), "the tombstone is deleted when the grace period is over")
		}, grace+waitTimeout, pollInterval)
		third := f.createClaim("third", "pool")
		assert.Equal(t, released, f.waitBound(third).Spec.Address, "and the address is free again")
	})
}

// TestAuditReportsAMovedRecordAndNeverDeletesIt: the IPAM team moves a
// bound claim's record to another address and keeps the marker. The audit
// holds the machine's address for the claim again, names what changed on
// the claim (AddressReserved, RecordMoved) and in a Moved finding, and never
// deletes the moved record as a duplicate, however often it runs.
func TestAuditReportsAMovedRecordAndNeverDeletesIt(t *testing.T) {
	forEachSystem(t, func(t *testing.T, f *fixture) {
		f.seedNetwork("10.137.0.0/24")
		pool := f.createPool("pool", "10.137.0.0/24")
		f.setAuditSpec(pool, noMinAge, v1alpha1.ReleaseSettings{})
		claim := f.createClaim("machine", "pool")
		address := f.waitBound(claim)
		records := f.recordsWithMarker(f.marker("machine"))
		require.Len(t, records, 1)
		moved := netip.MustParseAddr("10.137.0.200")
		f.sys.moveRecord(records[0], moved)

		report := f.audit(pool)
		require.Len(t, findings(report, v1alpha1.FindingMoved), 1, "%+v", report.Findings)
		cond := f.waitClaimCondition(claim, v1alpha1.AddressReservedCondition, v1alpha1.RecordMovedReason)
		assert.Contains(t, cond.Message, moved.String(), "the condition names where the record went")
		f.waitEvent(f.ns, address.Name, v1alpha1.RecordMovedReason)
		assertHeld := func() {
			t.Helper()
			var at []string
			for _, r := range f.recordsWithMarker(f.marker("machine")) {
				at = append(at, r.Address.Addr().String())
			}
			assert.ElementsMatch(t, []string{address.Spec.Address, moved.String()}, at,
				"the machine's address is held again and the moved record is kept")
		}
		assertHeld()

		for range 2 {
			report = f.audit(pool)
			assert.Zero(t, report.Duplicates, "a moved record is no duplicate")
			require.Len(t, findings(report, v1alpha1.FindingMoved), 1)
			assertHeld()
		}
	})
}

// TestAuditReportsARecordMovedIntoAnotherScope: the IPAM team moves a bound
// claim's record, same address and marker, into another VRF (NetBox) or
// network view (Infoblox). The pool's scope no longer holds the machine's
// address: the audit holds it there again and reports one move, the next
// claim is never bound to it, and the claim's release deletes both records.
func TestAuditReportsARecordMovedIntoAnotherScope(t *testing.T) {
	forEachSystem(t, func(t *testing.T, f *fixture) {
		f.seedNetwork("10.138.0.0/24")
		pool := f.createPool("pool", "10.138.0.0/24")
		f.setAuditSpec(pool, noMinAge, v1alpha1.ReleaseSettings{})
		claim := f.createClaim("machine", "pool")
		address := f.waitBound(claim)
		records := f.recordsWithMarker(f.marker("machine"))
		require.Len(t, records, 1)
		scope := f.sys.moveOutOfScope(records[0])

		report := f.audit(pool)
		require.Len(t, findings(report, v1alpha1.FindingMoved), 1, "%+v", report.Findings)
		assert.Empty(t, findings(report, v1alpha1.FindingRestored), "a move is one finding, not a restore too")
		assert.EqualValues(t, 1, report.Drifted)
		cond := f.waitClaimCondition(claim, v1alpha1.AddressReservedCondition, v1alpha1.RecordMovedReason)
		assert.Contains(t, cond.Message, scope, "the condition names where the record went")
		var at []string
		for _, r := range f.recordsWithMarker(f.marker("machine")) {
			at = append(at, r.Address.Addr().String())
		}
		assert.Equal(t, []string{address.Spec.Address, address.Spec.Address}, at,
			"the machine's address is held in the pool's scope again, and the moved record is kept")

		report = f.audit(pool)
		assert.Zero(t, report.Duplicates+report.Strays, "%+v", report.Findings)
		require.Len(t, findings(report, v1alpha1.FindingMoved), 1)

		next := f.waitBound(f.createClaim("next", "pool"))
		assert.NotEqual(t, address.Spec.Address, next.Spec.Address)

		f.deleteClaim(claim)
		assert.Empty(t, f.recordsWithMarker(f.marker("machine")), "the release reaches the moved record too")
	})
}

// TestAuditReportsStraysOutsideTheSourcesAndDeletesNone: records with this
// cluster's marker outside the sources of every pool, whose claims are
// gone, are reported as strays by the pools of the claims' namespace, and
// never deleted, even under the Release policy: outside its sources a pool
// cannot tell what else uses the address. A gone claim's record in another
// pool's sources is that pool's orphan, not a stray of the others (a fleet
// of ClusterSubnets makes two pools each in one namespace).
func TestAuditReportsStraysOutsideTheSourcesAndDeletesNone(t *testing.T) {
	forEachSystem(t, func(t *testing.T, f *fixture) {
		f.seedNetwork("10.146.0.0/24")
		f.seedNetwork("10.146.1.0/24")
		pool := f.createPool("pool", "10.146.0.0/24")
		f.setAuditSpec(pool, v1alpha1.Orphans{Policy: v1alpha1.OrphansRelease, MinAge: &metav1.Duration{}}, v1alpha1.ReleaseSettings{})
		f.seedNetwork("10.146.2.0/24")
		other := f.createPool("other", "10.146.2.0/24")
		f.waitBound(f.createClaim("machine", "pool"))
		f.sys.reserveForeign(netip.MustParsePrefix("10.146.1.7/24"), f.marker("gone"))
		// A gone claim of another namespace: its namespace's pools report it.
		f.sys.reserveForeign(netip.MustParsePrefix("10.146.1.8/24"), clusterIdentity+"/elsewhere-"+f.ns+"/gone")
		f.sys.reserveForeign(netip.MustParsePrefix("10.146.2.9/24"), f.marker("gone-of-other"))
		// Audited, so that its orphans are its own (the pools that count are
		// in controllers/audit's TestAGoneClaimsRecordIsAnotherPoolsOnlyWhereThatPoolAuditsIt).
		f.waitPoolReady(other)

		for range 2 {
			report := f.audit(pool)
			strays := findings(report, v1alpha1.FindingStray)
			require.Len(t, strays, 1, "%+v", report.Findings)
			assert.Equal(t, "10.146.1.7", strays[0].Address)
			assert.False(t, strays[0].Released)
			assert.EqualValues(t, 1, report.Strays)
			assert.Zero(t, report.Orphans+report.Drifted+report.Duplicates, "%+v", report.Findings)
			assert.True(t, f.sys.holds(netip.MustParseAddr("10.146.1.7")), "a stray is never deleted")
		}

		report := f.audit(other)
		orphans := findings(report, v1alpha1.FindingOrphan)
		require.Len(t, orphans, 1, "%+v", report.Findings)
		assert.Equal(t, "10.146.2.9", orphans[0].Address)
		strays := findings(report, v1alpha1.FindingStray)
		require.Len(t, strays, 1, "%+v", report.Findings)
		assert.Equal(t, "10.146.1.7", strays[0].Address)
	})
}

// waitClaimCondition waits for a condition of the claim to have reason.
func (f *fixture) waitClaimCondition(claim *ipamv1.IPAddressClaim, conditionType, reason string) *metav1.Condition {
	f.t.Helper()
	var cond *metav1.Condition
	require.EventuallyWithT(f.t, func(c *assert.CollectT) {
		got := &ipamv1.IPAddressClaim{}
		require.NoError(c, k8s.Get(f.ctx, client.ObjectKeyFromObject(claim), got))
		cond = conditions.Get(got, conditionType)
		require.NotNil(c, cond)
		assert.Equal(c, reason, cond.Reason, cond.Message)
	}, waitTimeout, pollInterval)
	return cond
}

// TestAuditLeavesAPausedClustersClaimsAlone: a paused Cluster's claims are
// not acted on, by the audit either (in the middle of a clusterctl move the
// source still owns them). Its claim's deleted record is restored only once
// the Cluster is unpaused.
func TestAuditLeavesAPausedClustersClaimsAlone(t *testing.T) {
	forEachSystem(t, func(t *testing.T, f *fixture) {
		f.seedNetwork("10.147.0.0/24")
		pool := f.createPool("pool", "10.147.0.0/24")
		cluster := f.createCluster("workload")
		claim := f.createClaim("machine", "pool", inCluster(cluster.Name))
		address := f.waitBound(claim)
		records := f.recordsWithMarker(f.marker("machine"))
		require.Len(t, records, 1)

		f.update(cluster, func() { cluster.Spec.Paused = ptr.To(true) })
		f.waitPaused(claim)
		f.sys.deleteRecord(records[0])
		report := f.audit(pool)
		assert.Zero(t, report.Drifted, "%+v", report.Findings)
		assert.False(t, f.sys.holds(netip.MustParseAddr(address.Spec.Address)), "nothing was restored while paused")

		unpause(t, f, cluster.Name)
		report = f.audit(pool)
		require.Len(t, findings(report, v1alpha1.FindingRestored), 1, "%+v", report.Findings)
		assert.True(t, f.sys.holds(netip.MustParseAddr(address.Spec.Address)))
	})
}
