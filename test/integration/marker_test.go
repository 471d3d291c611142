package integration

import (
	"context"
	"errors"
	"net/http"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/api/v1alpha1"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/reasons"
)

// Each test here ends with the same address and a single reservation,
// because every reservation carries the claim's marker.

const allocatePath = "/available-ips/"

func TestLostIPAddressIsRecreatedWithTheSameAddress(t *testing.T) {
	forEachSystem(t, func(t *testing.T, f *fixture) {
		f.seedNetwork("10.20.0.0/24")
		f.createPool("pool", "10.20.0.0/24")
		claim := f.createClaim("machine", "pool")
		first := f.waitBound(claim)

		require.NoError(t, k8s.Delete(f.ctx, first))
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			again := &ipamv1.IPAddress{}
			require.NoError(c, k8s.Get(f.ctx, client.ObjectKeyFromObject(claim), again))
			assert.NotEqual(c, first.UID, again.UID, "a new IPAddress")
			assert.Equal(c, first.Spec.Address, again.Spec.Address)
			assert.Nil(c, again.DeletionTimestamp)
		}, waitTimeout, pollInterval)

		assert.Len(t, f.markedRecords(), 1)
		assert.Equal(t, 1, f.sys.allocationRequests(), "one reservation was ever made")
	})
}

// The IPAddress alone records where its reservation lives; when it is let go
// while the IPAM system cannot be reached, the claim takes the record over
// until a new IPAddress holds it.
func TestLostIPAddressHandsItsRecordToTheClaim(t *testing.T) {
	forEachSystem(t, func(t *testing.T, f *fixture) {
		f.seedNetwork("10.39.0.0/24")
		f.createPool("pool", "10.39.0.0/24")
		claim := f.createClaim("machine", "pool")
		first := f.waitBound(claim)
		record := first.Annotations[v1alpha1.ReservationRecordAnnotation]
		require.NotEmpty(t, record)
		assert.Empty(t, f.getClaim(claim).Annotations[v1alpha1.ReservationRecordAnnotation], "a new claim is not written for it")

		f.sys.failAllRequests(http.StatusServiceUnavailable)
		require.NoError(t, k8s.Delete(f.ctx, first))
		f.waitGone(first)
		got := f.getClaim(claim)
		assert.Equal(t, record, got.Annotations[v1alpha1.ReservationRecordAnnotation])
		assert.Equal(t, first.Annotations[v1alpha1.ReservationEndpointAnnotation], got.Annotations[v1alpha1.ReservationEndpointAnnotation])

		f.sys.clearFaults()
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			again := &ipamv1.IPAddress{}
			require.NoError(c, k8s.Get(f.ctx, client.ObjectKeyFromObject(claim), again))
			assert.Equal(c, first.Spec.Address, again.Spec.Address)
			assert.Equal(c, record, again.Annotations[v1alpha1.ReservationRecordAnnotation])
			got := &ipamv1.IPAddressClaim{}
			require.NoError(c, k8s.Get(f.ctx, client.ObjectKeyFromObject(claim), got))
			assert.NotContains(c, got.Annotations, v1alpha1.ReservationRecordAnnotation, "the new IPAddress holds it")
		}, waitTimeout, pollInterval)
		assert.Len(t, f.markedRecords(), 1)
	})
}

func TestCrashAfterReservationBeforeIPAddressFindsTheSameAddress(t *testing.T) {
	forEachSystem(t, func(t *testing.T, f *fixture) {
		f.filter = "crash-" + f.ns
		f.seedNetwork("10.21.0.0/24")
		f.createPool("pool", "10.21.0.0/24")

		// The first manager dies the moment it tries to write the IPAddress,
		// after NetBox has made the reservation.
		crashCtx, crash := context.WithCancel(f.ctx)
		done, err := startManager(crashCtx, f.filter, "", func(c client.WithWatch) client.Client {
			return interceptor.NewClient(c, interceptor.Funcs{
				Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
					if _, ok := obj.(*ipamv1.IPAddress); ok {
						crash()
						return errors.New("simulated crash")
					}
					return c.Create(ctx, obj, opts...)
				},
			})
		})
		require.NoError(t, err)
		claim := f.createClaim("machine", "pool")
		<-done
		reserved := f.markedRecords()
		require.Len(t, reserved, 1, "the first manager reserved an address before dying")

		// A new manager picks the claim up.
		done, err = startManager(f.ctx, f.filter, "", nil)
		require.NoError(t, err)
		address := f.waitBound(claim)

		assert.Equal(t, reserved[0].Address.Addr().String(), address.Spec.Address)
		assert.Len(t, f.markedRecords(), 1)
		assert.Equal(t, 1, f.sys.allocationRequests(), "the second manager made no reservation")
		_ = done
	})
}

// TestLostAnswerLeavesOneRecord: the answer to a reservation is lost and the
// request sent again; the claim keeps the first record (conformance:
// LostAnswerLeavesOneRecord).
func TestLostAnswerLeavesOneRecord(t *testing.T) {
	forEachSystem(t, func(t *testing.T, f *fixture) {
		f.seedNetwork("10.22.0.0/24")
		pool := f.createPool("pool", "10.22.0.0/24")
		f.waitPoolReady(pool)
		// NetBox makes the reservation but the answer is lost, so the client
		// sends the POST again and NetBox makes a second one.
		f.sys.loseNextAllocationAnswer()

		address := f.waitBound(f.createClaim("machine", "pool"))

		assert.Equal(t, 2, f.sys.allocationRequests(), "the POST was sent twice")
		records := f.markedRecords()
		require.Len(t, records, 1, "the duplicate was released")
		assert.Equal(t, "10.22.0.2/24", records[0].Address.String(), "the first reservation is kept")
		assert.Equal(t, "10.22.0.2", address.Spec.Address)
	})
}

func TestReleaseLeavesARecordWhoseMarkerWasRemoved(t *testing.T) {
	forEachSystem(t, func(t *testing.T, f *fixture) {
		f.seedNetwork("10.24.0.0/24")
		f.createPool("pool", "10.24.0.0/24")
		claim := f.createClaim("machine", "pool")
		f.waitBound(claim)
		records := f.markedRecords()
		require.Len(t, records, 1)

		// The IPAM team takes the address over by clearing the marker.
		f.sys.disown(records[0])
		f.deleteClaim(claim)

		assert.True(t, f.sys.holds(records[0].Address.Addr()), "the record without the marker is left in place")
		e := f.waitEvent(f.ns, claim.Name, reasons.ReleaseSkippedReason)
		assert.Contains(t, e.Note, "10.24.0.2/24")
		f.waitEvent(f.ns, "pool", reasons.ReleaseSkippedReason)
	})
}

func TestIdentityKeepsManagementClustersApart(t *testing.T) {
	forEachSystem(t, func(t *testing.T, f *fixture) {
		f.filter = "identity-" + f.ns
		f.seedNetwork("10.25.0.0/24")
		// Another management cluster without an identity holds ns/machine.
		f.sys.reserveForeign(netip.MustParsePrefix("10.25.0.2/24"), f.ns+"/machine")
		_, err := startManager(f.ctx, f.filter, "mgmt-b", nil)
		require.NoError(t, err)
		f.createPool("pool", "10.25.0.0/24")

		address := f.waitBound(f.createClaim("machine", "pool"))

		assert.Equal(t, "10.25.0.3", address.Spec.Address, "the other cluster's reservation is not adopted")
		assert.Len(t, f.recordsWithMarker("mgmt-b/"+f.ns+"/machine"), 1)
	})
}

// Two management clusters that share one IPAM system are kept apart with no
// identity configured: markers carry the cluster's kube-system UID, so a
// claim never adopts, nor releases, the record of a claim of the same
// namespace and name in another management cluster, identity-less or not.
func TestManagementClustersAreApartByDefault(t *testing.T) {
	forEachSystem(t, func(t *testing.T, f *fixture) {
		f.seedNetwork("10.34.0.0/24")
		f.sys.reserveForeign(netip.MustParsePrefix("10.34.0.2/24"), "5c6f9a8e-0d1b-4f43-9a7e-2b8c1d0e3f41/"+f.ns+"/machine")
		f.sys.reserveForeign(netip.MustParsePrefix("10.34.0.3/24"), f.ns+"/machine")
		f.createPool("pool", "10.34.0.0/24")

		claim := f.createClaim("machine", "pool")
		address := f.waitBound(claim)
		assert.Equal(t, "10.34.0.4", address.Spec.Address, "neither foreign reservation is adopted")
		assert.Len(t, f.recordsWithMarker(f.marker("machine")), 1)

		f.deleteClaim(claim)
		assert.Empty(t, f.recordsWithMarker(f.marker("machine")))
		assert.Len(t, f.markedRecords(), 2, "the other clusters' records are untouched")
	})
}

// A record found by the claim's marker is adopted only if the pool could
// have given it: one outside the pool's sources is neither adopted nor
// deleted, and the claim says so and gets nothing.
func TestReservationOutsideThePoolIsNotAdopted(t *testing.T) {
	forEachSystem(t, func(t *testing.T, f *fixture) {
		f.seedNetwork("10.29.0.0/24")
		f.seedNetwork("10.37.0.0/24")
		f.sys.reserveForeign(netip.MustParsePrefix("10.37.0.5/24"), f.marker("machine"))
		f.createPool("pool", "10.29.0.0/24")

		claim := f.createClaim("machine", "pool")
		cond := f.waitClaimReason(claim, reasons.ReservationOutsidePoolReason)
		assert.Contains(t, cond.Message, "10.37.0.5")
		f.waitEvent(f.ns, claim.Name, reasons.ReservationOutsidePoolReason)
		assert.Zero(t, f.sys.allocationRequests(), "nothing was handed out")
		assert.Len(t, f.recordsWithMarker(f.marker("machine")), 1, "the record is left alone")
	})
}
