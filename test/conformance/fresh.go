package conformance

import (
	"context"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends"
)

// Fresh claims (backends.Claim.Fresh) are reserved while their markers are
// searched for, not after, where the driver searches oldest first. A fresh
// claim that held a record all the same (its finalizer removed by hand,
// say) is answered as a search first would have answered it.

// freshClaimsAnsweredAsASearchFirstWould: three fresh claims in one batch,
// the second of which held a record before. Within the pool, it keeps that
// record and the batch's record for it is deleted; outside the pool, it is
// told so and gets nothing, and the batch's record for it is deleted too.
// The others keep what the batch made for them, in one request.
func freshClaimsAnsweredAsASearchFirstWould(t *testing.T, h Harness, cidr string) {
	quarters := subnets(cidr, netip.MustParsePrefix(cidr).Bits()+2)
	for _, tc := range []struct {
		name         string
		pool, heldIn string
		outside      bool
	}{
		{"held within the pool", quarters[0], quarters[0], false},
		{"held outside the pool", quarters[2], quarters[3], true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			holder := h.Pool(t, tc.pool)
			b := h.PoolOver(t, batchOf(3), tc.pool)
			validated(t, b)
			cs := numbered("fresh-"+map[bool]string{false: "in", true: "out"}[tc.outside], 3)
			// The second claim's record, made before its finalizer was
			// removed by hand, by a pool over where it lies.
			if tc.outside {
				holder = h.Pool(t, tc.heldIn)
				validated(t, holder)
			}
			held, err := holder.Allocate(context.Background(), cs[1])
			require.NoError(t, err)
			// Released afterwards, so that a NetBox that outlives the run
			// holds no record of these claims the next run would find.
			t.Cleanup(func() {
				assert.Equal(t, make([]error, len(cs)), releaseAll(b, cs, make([]backends.Allocation, len(cs))))
				assert.NoError(t, holder.Release(context.Background(), cs[1], held.Reservation()))
			})
			for i := range cs {
				cs[i].Fresh = true
			}
			before := h.Requests()

			allocs, errs := allocateAll(b, cs)
			if backends.Offers(b, backends.RoleOldestFirst) {
				assert.Equal(t, 4, h.Requests()-before, "a search beside the batch's request, the request, and for the claim that held a record, a search once the batch is done and the deletion of the batch's record for it")
			} else {
				assert.Equal(t, 2, h.Requests()-before, "a driver that does not search oldest first searches for fresh claims first: the search, and the request for the two others")
			}
			for _, i := range []int{0, 2} {
				require.NoError(t, errs[i])
				assert.Equal(t, []Reservation{{Address: allocs[i].Address.Addr(), Marker: cs[i].Marker, Reference: allocs[i].Reference}},
					markedWith(h.Reservations(t, tc.pool), cs[i].Marker))
			}
			if tc.outside {
				require.ErrorIs(t, errs[1], backends.ErrOutsidePool)
				assert.Empty(t, markedWith(h.Reservations(t, tc.pool), cs[1].Marker), "the batch's record for it is deleted")
				assert.Len(t, markedWith(h.Reservations(t, tc.heldIn), cs[1].Marker), 1, "what it held is left alone")
				return
			}
			require.NoError(t, errs[1])
			assert.Equal(t, held.Address.Addr(), allocs[1].Address.Addr(), "it keeps what it held")
			kept := markedWith(h.Reservations(t, tc.pool), cs[1].Marker)
			require.Len(t, kept, 1, "the batch's record for it is deleted")
			assert.Equal(t, held.Address.Addr(), kept[0].Address)
		})
	}
}
