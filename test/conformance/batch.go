package conformance

import (
	"context"
	"fmt"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go4.org/netipx"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends"
)

// Claims allocated or released at once share requests: one marker search
// and one request for the whole batch. These cases hold every backend to
// the same costs and to the same fallbacks when a batch cannot be answered
// as a whole.

// batchOf makes claims allocated or released at once share requests, n at
// a time. The window is long so that only a full batch starts: the cases
// then see exactly one batch, whatever the machine's speed.
func batchOf(n int) PoolOptions {
	return PoolOptions{Batch: backends.BatchOptions{MaxSize: n, Window: time.Hour}}
}

// subnets splits cidr into its networks of bits.
func subnets(cidr string, bits int) []string {
	network := netip.MustParsePrefix(cidr)
	var out []string
	for p := netip.PrefixFrom(network.Addr(), bits); network.Contains(p.Addr()); p = netip.PrefixFrom(netipx.PrefixLastIP(p).Next(), bits) {
		out = append(out, p.String())
	}
	return out
}

func numbered(prefix string, n int) []backends.Claim {
	out := make([]backends.Claim, n)
	for i := range out {
		out[i] = claim(fmt.Sprintf("%s-%02d", prefix, i))
	}
	return out
}

// allocateAll allocates for the claims at once, as the claim workers do.
func allocateAll(b backends.Backend, cs []backends.Claim) ([]backends.Allocation, []error) {
	allocs := make([]backends.Allocation, len(cs))
	errs := make([]error, len(cs))
	var wg sync.WaitGroup
	for i, c := range cs {
		wg.Go(func() { allocs[i], errs[i] = b.Allocate(context.Background(), c) })
	}
	wg.Wait()
	return allocs, errs
}

func releaseAll(b backends.Backend, cs []backends.Claim, allocs []backends.Allocation) []error {
	errs := make([]error, len(cs))
	var wg sync.WaitGroup
	for i, c := range cs {
		wg.Go(func() { errs[i] = b.Release(context.Background(), c, allocs[i].Reservation()) })
	}
	wg.Wait()
	return errs
}

// requireOwnAddresses checks that each claim got a distinct address whose
// only record carries its marker.
func requireOwnAddresses(t *testing.T, h Harness, cidr string, cs []backends.Claim, allocs []backends.Allocation, errs []error) {
	t.Helper()
	requireOwnAddressesAmong(t, h, cidr, cs, allocs, errs, 1)
}

// requireOwnAddressesAmong is requireOwnAddresses where each claim may hold
// up to records records, the oldest its own (a lost answer's duplicates,
// left for the late-record sweep).
func requireOwnAddressesAmong(t *testing.T, h Harness, cidr string, cs []backends.Claim, allocs []backends.Allocation, errs []error, records int) {
	t.Helper()
	rs := h.Reservations(t, cidr)
	seen := map[netip.Prefix]string{}
	for i, c := range cs {
		require.NoError(t, errs[i], c.Marker)
		require.NotContains(t, seen, allocs[i].Address, "%s and %s got the same address", seen[allocs[i].Address], c.Marker)
		seen[allocs[i].Address] = c.Marker
		mine := markedWith(rs, c.Marker)
		require.NotEmpty(t, mine, c.Marker)
		require.LessOrEqual(t, len(mine), records, c.Marker)
		assert.Contains(t, mine, Reservation{Address: allocs[i].Address.Addr(), Marker: c.Marker, Reference: allocs[i].Reference}, c.Marker)
	}
}

func batchSharesOneSearchAndOneRequest(t *testing.T, h Harness, cidr string) {
	const n = 20
	networks := subnets(cidr, 24)
	for i, tc := range []struct {
		name     string
		batch    int
		requests int
	}{
		{name: "batching off", batch: 1, requests: 2 * n},
		{name: "batching on", batch: n, requests: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h.Pool(t, networks[i])
			b := h.PoolOver(t, batchOf(tc.batch), networks[i])
			validated(t, b)

			cs := numbered(fmt.Sprintf("share-%d", tc.batch), n)
			before := h.Requests()
			allocs, errs := allocateAll(b, cs)
			requireOwnAddresses(t, h, networks[i], cs, allocs, errs)
			assert.Equal(t, tc.requests, h.Requests()-before, "a marker search and a creation, each for the claims of a batch")

			// Allocating again adopts: the marker searches only.
			before = h.Requests()
			again, errs := allocateAll(b, cs)
			requireOwnAddresses(t, h, networks[i], cs, again, errs)
			assert.Equal(t, allocs, again)
			assert.Equal(t, tc.requests/2, h.Requests()-before, "an existing reservation costs the marker search only")
		})
	}
}

// refusedRecordFailsOnlyItsClaim: a record the system refuses makes it
// refuse the whole batch; the batch then sends one request per claim, and
// only that claim fails, with the system's own reason.
func refusedRecordFailsOnlyItsClaim(t *testing.T, h Harness, cidr string) {
	b, refusal := h.RefusingPool(t, cidr, batchOf(4))
	validated(t, b)

	cs := []backends.Claim{claim("refused-a"), claim("refused-b"), claim(refusal.Name), claim("refused-d")}
	before := h.Requests()
	allocs, errs := allocateAll(b, cs)
	requests := h.Requests() - before

	require.ErrorIs(t, errs[2], refusal.Kind)
	assert.Contains(t, errs[2].Error(), refusal.Text, "the system's own reason")
	assert.Empty(t, markedWith(h.Reservations(t, cidr), cs[2].Marker))
	good := []int{0, 1, 3}
	var goodClaims []backends.Claim
	var goodAllocs []backends.Allocation
	var goodErrs []error
	for _, i := range good {
		goodClaims, goodAllocs, goodErrs = append(goodClaims, cs[i]), append(goodAllocs, allocs[i]), append(goodErrs, errs[i])
	}
	requireOwnAddresses(t, h, cidr, goodClaims, goodAllocs, goodErrs)
	assert.Equal(t, 1+1+len(cs), requests, "the marker search, the refused batch, then one request per claim")
}

// lostBatchAnswerIsAdoptedByMarkers: a batch whose answer is lost is resent
// by the HTTP client; the claims keep the records of the first attempt,
// found by their markers, and the duplicates the answered attempt made are
// released: no claim is handed a second address. Those of attempts whose
// answers were lost are left for the late-record sweep (see
// lostAnswersKeepTheOldestRecord).
func lostBatchAnswerIsAdoptedByMarkers(t *testing.T, h Harness, cidr string) {
	const n = 5
	networks := subnets(cidr, 24)
	for i, tc := range []struct {
		name     string
		lost     int // answers lost in a row
		attempts int
	}{
		{name: "the resent request answers", lost: 1, attempts: 2},
		{name: "every answer lost", lost: 3, attempts: 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h.Pool(t, networks[i])
			o := batchOf(n)
			o.RetryMax = 2
			b := h.PoolOver(t, o, networks[i])
			validated(t, b)
			h.LoseAllocationAnswers(t, tc.lost)

			cs := numbered(fmt.Sprintf("lost-%d", tc.lost), n)
			before := h.Requests()
			allocs, errs := allocateAll(b, cs)
			records := n * tc.attempts
			deletions := 0
			if tc.lost < tc.attempts {
				// The answered attempt's records, one request each.
				records, deletions = n*(tc.attempts-1), n
			}
			requireOwnAddressesAmong(t, h, networks[i], cs, allocs, errs, records/n)
			assert.Equal(t, 1+tc.attempts+1+deletions, h.Requests()-before,
				"the marker search, one batch resent by the client only, the search resolving it, one deletion per record the answered attempt made")
			first := netip.MustParsePrefix(networks[i]).Addr()
			for range 7 {
				first = first.Next()
			}
			for _, a := range allocs {
				// The first attempt took .2 to .6; resent ones took later addresses.
				assert.True(t, a.Address.Addr().Less(first), "%s is not the first attempt's", a.Address)
			}
			assert.Len(t, h.Reservations(t, networks[i]), records, "one record per claim and attempt whose answer was lost")
		})
	}
}

// batchLargerThanItsSourceFillsItAndMovesOn: a source with fewer free
// addresses than the batch gives out what it has, one claim at a time, and
// the rest move on to the next source together.
func batchLargerThanItsSourceFillsItAndMovesOn(t *testing.T, h Harness, cidr string) {
	networks := subnets(cidr, 24)
	small := netip.PrefixFrom(netip.MustParsePrefix(networks[0]).Addr(), 29).String()
	h.Pool(t, small)
	h.Pool(t, networks[1])
	b := h.PoolOver(t, batchOf(8), small, networks[1])
	validated(t, b)

	cs := numbered("fill", 8)
	before := h.Requests()
	allocs, errs := allocateAll(b, cs)
	requests := h.Requests() - before
	in := map[string][]int{}
	for i, a := range allocs {
		require.NoError(t, errs[i])
		network := networks[1]
		if netip.MustParsePrefix(small).Contains(a.Address.Addr()) {
			network = small
		}
		in[network] = append(in[network], i)
	}
	for network, is := range in {
		var inClaims []backends.Claim
		var inAllocs []backends.Allocation
		for _, i := range is {
			inClaims, inAllocs = append(inClaims, cs[i]), append(inAllocs, allocs[i])
		}
		requireOwnAddresses(t, h, network, inClaims, inAllocs, make([]error, len(is)))
	}
	assert.Len(t, in[small], 5, "the first source's five free addresses")
	assert.Equal(t, 1+1+5+1+1, requests,
		"the marker search, the batch the first source refuses, five claims alone, the sixth finding it full, the other three together")

	// A full pool fails each claim of a batch with ErrExhausted.
	_, errs = allocateAll(h.PoolOver(t, batchOf(2), small), []backends.Claim{claim("fill-x"), claim("fill-y")})
	for _, err := range errs {
		assert.ErrorIs(t, err, backends.ErrExhausted)
	}
}

// allocatedOneByOne gives n claims an address each in cidr, without
// batching, for release cases to start from.
func allocatedOneByOne(t *testing.T, h Harness, cidr, prefix string, n int) ([]backends.Claim, []backends.Allocation) {
	t.Helper()
	h.Pool(t, cidr)
	cs := numbered(prefix, n)
	allocs, errs := allocateAll(h.PoolOver(t, batchOf(1), cidr), cs)
	requireOwnAddresses(t, h, cidr, cs, allocs, errs)
	return cs, allocs
}

func batchedReleaseDeletesExactlyTheClaimsRecords(t *testing.T, h Harness, cidr string) {
	cs, allocs := allocatedOneByOne(t, h, cidr, "release", 6)
	other := netip.PrefixFrom(netip.MustParsePrefix(cidr).Addr(), 24)
	for range 200 {
		other = netip.PrefixFrom(other.Addr().Next(), other.Bits())
	}
	h.Hold(t, other, "elsewhere/ns/someone-else")

	b := h.PoolOver(t, batchOf(5), cidr)
	before := h.Requests()
	for _, err := range releaseAll(b, cs[:5], allocs[:5]) {
		require.NoError(t, err)
	}
	assert.Equal(t, 2, h.Requests()-before, "one marker search and one deletion")
	rs := h.Reservations(t, cidr)
	for _, c := range cs[:5] {
		assert.Empty(t, markedWith(rs, c.Marker), c.Marker)
	}
	assert.Len(t, markedWith(rs, cs[5].Marker), 1, "a claim not released keeps its record")
	assert.Len(t, rs, 2, "the sixth claim's and someone else's")

	// Releasing again finds nothing and deletes nothing.
	before = h.Requests()
	for _, err := range releaseAll(b, cs[:5], allocs[:5]) {
		require.NoError(t, err)
	}
	assert.Equal(t, 1+5, h.Requests()-before, "the marker search, and a read of each recorded record")
	assert.Len(t, h.Reservations(t, cidr), 2)
}

// failedBulkDeletionFallsBack: a deletion of the batch's records that fails
// falls back to one deletion per record, so each claim gets its own answer.
func failedBulkDeletionFallsBack(t *testing.T, h Harness, cidr string) {
	cs, allocs := allocatedOneByOne(t, h, cidr, "bulk", 3)

	o := batchOf(3)
	o.RetryMax = 1
	b := h.PoolOver(t, o, cidr)
	attempts := h.FailBulkDeletions(t, o.RetryMax)
	before := h.Requests()
	for _, err := range releaseAll(b, cs, allocs) {
		require.NoError(t, err)
	}
	assert.Equal(t, 1+attempts+len(cs), h.Requests()-before, "the marker search, the bulk deletion's attempts, then one per record")
	rs := h.Reservations(t, cidr)
	for _, c := range cs {
		assert.Empty(t, markedWith(rs, c.Marker), c.Marker)
	}
}
