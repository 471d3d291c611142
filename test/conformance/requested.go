package conformance

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go4.org/netipx"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends"
)

// A claim that requests an address gets exactly that address or none, and
// is otherwise a claim like any other: idempotent by its marker, released
// by it, one record after a lost answer. These cases hold every backend to
// it.

// requesting is the claim name requesting addr.
func requesting(name string, addr netip.Addr) backends.Claim {
	c := claim(name)
	c.Requested = addr
	return c
}

// nth is the address n after the network address of cidr.
func nth(cidr string, n int) netip.Addr {
	a := netip.MustParsePrefix(cidr).Masked().Addr()
	for range n {
		a = a.Next()
	}
	return a
}

// requestedAddressIsReserved: a free address in a source is reserved for
// the claim, with the network's prefix length and gateway; asking again
// adopts it; Lookup finds it; Release deletes it, and it is free again.
func requestedAddressIsReserved(t *testing.T, h Harness, cidr string) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		cidr string
		addr int // from the network address
	}{
		{name: "IPv4", cidr: netip.PrefixFrom(nth(cidr, 0), 28).String(), addr: 9},
		{name: "IPv4, the last usable address", cidr: netip.PrefixFrom(nth(cidr, 16), 28).String(), addr: 14},
		{name: "IPv6", cidr: "2001:db8:240::/64", addr: 0x99},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := h.Pool(t, tc.cidr)
			validated(t, b)
			want := nth(tc.cidr, tc.addr)
			c := requesting(fmt.Sprintf("requested-%d", tc.addr), want)

			alloc, err := b.Allocate(ctx, c)
			require.NoError(t, err)
			network := netip.MustParsePrefix(tc.cidr)
			assert.Equal(t, netip.PrefixFrom(want, network.Bits()), alloc.Address, "exactly the requested address, with the network's length")
			assert.Equal(t, network.Addr().Next(), alloc.Gateway)
			mine := markedWith(h.Reservations(t, tc.cidr), c.Marker)
			require.Len(t, mine, 1)
			assert.Equal(t, Reservation{Address: want, Marker: c.Marker, Reference: alloc.Reference}, mine[0])

			before := h.Requests()
			again, err := b.Allocate(ctx, c)
			require.NoError(t, err)
			assert.Equal(t, alloc, again, "allocating again adopts the record")
			assert.LessOrEqual(t, h.Requests()-before, 3,
				"the marker search, and a look at who else holds the address (on Infoblox, the address and its objects)")
			found, err := b.Lookup(ctx, c)
			require.NoError(t, err)
			assert.Equal(t, alloc.Address, found.Address)

			require.NoError(t, b.Release(ctx, c, alloc.Reservation()))
			assert.Empty(t, markedWith(h.Reservations(t, tc.cidr), c.Marker), "released like any other")
			next, err := b.Allocate(ctx, claim(fmt.Sprintf("after-requested-%d", tc.addr)))
			require.NoError(t, err)
			if tc.addr == 14 {
				assert.Equal(t, nth(tc.cidr, 2), next.Address.Addr(), "the next free address is the first")
			}
		})
	}
}

// requestedAddressHeldByOthersIsRefused: an address that a record holds
// (another claim's, someone else's without a marker, a tombstone kept for
// a grace period) is never the requesting claim's, nor is an address
// outside the sources, a network or broadcast address, or the gateway. The
// error says why and names the holder, and nothing is reserved.
func requestedAddressHeldByOthersIsRefused(t *testing.T, h Harness, cidr string) {
	ctx := context.Background()
	b := h.Pool(t, cidr)
	validated(t, b)
	network := netip.MustParsePrefix(cidr)
	h.Hold(t, netip.PrefixFrom(nth(cidr, 5), network.Bits()), "")
	h.Hold(t, netip.PrefixFrom(nth(cidr, 6), network.Bits()), "elsewhere/ns/someone-else")
	retired, err := b.Allocate(ctx, requesting("retired", nth(cidr, 7)))
	require.NoError(t, err)
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	require.NoError(t, b.Retire(ctx, claim("retired"), retired.Reservation(), at))

	for _, tc := range []struct {
		name    string
		addr    netip.Addr
		says    []string
		holders int
	}{
		{name: "a record without a marker", addr: nth(cidr, 5), says: []string{"held by", "no marker"}, holders: 1},
		{name: "another claim's record", addr: nth(cidr, 6), says: []string{"held by", "elsewhere/ns/someone-else"}, holders: 1},
		{name: "a tombstone", addr: nth(cidr, 7), says: []string{"tombstone", "conformance/retired", "2026-01-02T03:04:05Z"}, holders: 1},
		{name: "outside the sources", addr: netip.MustParseAddr("10.251.7.7"), says: []string{"none of the pool's sources"}},
		{name: "another family", addr: netip.MustParseAddr("2001:db8:ffff::7"), says: []string{"none of the pool's sources"}},
		{name: "the network address", addr: network.Addr(), says: []string{"network or broadcast address"}},
		{name: "the broadcast address", addr: netipx.PrefixLastIP(network), says: []string{"network or broadcast address"}},
		{name: "the gateway", addr: network.Addr().Next(), says: []string{"gateway"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := requesting("refused-"+strings.ReplaceAll(tc.name, " ", "-"), tc.addr)
			_, err := b.Allocate(ctx, c)
			require.ErrorIs(t, err, backends.ErrRequestedUnavailable)
			var unavailable *backends.RequestedUnavailableError
			require.ErrorAs(t, err, &unavailable)
			assert.Equal(t, tc.addr, unavailable.Address)
			assert.Len(t, unavailable.Holders, tc.holders)
			for _, s := range append(tc.says, tc.addr.String()) {
				assert.Contains(t, err.Error(), s)
			}
			assert.Empty(t, markedWith(h.Reservations(t, cidr), c.Marker), "nothing was reserved for the claim")
		})
	}
}

// requestedAddressLostAnswerLeavesOneRecord: the create of a requested
// address whose answer is lost is resent by the client and refused as a
// duplicate, or makes a second record; the marker decides, and the claim
// keeps one record at its address: a second record at the address it keeps
// holds nothing anyone could bind elsewhere, and is released.
func requestedAddressLostAnswerLeavesOneRecord(t *testing.T, h Harness, cidr string) {
	ctx := context.Background()
	for i, lost := range []int{1, 2} {
		t.Run(fmt.Sprintf("%d answers lost", lost), func(t *testing.T) {
			network := netip.PrefixFrom(nth(cidr, 64*i), 26).String()
			h.Pool(t, network)
			b := h.PoolOver(t, PoolOptions{RetryMax: 2}, network)
			validated(t, b)
			want := nth(network, 20)
			c := requesting(fmt.Sprintf("requested-lost-%d", lost), want)
			h.LoseRequestedAnswers(t, lost)

			alloc, err := b.Allocate(ctx, c)
			require.NoError(t, err)
			assert.Equal(t, want, alloc.Address.Addr())
			mine := markedWith(h.Reservations(t, network), c.Marker)
			require.Len(t, mine, 1, "one record")
			assert.Equal(t, alloc.Reference, mine[0].Reference)
			assert.Len(t, h.Reservations(t, network), 1, "nothing else was made")

			again, err := b.Allocate(ctx, c)
			require.NoError(t, err)
			assert.Equal(t, alloc, again)
		})
	}
}

// requestedClaimInABatchFailsAlone: claims allocated at once, some asking
// for the next free address and some requesting one: each requested
// address is reserved, one that is held fails its claim alone, and the
// others never get a requested address.
func requestedClaimInABatchFailsAlone(t *testing.T, h Harness, cidr string) {
	h.Pool(t, cidr)
	b := h.PoolOver(t, batchOf(6), cidr)
	validated(t, b)
	network := netip.MustParsePrefix(cidr)
	h.Hold(t, netip.PrefixFrom(nth(cidr, 40), network.Bits()), "")

	cs := []backends.Claim{
		claim("batch-any-a"), requesting("batch-wants-2", nth(cidr, 2)), claim("batch-any-b"),
		requesting("batch-wants-held", nth(cidr, 40)), claim("batch-any-c"), requesting("batch-wants-50", nth(cidr, 50)),
	}
	allocs, errs := allocateAll(b, cs)

	require.ErrorIs(t, errs[3], backends.ErrRequestedUnavailable)
	assert.Empty(t, markedWith(h.Reservations(t, cidr), cs[3].Marker))
	var okClaims []backends.Claim
	var okAllocs []backends.Allocation
	var okErrs []error
	for i, c := range cs {
		if i == 3 {
			continue
		}
		okClaims, okAllocs, okErrs = append(okClaims, c), append(okAllocs, allocs[i]), append(okErrs, errs[i])
		if c.Requested.IsValid() {
			assert.Equal(t, c.Requested, allocs[i].Address.Addr(), c.Marker)
		} else {
			assert.NotEqual(t, nth(cidr, 2), allocs[i].Address.Addr(), "%s took the address another claim requested", c.Marker)
		}
	}
	requireOwnAddresses(t, h, cidr, okClaims, okAllocs, okErrs)
}

// claimsRequestingOneAddressGetItOnce: claims of two managers (two
// processes, or two management clusters, which share no lock) that request
// the same address at once leave one record: one claim gets the address,
// each other is told who holds it. Each manager's first claim creates its
// record before either create is answered (RaceWrites), so the path where
// both writers made a record, and the system refuses the second or the
// oldest keeps the address, is the one taken; the second claim of each
// manager takes its turn after its first. Where the system keeps no
// creation order, every racing record may yield: then the claims' retries
// settle it.
func claimsRequestingOneAddressGetItOnce(t *testing.T, h Harness, cidr string) {
	validated(t, h.Pool(t, cidr))
	want := nth(cidr, 33)
	managers := []backends.Backend{
		h.PoolOver(t, batchOf(1), cidr),
		h.PoolOver(t, PoolOptions{Batch: batchOf(1).Batch, SecondWriter: true}, cidr),
	}
	const perManager = 2
	n := len(managers) * perManager
	cs := make([]backends.Claim, n)
	for i := range cs {
		cs[i] = requesting(fmt.Sprintf("race-%d", i), want)
	}
	raced := h.RaceWrites(t, RequestedCreate, len(managers))
	allocs := make([]backends.Allocation, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range cs {
		wg.Go(func() { allocs[i], errs[i] = managers[i%len(managers)].Allocate(context.Background(), cs[i]) })
	}
	wg.Wait()
	require.True(t, raced.Complete(), "the managers took turns: %d of %d created a record at %s before either was answered",
		raced.Arrived(), len(managers), want)

	// At most one claim of the race gets the address. Where the system
	// keeps no creation order, racing records all yield and none may get
	// it: the claims retry with backoff, which spreads them out, as here
	// one at a time; then exactly one holds it, and a claim that got it
	// keeps it.
	winner := -1
	for i, err := range errs {
		if err == nil {
			require.Equal(t, -1, winner, "%s and %s both got %s", cs[max(winner, 0)].Marker, cs[i].Marker, want)
			winner = i
			assert.Equal(t, want, allocs[i].Address.Addr())
			continue
		}
		require.ErrorIs(t, err, backends.ErrRequestedUnavailable, cs[i].Marker)
	}
	raceWinner := winner
	after := h.Reservations(t, cidr)
	require.LessOrEqual(t, len(after), 1, "the records that lost the race are dropped: %v", after)
	if raceWinner != -1 {
		require.Len(t, after, 1, "the race's winner holds one record")
		assert.Equal(t, cs[raceWinner].Marker, after[0].Marker)
	}
	for i := range cs {
		allocs[i], errs[i] = managers[i%len(managers)].Allocate(context.Background(), cs[i])
		if errs[i] == nil {
			require.True(t, winner == -1 || winner == i, "%s and %s both got %s", cs[max(winner, 0)].Marker, cs[i].Marker, want)
			winner = i
			continue
		}
		require.ErrorIs(t, errs[i], backends.ErrRequestedUnavailable, cs[i].Marker)
	}
	require.NotEqual(t, -1, winner, "one claim gets the address: %v", errs)
	if raceWinner != -1 {
		assert.Equal(t, raceWinner, winner, "the claim that got the address in the race keeps it")
	}
	rs := h.Reservations(t, cidr)
	require.Len(t, rs, 1, "one record holds the address")
	assert.Equal(t, cs[winner].Marker, rs[0].Marker)
	for i, err := range errs {
		if i != winner {
			var unavailable *backends.RequestedUnavailableError
			require.ErrorAs(t, err, &unavailable, cs[i].Marker)
			assert.Contains(t, err.Error(), cs[winner].Marker, "the error names the claim that holds it")
		}
	}
}
