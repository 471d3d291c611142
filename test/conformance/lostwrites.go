package conformance

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/httpfault"
)

// Writes to a record the provider read (a deletion, a marker written) must
// never land on another claim's record, whatever happens between the read
// and the write or between the write and its answer. On Infoblox a
// reference names whatever object holds its address: once a record is
// deleted and its address reserved again, the old reference names the new
// claim's record.

// fullBut fills the pool of cidr, a /29, but for the addresses of keep:
// the next claim gets one of them.
func fullBut(t *testing.T, b backends.Backend, name string) {
	t.Helper()
	for i := range 8 {
		_, err := b.Allocate(context.Background(), claim(fmt.Sprintf("%s-fill-%d", name, i)))
		if errors.Is(err, backends.ErrExhausted) {
			return
		}
		require.NoError(t, err)
	}
	t.Fatal("the pool never filled")
}

// fullButOne sets up a pool of cidr whose only address left to give is
// claim a's, with a second manager's backend on it.
func fullButOne(t *testing.T, h Harness, cidr, name string) (b, second backends.Backend, a backends.Claim, allocA backends.Allocation) {
	t.Helper()
	b = h.Pool(t, cidr)
	validated(t, b)
	second = h.PoolOver(t, PoolOptions{SecondWriter: true}, cidr)
	validated(t, second)
	a = claim(name + "-a")
	allocA, err := b.Allocate(context.Background(), a)
	require.NoError(t, err)
	fullBut(t, b, name)
	return b, second, a, allocA
}

// releaseUntilDone releases as the claim reconciler does: again after an
// error, a few times.
func releaseUntilDone(t *testing.T, b backends.Backend, c backends.Claim, last backends.Reservation) {
	t.Helper()
	var err error
	for range 3 {
		if err = b.Release(context.Background(), c, last); err == nil {
			return
		}
	}
	require.NoError(t, err, "%s is released in the end", c.Marker)
}

// lostDeletionNeverRemovesTheNextClaimsRecord: a claim's deletion is
// applied and its answer lost; before the provider hears anything, another
// claim (of a second manager) reserves the freed address. Whatever the
// provider then sends, that claim's record stays.
func lostDeletionNeverRemovesTheNextClaimsRecord(t *testing.T, h Harness, cidr string) {
	ctx := context.Background()
	b, second, a, allocA := fullButOne(t, h, cidr, "lost-delete")
	next := claim("lost-delete-next")

	var allocNext backends.Allocation
	var nextErr error
	h.LoseNextDeletion(t, func() { allocNext, nextErr = second.Allocate(ctx, next) })
	releaseUntilDone(t, b, a, allocA.Reservation())

	require.NoError(t, nextErr)
	require.Equal(t, allocA.Address, allocNext.Address, "the next claim took the freed address while the deletion's answer was lost")
	rs := h.Reservations(t, cidr)
	assert.Empty(t, markedWith(rs, a.Marker), "the released claim's record is gone")
	mine := markedWith(rs, next.Marker)
	require.Len(t, mine, 1, "the next claim's record is still there")
	assert.Equal(t, allocNext.Address.Addr(), mine[0].Address)
	got, err := second.Lookup(ctx, next)
	require.NoError(t, err)
	assert.Equal(t, allocNext.Address, got.Address)
}

// lostBatchDeletionNeverRemovesTheNextClaimsRecord is the same for a
// deletion of several claims' records at once.
func lostBatchDeletionNeverRemovesTheNextClaimsRecord(t *testing.T, h Harness, cidr string) {
	ctx := context.Background()
	b := h.Pool(t, cidr)
	validated(t, b)
	batched := h.PoolOver(t, batchOf(2), cidr)
	second := h.PoolOver(t, PoolOptions{SecondWriter: true}, cidr)
	validated(t, second)
	cs := numbered("lost-bulk", 2)
	allocs := make([]backends.Allocation, len(cs))
	for i, c := range cs {
		var err error
		allocs[i], err = b.Allocate(ctx, c)
		require.NoError(t, err)
	}
	fullBut(t, b, "lost-bulk")

	next := numbered("lost-bulk-next", 2)
	nextAllocs := make([]backends.Allocation, len(next))
	nextErrs := make([]error, len(next))
	h.LoseNextDeletion(t, func() {
		for i, c := range next {
			nextAllocs[i], nextErrs[i] = second.Allocate(ctx, c)
		}
	})
	errs := releaseAll(batched, cs, allocs)
	for i, c := range cs {
		if errs[i] != nil {
			releaseUntilDone(t, batched, c, allocs[i].Reservation())
		}
	}

	freed := map[netip.Prefix]bool{allocs[0].Address: true, allocs[1].Address: true}
	rs := h.Reservations(t, cidr)
	for i, c := range next {
		require.NoError(t, nextErrs[i], c.Marker)
		require.True(t, freed[nextAllocs[i].Address], "%s took a freed address while the deletion's answer was lost", c.Marker)
		mine := markedWith(rs, c.Marker)
		require.Len(t, mine, 1, "%s's record is still there", c.Marker)
		assert.Equal(t, nextAllocs[i].Address.Addr(), mine[0].Address)
	}
	for _, c := range cs {
		assert.Empty(t, markedWith(rs, c.Marker), "%s was released", c.Marker)
	}
}

// markingNeverLandsOnTheNextClaimsRecord: between the provider's read of a
// record and its write of a new marker (a hand-over), the record is deleted
// and its address reserved by another claim. The marker is not written on
// that claim's record, and the hand-over says the record is no longer the
// one it read.
func markingNeverLandsOnTheNextClaimsRecord(t *testing.T, h Harness, cidr string) {
	ctx := context.Background()
	b, second, a, allocA := fullButOne(t, h, cidr, "marking")
	next := claim("marking-next")
	listed := backends.Record{Address: allocA.Address, Marker: a.Marker, Reference: allocA.Reference}

	var allocNext backends.Allocation
	var thenErr error
	h.BeforeNextMarking(t, func() {
		if thenErr = second.Delete(ctx, listed); thenErr == nil {
			allocNext, thenErr = second.Allocate(ctx, next)
		}
	})
	err := b.Remark(ctx, listed, "conformance/marking-taker")

	require.NoError(t, thenErr)
	require.Equal(t, allocA.Address, allocNext.Address, "the next claim took the address between the read and the write")
	assert.Error(t, err, "the hand-over did not happen")
	rs := h.Reservations(t, cidr)
	assert.Empty(t, markedWith(rs, "conformance/marking-taker"), "no record was handed over")
	mine := markedWith(rs, next.Marker)
	require.Len(t, mine, 1, "the next claim's record keeps its marker")
	assert.Equal(t, allocNext.Address.Addr(), mine[0].Address)
}

// lostMarkingNeverLandsOnTheNextClaimsRecord: a hand-over's marker write is
// applied and its answer lost; before the provider hears anything, the
// record it marked is released and its address reserved by another claim
// (of a second manager). Whatever the provider then sends, that claim's
// record keeps its own marker.
func lostMarkingNeverLandsOnTheNextClaimsRecord(t *testing.T, h Harness, cidr string) {
	ctx := context.Background()
	b, second, a, allocA := fullButOne(t, h, cidr, "lost-marking")
	next := claim("lost-marking-next")
	const taker = "conformance/lost-marking-taker"
	listed := backends.Record{Address: allocA.Address, Marker: a.Marker, Reference: allocA.Reference}
	handedOver := backends.Record{Address: allocA.Address, Marker: taker, Reference: allocA.Reference}

	var allocNext backends.Allocation
	var thenErr error
	h.LoseNextMarking(t, func() {
		if thenErr = second.Delete(ctx, handedOver); thenErr == nil {
			allocNext, thenErr = second.Allocate(ctx, next)
		}
	})
	err := b.Remark(ctx, listed, taker)

	require.NoError(t, thenErr, "the handed-over record was released and its address reserved again")
	require.Equal(t, allocA.Address, allocNext.Address, "the next claim took the address while the marking's answer was lost")
	assert.Error(t, err, "the hand-over is not reported done: the record is no longer the one it marked")
	rs := h.Reservations(t, cidr)
	assert.Empty(t, markedWith(rs, taker), "no record is left handed over")
	mine := markedWith(rs, next.Marker)
	require.Len(t, mine, 1, "the next claim's record keeps its marker")
	assert.Equal(t, allocNext.Address.Addr(), mine[0].Address)
}

// resentCreateNeverDeletesAnotherWritersRecord: two writers of one claim (a
// replica without leader election, or a leader paused past its lease).
// Writer A's allocation is applied but its answer lost; writer B, which
// searched before A's was applied, makes the claim's record and is answered
// it, so B binds it; then A's client resends. A keeps the claim's oldest
// record and deletes only the duplicate its own answered attempt made: B's
// record, whose address B's machine uses, stays (the system would give it
// to the next claim), a duplicate for the late-record sweep, which knows
// the record the claim is bound to.
func resentCreateNeverDeletesAnotherWritersRecord(t *testing.T, h Harness, cidr string) {
	ctx := context.Background()
	validated(t, h.Pool(t, cidr))
	var uncertain atomic.Int32
	a := h.PoolOver(t, PoolOptions{Batch: batchOf(1).Batch, Uncertain: func() { uncertain.Add(1) }}, cidr)
	b := h.PoolOver(t, PoolOptions{Batch: batchOf(1).Batch, SecondWriter: true}, cidr)
	validated(t, a)
	validated(t, b)
	c := claim("two-writers")

	bWaits, aApplied, bDone := make(chan struct{}), make(chan struct{}), make(chan struct{})
	held := h.AllocationWrite()
	held.Kind, held.Times = httpfault.Before, 1
	held.Then = func() { close(bWaits); <-aApplied }
	h.Server().InjectFault(held)
	var bAlloc backends.Allocation
	var bErr error
	go func() {
		defer close(bDone)
		bAlloc, bErr = b.Allocate(ctx, c)
	}()
	select {
	case <-bWaits:
	case <-time.After(raceWait):
		t.Fatal("B never sent its allocation")
	}
	lost := h.AllocationWrite()
	lost.Kind, lost.Times = httpfault.LoseResponse, 1
	// A's record is applied; B's create goes on and is answered before A
	// learns that its answer is lost and resends.
	lost.Then = func() { close(aApplied); <-bDone }
	h.Server().InjectFault(lost)
	aAlloc, aErr := a.Allocate(ctx, c)
	<-bDone
	require.NoError(t, bErr)
	require.NoError(t, aErr)
	require.NotEqual(t, aAlloc.Address, bAlloc.Address, "B searched before A's record was applied, and made its own")

	records := markedWith(h.Reservations(t, cidr), c.Marker)
	assert.Contains(t, records, Reservation{Address: bAlloc.Address.Addr(), Marker: c.Marker, Reference: bAlloc.Reference},
		"B's record, which B was answered and binds, is kept")
	assert.Contains(t, records, Reservation{Address: aAlloc.Address.Addr(), Marker: c.Marker, Reference: aAlloc.Reference},
		"A's answer, the claim's oldest record")
	assert.Len(t, records, 2, "the duplicate of A's resend is deleted at once")
	assert.Positive(t, uncertain.Load(), "the late-record sweep is told")
}
