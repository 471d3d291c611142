package conformance

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends"
)

// recordsOfAnotherClusterAreNeverTouched: two management clusters share the
// system, each with its own backend and a claim conformance/twin (GitOps
// clones name things alike), told apart by the identity in their markers.
// The IPAM team deletes one cluster's record and the other's claim is
// answered its address; then each cluster audits, releases, retires and
// re-marks in turn. Neither ever takes, restores onto or deletes the
// other's record.
func recordsOfAnotherClusterAreNeverTouched(t *testing.T, h Harness, cidr string) {
	ctx := context.Background()
	here := h.Pool(t, cidr)
	there := h.PoolOver(t, PoolOptions{}, cidr)
	validated(t, here)
	validated(t, there)
	a, b := claim("twin"), claim("twin")
	a.Marker, b.Marker = "cluster-a/conformance/twin", "cluster-b/conformance/twin"
	a.Recorded, b.Recorded = a.Marker, b.Marker

	allocA, err := here.Allocate(ctx, a)
	require.NoError(t, err)
	lastA := allocA.Reservation()
	lastA.Marker = a.Marker
	// The IPAM team deletes a's record by mistake: the address is free, and
	// the other cluster's claim gets it.
	require.NoError(t, here.Delete(ctx, backends.Record{Address: allocA.Address, Marker: a.Marker, Reference: allocA.Reference}))
	allocB, err := there.Allocate(ctx, b)
	require.NoError(t, err)
	require.Equal(t, allocA.Address, allocB.Address, "the other cluster's claim is answered the freed address")
	lastB := allocB.Reservation()
	lastB.Marker = b.Marker
	theirs := []Reservation{{Address: allocB.Address.Addr(), Marker: b.Marker, Reference: allocB.Reference}}

	// a's audit finds its address held, and restores nothing onto it.
	_, err = here.Lookup(ctx, a)
	require.ErrorIs(t, err, backends.ErrNotFound, "a's lookup never finds b's record")
	_, err = here.Restore(ctx, a, allocA.Address)
	require.ErrorIs(t, err, backends.ErrAddressTaken)
	assert.Equal(t, theirs, markedWith(h.Reservations(t, cidr), b.Marker), "b's record keeps its marker")

	// a's writes by reference reach b's record (its reference may even be
	// a's old one) and change nothing.
	rec := backends.Record{Address: allocB.Address, Marker: a.Marker, Reference: allocB.Reference}
	require.ErrorIs(t, here.Remark(ctx, rec, "cluster-a/conformance/other"), backends.ErrNotOwned)
	require.ErrorIs(t, here.Delete(ctx, rec), backends.ErrNotOwned)
	// a's release and retirement leave b's record, whatever a recorded.
	if err := here.Retire(ctx, a, lastA, time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)); err != nil {
		require.ErrorIs(t, err, backends.ErrNotOwned, "at most it says the record is another's")
	}
	if err := here.Release(ctx, a, lastA); err != nil {
		require.ErrorIs(t, err, backends.ErrNotOwned, "at most it says the record is another's")
	}
	assert.Equal(t, theirs, markedWith(h.Reservations(t, cidr), b.Marker), "b's record survives a's audit, release and retirement")

	// The other order: a is reserved again (elsewhere), and b's release
	// leaves a's record alone.
	again, err := here.Allocate(ctx, a)
	require.NoError(t, err)
	require.NotEqual(t, allocB.Address, again.Address)
	require.NoError(t, there.Release(ctx, b, lastB))
	assert.Empty(t, markedWith(h.Reservations(t, cidr), b.Marker))
	assert.Equal(t, []Reservation{{Address: again.Address.Addr(), Marker: a.Marker, Reference: again.Reference}},
		markedWith(h.Reservations(t, cidr), a.Marker), "b's release leaves a's record")
	last := again.Reservation()
	last.Marker = a.Marker
	require.NoError(t, here.Release(ctx, a, last))
	assert.Empty(t, h.Reservations(t, cidr))
}
