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

// Carving is a harness whose system carves child prefixes out of a parent
// in one request (NetBox's available-prefixes): the carving cases run only
// against one.
type Carving interface {
	// CarvingPool creates parent in the system as a container with nothing
	// inside, and returns a backend that hands each claim a child of
	// length carved from it, with o.
	CarvingPool(t testing.TB, parent string, length int, o PoolOptions) backends.Backend
	// CarvingPoolOver returns another backend carving from a parent that
	// CarvingPool created.
	CarvingPoolOver(t testing.TB, parent string, length int, o PoolOptions) backends.Backend
	// Children lists the prefixes inside parent that carry a marker.
	Children(t testing.TB, parent string) []Child
	// LoseCarveAnswers makes the system apply the next n carve requests
	// and cut the connection each time without answering.
	LoseCarveAnswers(t testing.TB, n int)
	// DeleteChild deletes the child ref names, as the IPAM team would.
	DeleteChild(t testing.TB, ref string)
	// ClearChildMarker clears the marker of the child ref names, as the
	// IPAM team keeping it would.
	ClearChildMarker(t testing.TB, ref string)
	// CarveRequests counts the carve requests the system received: at
	// least every request that carved a lone claim's child.
	CarveRequests() int
}

// Child is a prefix carved for a claim.
type Child struct {
	Prefix    netip.Prefix
	Marker    string
	Reference string
}

// runCarving runs the carving cases against h, or skips them when its
// system carves nothing.
func runCarving(t *testing.T, h Harness) {
	c, ok := h.(Carving)
	if !ok {
		t.Skip("the harness's driver carves no child prefixes")
	}
	for _, tc := range []struct {
		name   string
		parent string
		length int
		test   func(*testing.T, Carving, string, int)
	}{
		{"CarveIsIdempotent", "10.202.0.0/22", 24, carveIsIdempotent},
		{"ConcurrentCarvesAreDisjointUntilFull", "10.202.4.0/24", 28, concurrentCarvesAreDisjointUntilFull},
		{"TwoWritersCarveDisjointChildren", "10.202.5.0/24", 28, twoWritersCarveDisjointChildren},
		{"LostCarveAnswerLeavesOneChild", "10.202.8.0/22", 24, lostCarveAnswerLeavesOneChild},
		{"BurstWithALostCarveAnswerLeavesOneChildEach", "10.202.12.0/24", 28, burstWithALostCarveAnswerLeavesOneChildEach},
		{"ReleaseDeletesOnlyTheClaimsChild", "10.202.16.0/22", 24, releaseDeletesOnlyTheClaimsChild},
		{"ChildDeletedByTheIPAMTeamIsNotFound", "10.202.20.0/22", 24, childDeletedByTheIPAMTeamIsNotFound},
		{"RetireKeepsTheChildAsATombstone", "10.202.24.0/22", 24, retireKeepsTheChildAsATombstone},
		{"ReleaseLeavesAChildWhoseMarkerWasCleared", "10.202.28.0/22", 24, releaseLeavesAChildWhoseMarkerWasCleared},
		{"KeepHandsTheChildToTheIPAMTeam", "10.202.32.0/22", 24, keepHandsTheChildToTheIPAMTeam},
		{"IPv6ChildPerClaim", "2001:db8:202::/56", 64, ipv6ChildPerClaim},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.test(t, c, tc.parent, tc.length) })
	}
}

// childrenOf indexes the children by marker.
func childrenOf(c Carving, t testing.TB, parent string) map[string][]Child {
	out := map[string][]Child{}
	for _, ch := range c.Children(t, parent) {
		out[ch.Marker] = append(out[ch.Marker], ch)
	}
	return out
}

// assertDisjoint fails t when two of the prefixes overlap.
func assertDisjoint(t testing.TB, prefixes []netip.Prefix) {
	t.Helper()
	var b netipx.IPSetBuilder
	for _, p := range prefixes {
		var one netipx.IPSetBuilder
		one.AddPrefix(p)
		s, _ := b.IPSet()
		o, _ := one.IPSet()
		if s.Overlaps(o) {
			t.Errorf("%s overlaps another child", p)
		}
		b.AddPrefix(p)
	}
}

func carveIsIdempotent(t *testing.T, c Carving, parent string, length int) {
	ctx := context.Background()
	b := c.CarvingPool(t, parent, length, PoolOptions{})
	validated(t, b)
	network := netip.MustParsePrefix(parent)

	first, err := b.Allocate(ctx, claim("carve"))
	require.NoError(t, err)
	assert.Equal(t, length, first.Address.Bits(), "the child's length")
	assert.Equal(t, first.Address.Masked(), first.Address, "the child's network address")
	assert.True(t, network.Contains(first.Address.Addr()), "%s inside %s", first.Address, parent)
	assert.False(t, first.Gateway.IsValid(), "a child has no gateway of the pool's")
	assert.NotEmpty(t, first.Reference)

	before := c.CarveRequests()
	again, err := b.Allocate(ctx, claim("carve"))
	require.NoError(t, err)
	assert.Equal(t, first, again)
	assert.Equal(t, before, c.CarveRequests(), "a claim that holds a child carves no other")
	found, err := b.Lookup(ctx, claim("carve"))
	require.NoError(t, err)
	assert.Equal(t, first.Address, found.Address)
	children := childrenOf(c, t, parent)["conformance/carve"]
	require.Len(t, children, 1)
	assert.Equal(t, first.Address, children[0].Prefix)
	assert.Equal(t, first.Reference, children[0].Reference)
}

func concurrentCarvesAreDisjointUntilFull(t *testing.T, c Carving, parent string, length int) {
	ctx := context.Background()
	b := c.CarvingPool(t, parent, length, PoolOptions{})
	validated(t, b)
	n := 1 << (length - netip.MustParsePrefix(parent).Bits())
	allocs := make([]backends.Allocation, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { allocs[i], errs[i] = b.Allocate(ctx, claim(fmt.Sprintf("fill-%d", i))) })
	}
	wg.Wait()
	var got []netip.Prefix
	for i := range n {
		require.NoError(t, errs[i], "claim %d", i)
		got = append(got, allocs[i].Address)
	}
	assertDisjoint(t, got)
	assert.Len(t, c.Children(t, parent), n, "one child per claim")
	u, err := b.Usage(ctx)
	require.NoError(t, err)
	assert.Equal(t, backends.Usage{Total: int64(n), Used: int64(n)}, u, "counted in blocks of the child length")

	_, err = b.Allocate(ctx, claim("one-too-many"))
	require.ErrorIs(t, err, backends.ErrExhausted)
	assert.Empty(t, childrenOf(c, t, parent)["conformance/one-too-many"])

	require.NoError(t, b.Release(ctx, claim("fill-3"), backends.Reservation{Address: allocs[3].Address, Reference: allocs[3].Reference}))
	freed, err := b.Allocate(ctx, claim("one-too-many"))
	require.NoError(t, err)
	assert.Equal(t, allocs[3].Address, freed.Address, "the released block is carved again")
}

// twoWritersCarveDisjointChildren: two managers (or management clusters)
// carving from one parent at once never share a block: the system's own
// request picks and creates under its lock.
func twoWritersCarveDisjointChildren(t *testing.T, c Carving, parent string, length int) {
	ctx := context.Background()
	backs := []backends.Backend{
		c.CarvingPool(t, parent, length, PoolOptions{}),
		c.CarvingPoolOver(t, parent, length, PoolOptions{SecondWriter: true}),
	}
	n := 1 << (length - netip.MustParsePrefix(parent).Bits())
	allocs := make([]backends.Allocation, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { allocs[i], errs[i] = backs[i%2].Allocate(ctx, claim(fmt.Sprintf("writer-%d", i))) })
	}
	wg.Wait()
	var got []netip.Prefix
	for i := range n {
		require.NoError(t, errs[i], "claim %d", i)
		got = append(got, allocs[i].Address)
	}
	assertDisjoint(t, got)
	assert.Len(t, c.Children(t, parent), n)
}

func lostCarveAnswerLeavesOneChild(t *testing.T, c Carving, parent string, length int) {
	ctx := context.Background()
	b := c.CarvingPool(t, parent, length, PoolOptions{})
	validated(t, b)
	before := c.CarveRequests()
	c.LoseCarveAnswers(t, 1)

	alloc, err := b.Allocate(ctx, claim("lost-carve"))
	require.NoError(t, err)
	assert.Greater(t, c.CarveRequests()-before, 1, "the lost answer made the client send the request again")
	kept := childrenOf(c, t, parent)["conformance/lost-carve"]
	require.Len(t, kept, 1, "the second child is deleted")
	assert.Equal(t, alloc.Address, kept[0].Prefix)
	assert.Len(t, c.Children(t, parent), 1, "and nothing else is carved")

	again, err := b.Allocate(ctx, claim("lost-carve"))
	require.NoError(t, err)
	assert.Equal(t, alloc.Address, again.Address)
}

func burstWithALostCarveAnswerLeavesOneChildEach(t *testing.T, c Carving, parent string, length int) {
	ctx := context.Background()
	b := c.CarvingPool(t, parent, length, PoolOptions{})
	validated(t, b)
	c.LoseCarveAnswers(t, 1)
	const n = 8
	allocs := make([]backends.Allocation, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { allocs[i], errs[i] = b.Allocate(ctx, claim(fmt.Sprintf("burst-carve-%d", i))) })
	}
	wg.Wait()
	children := childrenOf(c, t, parent)
	var got []netip.Prefix
	for i := range n {
		marker := fmt.Sprintf("conformance/burst-carve-%d", i)
		if errs[i] != nil {
			// A claim told to retry keeps the child its marker found.
			again, err := b.Allocate(ctx, claim(fmt.Sprintf("burst-carve-%d", i)))
			require.NoError(t, err, "claim %d, after %v", i, errs[i])
			allocs[i] = again
		}
		mine := childrenOf(c, t, parent)[marker]
		require.Len(t, mine, 1, "claim %d: one child", i)
		assert.Equal(t, allocs[i].Address, mine[0].Prefix, "claim %d", i)
		got = append(got, allocs[i].Address)
	}
	assertDisjoint(t, got)
	assert.Len(t, c.Children(t, parent), n, "no child left over: %v", children)
}

func releaseDeletesOnlyTheClaimsChild(t *testing.T, c Carving, parent string, length int) {
	ctx := context.Background()
	b := c.CarvingPool(t, parent, length, PoolOptions{})
	validated(t, b)
	gone, err := b.Allocate(ctx, claim("released"))
	require.NoError(t, err)
	kept, err := b.Allocate(ctx, claim("kept"))
	require.NoError(t, err)

	last := backends.Reservation{Address: gone.Address, Reference: gone.Reference, Endpoint: gone.Endpoint}
	require.NoError(t, b.Release(ctx, claim("released"), last))
	children := childrenOf(c, t, parent)
	assert.Empty(t, children["conformance/released"])
	require.Len(t, children["conformance/kept"], 1)
	assert.Equal(t, kept.Address, children["conformance/kept"][0].Prefix)
	require.NoError(t, b.Release(ctx, claim("released"), last), "a second release finds nothing and is no error")

	u, err := b.Usage(ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(1), u.Used, "the released block is free again")
}

// childDeletedByTheIPAMTeamIsNotFound: the claim's child is looked up by
// its marker, never assumed; an allocation after the deletion carves again
// (the audit reports a bound claim's, see docs/subnets.md).
func childDeletedByTheIPAMTeamIsNotFound(t *testing.T, c Carving, parent string, length int) {
	ctx := context.Background()
	b := c.CarvingPool(t, parent, length, PoolOptions{})
	validated(t, b)
	alloc, err := b.Allocate(ctx, claim("deleted-child"))
	require.NoError(t, err)
	c.DeleteChild(t, alloc.Reference)
	_, err = b.Lookup(ctx, claim("deleted-child"))
	require.ErrorIs(t, err, backends.ErrNotFound)
	records, err := b.Records(ctx, "conformance/")
	require.NoError(t, err)
	assert.Empty(t, records, "the audit's listing no longer holds it")
}

func ipv6ChildPerClaim(t *testing.T, c Carving, parent string, length int) {
	ctx := context.Background()
	b := c.CarvingPool(t, parent, length, PoolOptions{})
	validated(t, b)
	network := netip.MustParsePrefix(parent)
	var got []netip.Prefix
	for i := range 3 {
		alloc, err := b.Allocate(ctx, claim(fmt.Sprintf("v6-%d", i)))
		require.NoError(t, err)
		assert.True(t, alloc.Address.Addr().Is6())
		assert.Equal(t, length, alloc.Address.Bits())
		assert.True(t, network.Contains(alloc.Address.Addr()))
		got = append(got, alloc.Address)
	}
	assertDisjoint(t, got)
	records, err := b.Records(ctx, "conformance/")
	require.NoError(t, err)
	assert.Len(t, records, 3, "the audit lists the children")
}

func retireKeepsTheChildAsATombstone(t *testing.T, c Carving, parent string, length int) {
	ctx := context.Background()
	b := c.CarvingPool(t, parent, length, PoolOptions{})
	validated(t, b)
	a, err := b.Allocate(ctx, claim("retired-child"))
	require.NoError(t, err)
	at := time.Now()
	require.NoError(t, b.Retire(ctx, claim("retired-child"), a.Reservation(), at))

	tombstone := backends.TombstoneMarker("conformance/retired-child", at)
	kept := childrenOf(c, t, parent)[tombstone]
	require.Len(t, kept, 1)
	assert.Equal(t, a.Address, kept[0].Prefix)
	_, err = b.Lookup(ctx, claim("retired-child"))
	assert.ErrorIs(t, err, backends.ErrNotFound)

	next, err := b.Allocate(ctx, claim("after-retired-child"))
	require.NoError(t, err)
	assert.NotEqual(t, a.Address, next.Address, "a tombstone's block is not carved again")
	records, err := b.Records(ctx, "conformance/")
	require.NoError(t, err)
	require.Len(t, records, 2, "the audit lists the tombstone, to delete it when its grace period is over")
	for _, rec := range records {
		if rec.Marker == tombstone {
			require.NoError(t, b.Delete(ctx, rec))
		}
	}
	assert.Empty(t, childrenOf(c, t, parent)[tombstone])
}

func releaseLeavesAChildWhoseMarkerWasCleared(t *testing.T, c Carving, parent string, length int) {
	ctx := context.Background()
	b := c.CarvingPool(t, parent, length, PoolOptions{})
	validated(t, b)
	a, err := b.Allocate(ctx, claim("kept-by-team"))
	require.NoError(t, err)
	c.ClearChildMarker(t, a.Reference)

	err = b.Release(ctx, claim("kept-by-team"), a.Reservation())
	require.ErrorIs(t, err, backends.ErrNotOwned)
	still := false
	for _, p := range c.Children(t, parent) {
		still = still || p.Prefix == a.Address
	}
	assert.False(t, still, "no child carries a marker now")
	u, err := b.Usage(ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(1), u.Used, "the child is kept in NetBox")
}

// keepHandsTheChildToTheIPAMTeam: a claim whose child is retained keeps it
// in the system, without its marker; its block is not carved again, and the
// audit lists it no more.
func keepHandsTheChildToTheIPAMTeam(t *testing.T, c Carving, parent string, length int) {
	ctx := context.Background()
	b := c.CarvingPool(t, parent, length, PoolOptions{})
	validated(t, b)
	a, err := b.Allocate(ctx, claim("kept-child"))
	require.NoError(t, err)

	require.NoError(t, b.Keep(ctx, claim("kept-child"), a.Reservation()))
	assert.Empty(t, c.Children(t, parent), "no child carries a marker now")
	_, err = b.Lookup(ctx, claim("kept-child"))
	require.ErrorIs(t, err, backends.ErrNotFound)
	require.NoError(t, b.Keep(ctx, claim("kept-child"), a.Reservation()), "keeping again, as after a lost answer, is done")
	u, err := b.Usage(ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(1), u.Used, "the child is kept in the system")

	next, err := b.Allocate(ctx, claim("after-kept-child"))
	require.NoError(t, err)
	assert.NotEqual(t, a.Address, next.Address, "a kept child's block is not carved again")
	records, err := b.Records(ctx, "conformance/")
	require.NoError(t, err)
	require.Len(t, records, 1, "the audit lists only the new child")
	assert.Equal(t, next.Address, records[0].Address)
}
