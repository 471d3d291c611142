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

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/httpfault"
)

// A pool may adopt the records the IPAM team planned for its claims: the
// claim writes its marker on the record and nothing else, and its release
// returns the record as it was planned. These cases hold every backend to
// it.

// forMachine is the claim name for the machine named machine.
func forMachine(name, machine string) backends.Claim {
	c := claim(name)
	c.MachineName = machine
	return c
}

// plannedRecordIsAdoptedAndReturned: a claim takes the record planned for
// its machine instead of a new address, again and again by its marker,
// also from a pool that starts afresh (a restarted manager); releasing it,
// or retiring it for a grace period, leaves the record exactly as planned,
// for the next claim of that machine.
func plannedRecordIsAdoptedAndReturned(t *testing.T, h Harness, cidr string) {
	ctx := context.Background()
	b := h.PlannedPool(t, cidr)
	validated(t, b)
	network := netip.MustParsePrefix(cidr)
	at := netip.PrefixFrom(nth(cidr, 9), network.Bits())
	ref := h.Plan(t, at, "m-adopt")
	planned := h.Snapshot(t, ref)
	require.Contains(t, fmt.Sprintf("%+v", planned), "network-eng", "the plan carries an attribute or custom field of the IPAM team's")
	require.Contains(t, fmt.Sprintf("%+v", planned), "planned by the IPAM team", "and its comment or description")
	c := forMachine("planned-adopt", "m-adopt")

	alloc, err := b.Allocate(ctx, c)
	require.NoError(t, err)
	assert.Equal(t, at, alloc.Address, "the planned address, with the network's length")
	assert.Equal(t, ref, alloc.Reference, "the planned record, no new one")
	assert.Equal(t, network.Addr().Next(), alloc.Gateway)
	assert.Equal(t, []Reservation{{Address: at.Addr(), Marker: c.Marker, Reference: ref, Planned: true}}, h.Reservations(t, cidr),
		"the record carries the claim's marker, and says it was planned")

	again, err := h.PlannedPool(t, cidr).Allocate(ctx, c)
	require.NoError(t, err)
	assert.Equal(t, alloc, again, "a pool that starts afresh finds it by the marker")
	found, err := b.Lookup(ctx, c)
	require.NoError(t, err)
	assert.Equal(t, alloc.Address, found.Address)
	other, err := b.Allocate(ctx, forMachine("unplanned", "m-unplanned"))
	require.NoError(t, err)
	assert.NotEqual(t, at, other.Address, "a claim planned nothing for gets the next free address")

	require.NoError(t, h.PlannedPool(t, cidr).Release(ctx, c, alloc.Reservation()))
	assert.Equal(t, planned, h.Snapshot(t, ref), "released, the record is as the IPAM team planned it")
	assert.Empty(t, markedWith(h.Reservations(t, cidr), c.Marker))

	again, err = b.Allocate(ctx, c)
	require.NoError(t, err)
	assert.Equal(t, ref, again.Reference, "the plan survives the claim: adopted again")
	require.NoError(t, b.Retire(ctx, c, again.Reservation(), time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)))
	assert.Equal(t, planned, h.Snapshot(t, ref), "retired for a grace period, the record goes back as planned: the plan holds the address")
}

// plannedRecordGoesToOneClaim: claims of two managers (which share no
// lock) for one machine adopt its planned record at once; each writes its
// marker before either write is answered (RaceWrites), and the record goes
// to one claim: the other reads the winner's marker back and is told who
// holds it. Released, the plan goes to the next claim.
func plannedRecordGoesToOneClaim(t *testing.T, h Harness, cidr string) {
	ctx := context.Background()
	validated(t, h.PlannedPool(t, cidr))
	network := netip.MustParsePrefix(cidr)
	at := netip.PrefixFrom(nth(cidr, 5), network.Bits())
	ref := h.Plan(t, at, "m-race")
	managers := []backends.Backend{
		h.PlannedPoolOver(t, PoolOptions{}, cidr),
		h.PlannedPoolOver(t, PoolOptions{SecondWriter: true}, cidr),
	}
	n := len(managers)
	cs := make([]backends.Claim, n)
	allocs := make([]backends.Allocation, n)
	errs := make([]error, n)
	for i := range cs {
		cs[i] = forMachine(fmt.Sprintf("planned-race-%d", i), "m-race")
	}
	raced := h.RaceWrites(t, PlannedAdoption, n)
	var wg sync.WaitGroup
	for i := range cs {
		wg.Go(func() { allocs[i], errs[i] = managers[i].Allocate(ctx, cs[i]) })
	}
	wg.Wait()
	require.True(t, raced.Complete(), "the managers took turns: %d of %d wrote their marker before either was answered", raced.Arrived(), n)

	winner := -1
	for i, err := range errs {
		if err == nil {
			require.Equal(t, -1, winner, "%s and %s both got the planned record", cs[max(winner, 0)].Marker, cs[i].Marker)
			winner = i
			assert.Equal(t, ref, allocs[i].Reference)
			continue
		}
		require.ErrorIs(t, err, backends.ErrPlannedConflict, cs[i].Marker)
	}
	require.NotEqual(t, -1, winner, "one claim adopts the planned record: %v", errs)
	rs := h.Reservations(t, cidr)
	require.Len(t, rs, 1, "nothing else was reserved")
	assert.Equal(t, cs[winner].Marker, rs[0].Marker)
	loser := (winner + 1) % n
	assert.Contains(t, errs[loser].Error(), at.Addr().String(), "the error names the record")
	assert.Contains(t, errs[loser].Error(), cs[winner].Marker, "and who holds it")

	require.NoError(t, h.PlannedPool(t, cidr).Release(ctx, cs[winner], allocs[winner].Reservation()))
	alloc, err := h.PlannedPool(t, cidr).Allocate(ctx, cs[loser])
	require.NoError(t, err)
	assert.Equal(t, ref, alloc.Reference, "released, the plan goes to the next claim")
}

// requestedAddressPlannedForTheClaimIsAdopted: a claim that requests the
// address of the record planned for it adopts that record; a claim that
// requests an address planned for another machine is refused, naming the
// record.
func requestedAddressPlannedForTheClaimIsAdopted(t *testing.T, h Harness, cidr string) {
	ctx := context.Background()
	b := h.PlannedPool(t, cidr)
	validated(t, b)
	network := netip.MustParsePrefix(cidr)
	at := netip.PrefixFrom(nth(cidr, 7), network.Bits())
	ref := h.Plan(t, at, "m-requested")
	planned := h.Snapshot(t, ref)

	other := forMachine("requests-anothers-plan", "m-other")
	other.Requested = at.Addr()
	_, err := b.Allocate(ctx, other)
	require.ErrorIs(t, err, backends.ErrRequestedUnavailable)
	assert.Contains(t, err.Error(), "no marker")
	assert.Equal(t, planned, h.Snapshot(t, ref), "the plan of another machine is left alone")

	c := forMachine("requests-its-plan", "m-requested")
	c.Requested = at.Addr()
	alloc, err := b.Allocate(ctx, c)
	require.NoError(t, err, "a requested address held by the record planned for the claim is adopted, not refused")
	assert.Equal(t, ref, alloc.Reference)
	assert.Equal(t, at, alloc.Address)
	require.NoError(t, b.Release(ctx, c, alloc.Reservation()))
	assert.Equal(t, planned, h.Snapshot(t, ref))
}

// auditLeavesPlannedRecordsToTheIPAMTeam: the audit's listing says which
// records were planned; deleting one (an orphan) returns it to the IPAM
// team instead; a planned record handed to another claim stays planned.
func auditLeavesPlannedRecordsToTheIPAMTeam(t *testing.T, h Harness, cidr string) {
	ctx := context.Background()
	b := h.PlannedPool(t, cidr)
	validated(t, b)
	network := netip.MustParsePrefix(cidr)
	at := netip.PrefixFrom(nth(cidr, 11), network.Bits())
	ref := h.Plan(t, at, "m-audit")
	planned := h.Snapshot(t, ref)
	c := forMachine("planned-audit", "m-audit")
	_, err := b.Allocate(ctx, c)
	require.NoError(t, err)

	records, err := b.Records(ctx, "conformance/planned-audit")
	require.NoError(t, err)
	require.Len(t, records, 1)
	assert.True(t, records[0].Planned, "the listing says the record was planned")
	assert.Equal(t, c.Marker, records[0].Marker)

	require.NoError(t, b.Remark(ctx, records[0], "conformance/planned-heir"))
	assert.Equal(t, []Reservation{{Address: at.Addr(), Marker: "conformance/planned-heir", Reference: ref, Planned: true}}, h.Reservations(t, cidr),
		"handed to another claim, the record stays planned")
	records, err = b.Records(ctx, "conformance/planned-heir")
	require.NoError(t, err)
	require.Len(t, records, 1)

	require.NoError(t, b.Delete(ctx, records[0]))
	assert.Equal(t, planned, h.Snapshot(t, ref), "deleting an adopted planned record returns it as planned")
	records, err = b.Records(ctx, "conformance/")
	require.NoError(t, err)
	for _, r := range records {
		assert.NotEqual(t, ref, r.Reference, "a returned plan is the IPAM team's: not listed as the provider's")
	}
}

// plannedRecordSurvivesAMove: after clusterctl move, the claim's marker
// names another management cluster. The audit of the new one restores the
// claim's record by the address its IPAddress holds, and the record stays
// planned; released, by its recorded reference even without that, it goes
// back to the IPAM team as planned.
func plannedRecordSurvivesAMove(t *testing.T, h Harness, cidr string) {
	ctx := context.Background()
	b := h.PlannedPool(t, cidr)
	validated(t, b)
	network := netip.MustParsePrefix(cidr)
	for i, restore := range []bool{true, false} {
		at := netip.PrefixFrom(nth(cidr, 3+i), network.Bits())
		machine := fmt.Sprintf("m-moved-%d", i)
		ref := h.Plan(t, at, machine)
		planned := h.Snapshot(t, ref)
		before := forMachine(fmt.Sprintf("moved-%d", i), machine)
		before.Marker = "old-cluster/" + before.Namespace + "/" + before.Name
		alloc, err := b.Allocate(ctx, before)
		require.NoError(t, err)
		require.Equal(t, ref, alloc.Reference)

		// The move carries the marker the IPAddress recorded.
		after := before
		after.Marker = "new-cluster/" + before.Namespace + "/" + before.Name
		after.Recorded = before.Marker
		last := alloc.Reservation()
		last.Marker = before.Marker
		if restore {
			restored, err := b.Restore(ctx, after, alloc.Address)
			require.NoError(t, err)
			assert.Equal(t, ref, restored.Reference, "the planned record, no new one")
			assert.Equal(t, []Reservation{{Address: at.Addr(), Marker: after.Marker, Reference: ref, Planned: true}}, markedWith(h.Reservations(t, cidr), after.Marker),
				"restored under the new marker, still planned")
			last = restored.Reservation()
			last.Marker = after.Marker
		}
		require.NoError(t, b.Release(ctx, after, last))
		assert.Equal(t, planned, h.Snapshot(t, ref), "released after the move, the record is as planned")
	}
}

// onlyPlansAreAdopted: the records the provider makes carry the name (and,
// in NetBox, may carry the status) a plan is found by; neither such a
// record nor its tombstone is a plan, so another claim of the machine gets
// the next free address, not a PlannedRecordConflict. Nor is a plan at the
// pool's gateway, which the pool never gives: it is left alone.
func onlyPlansAreAdopted(t *testing.T, h Harness, cidr string) {
	ctx := context.Background()
	b := h.PlannedPool(t, cidr)
	validated(t, b)
	network := netip.MustParsePrefix(cidr)

	first := forMachine("own-first", "m-own")
	alloc, err := b.Allocate(ctx, first)
	require.NoError(t, err)
	second := forMachine("own-second", "m-own")
	other, err := b.Allocate(ctx, second)
	require.NoError(t, err, "another claim's record is no plan")
	assert.NotEqual(t, alloc.Address, other.Address)

	require.NoError(t, b.Retire(ctx, first, alloc.Reservation(), time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)))
	third := forMachine("own-third", "m-own")
	again, err := b.Allocate(ctx, third)
	require.NoError(t, err, "a tombstone is no plan")
	assert.NotEqual(t, alloc.Address, again.Address, "the tombstone keeps its address")

	gateway := network.Addr().Next()
	ref := h.Plan(t, netip.PrefixFrom(gateway, network.Bits()), "m-gateway")
	planned := h.Snapshot(t, ref)
	c := forMachine("planned-gateway", "m-gateway")
	got, err := b.Allocate(ctx, c)
	require.NoError(t, err, "a plan on the gateway is skipped")
	assert.NotEqual(t, gateway, got.Address.Addr())
	assert.NotEqual(t, ref, got.Reference)
	assert.Equal(t, planned, h.Snapshot(t, ref), "the plan on the gateway is left alone")
}

// retriedReleaseOfAPlanSucceeds: a release whose unplan was applied but
// whose answer was lost is retried; the record, at the recorded reference
// and without a marker, was returned already. Only a reservation recorded
// as planned says so: a marker-less record at the reference of one that
// was not is still not the claim's.
func retriedReleaseOfAPlanSucceeds(t *testing.T, h Harness, cidr string) {
	ctx := context.Background()
	b := h.PlannedPool(t, cidr)
	validated(t, b)
	network := netip.MustParsePrefix(cidr)
	at := netip.PrefixFrom(nth(cidr, 6), network.Bits())
	ref := h.Plan(t, at, "m-retried")
	planned := h.Snapshot(t, ref)
	c := forMachine("planned-retried", "m-retried")
	alloc, err := b.Allocate(ctx, c)
	require.NoError(t, err)
	require.True(t, alloc.Planned, "the allocation says the record was planned")
	last := alloc.Reservation()

	require.NoError(t, b.Release(ctx, c, last))
	require.NoError(t, b.Release(ctx, c, last), "the retry finds the plan returned")
	assert.Equal(t, planned, h.Snapshot(t, ref))

	unplanned := last
	unplanned.Planned = false
	require.ErrorIs(t, b.Release(ctx, c, unplanned), backends.ErrNotOwned,
		"a record not recorded as planned that lost its marker was taken back")
}

// plansAreAdoptedAFewAtATime: a batch of claims with plans looks for and
// adopts them a few at a time, not one goroutine each, so that a full batch
// does not take every request slot of the endpoint.
func plansAreAdoptedAFewAtATime(t *testing.T, h Harness, cidr string) {
	ctx := context.Background()
	b := h.PlannedPool(t, cidr)
	validated(t, b)
	network := netip.MustParsePrefix(cidr)
	const n = 12
	cs := make([]backends.Claim, n)
	for i := range cs {
		machine := fmt.Sprintf("m-few-%d", i)
		h.Plan(t, netip.PrefixFrom(nth(cidr, 2+i), network.Bits()), machine)
		cs[i] = forMachine(fmt.Sprintf("planned-few-%d", i), machine)
	}
	server, ok := h.Server().(interface{ ThrottleArrivals() []httpfault.Arrival })
	if !ok {
		t.Skip("the server does not count the requests it holds at once")
	}
	h.Server().SetThrottle(httpfault.ThrottleLimit{RequestsPerSecond: 100000, MaxConcurrent: 1000})
	h.SetLatency(20 * time.Millisecond)
	t.Cleanup(func() {
		h.Server().SetThrottle(httpfault.ThrottleLimit{})
		h.SetLatency(0)
	})

	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range cs {
		wg.Go(func() { _, errs[i] = b.Allocate(ctx, cs[i]) })
	}
	wg.Wait()
	for i, err := range errs {
		require.NoError(t, err, cs[i].Marker)
	}
	most := 0
	for _, a := range server.ThrottleArrivals() {
		most = max(most, a.Concurrent)
	}
	assert.LessOrEqual(t, most, 4, "requests in flight at once")
}

// adoptedPlanOutlivesThePoolsPlanned: once a pool stops adopting plans
// (spec.planned removed), a claim's adopted plan is still its record: found
// by its marker, so a lost IPAddress rebuilt or a restarted manager makes
// no second record, and released, even with nothing recorded, as planned.
func adoptedPlanOutlivesThePoolsPlanned(t *testing.T, h Harness, cidr string) {
	ctx := context.Background()
	b := h.PlannedPool(t, cidr)
	validated(t, b)
	network := netip.MustParsePrefix(cidr)
	at := netip.PrefixFrom(nth(cidr, 8), network.Bits())
	ref := h.Plan(t, at, "m-unplanned-pool")
	planned := h.Snapshot(t, ref)
	c := forMachine("planned-then-not", "m-unplanned-pool")
	alloc, err := b.Allocate(ctx, c)
	require.NoError(t, err)
	require.Equal(t, ref, alloc.Reference)

	plain := h.PoolOver(t, PoolOptions{}, cidr)
	validated(t, plain)
	found, err := plain.Lookup(ctx, c)
	require.NoError(t, err, "the adopted plan is found by the claim's marker")
	assert.Equal(t, alloc.Address, found.Address)
	again, err := plain.Allocate(ctx, c)
	require.NoError(t, err)
	assert.Equal(t, ref, again.Reference, "no second record")
	assert.Len(t, markedWith(h.Reservations(t, cidr), c.Marker), 1)

	require.NoError(t, plain.Release(ctx, c, backends.Reservation{}), "released with nothing recorded")
	assert.Equal(t, planned, h.Snapshot(t, ref), "returned as planned")
}
