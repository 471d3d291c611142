// Package conformance is the behaviour every backends.Backend must show,
// whatever IPAM system it bridges to: idempotent allocation keyed by the
// claim's marker, lookup by marker, one record kept after a retried request,
// release that deletes only what carries the marker, exhaustion, refused
// credentials, and IPv6. Each backend runs it through a Harness.
package conformance

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/httpfault"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/wapisim"
)

// Reservation is a record in the IPAM system that carries a marker.
type Reservation struct {
	Address netip.Addr
	Marker  string
	// Reference is the system's identifier of the record, as the backend
	// names it in an Allocation.
	Reference string
	// Planned: the marker says the IPAM team planned the record.
	Planned bool
}

// Harness sets up one IPAM system for the suite. Networks are given as CIDRs
// the suite keeps apart, so a harness may share one system between tests.
type Harness interface {
	// Pool creates network cidr in the system, with its first usable address
	// recorded as the gateway, and returns a backend allocating from it.
	Pool(t testing.TB, cidr string) backends.Backend
	// PoolOver returns a backend allocating from networks that Pool created,
	// in the order given, with o.
	PoolOver(t testing.TB, o PoolOptions, cidrs ...string) backends.Backend
	// NarrowedPool creates network cidr with the first usable address of
	// each of its prefixLength sub-networks recorded as held (their
	// gateways), and returns a backend allocating from it with
	// prefixLength.
	NarrowedPool(t testing.TB, cidr string, prefixLength int) backends.Backend
	// BarePool creates network cidr with nothing recorded in it, not even
	// a gateway, and returns a backend allocating from it with o.
	BarePool(t testing.TB, cidr string, o PoolOptions) backends.Backend
	// RefusingPool creates network cidr as Pool does in a system that
	// refuses the record of the claim named in the Refusal, and of no other
	// claim, and returns a backend allocating from it with o. It skips t
	// where the system cannot be made to.
	RefusingPool(t testing.TB, cidr string, o PoolOptions) (backends.Backend, Refusal)
	// RetiredPool returns a backend for cidr, a network that does not exist
	// in the system (a source the IPAM team has retired): it cannot validate.
	RetiredPool(t testing.TB, cidr string) backends.Backend
	// PoolWithBadCredentials returns a backend for cidr whose credentials
	// the system refuses.
	PoolWithBadCredentials(t testing.TB, cidr string) backends.Backend
	// Reservations lists the records inside cidr that carry a marker.
	Reservations(t testing.TB, cidr string) []Reservation
	// Hold records addr (with its network's prefix length) for someone
	// else, carrying marker, or none when it is empty. A pool of the
	// harness must have validated first: it prepares the marker.
	Hold(t testing.TB, addr netip.Prefix, marker string)
	// Disown removes the marker from the record holding addr, as a human
	// taking the address over would.
	Disown(t testing.TB, addr netip.Addr)
	// PlannedPool creates network cidr as Pool does and returns a backend
	// that adopts the records planned for its claims, as Plan makes them.
	PlannedPool(t testing.TB, cidr string) backends.Backend
	// PlannedPoolOver is PlannedPool with o.
	PlannedPoolOver(t testing.TB, o PoolOptions, cidr string) backends.Backend
	// Plan creates, as the IPAM team would, a record at addr (with its
	// network's prefix length) planned for the claims whose machine is
	// named machine, without a marker, and returns its reference.
	Plan(t testing.TB, addr netip.Prefix, machine string) string
	// Snapshot is the record ref names, every field the IPAM team sees,
	// to compare before and after.
	Snapshot(t testing.TB, ref string) any
	// LoseAllocationAnswers makes the system apply the next n allocation
	// requests (of one claim or of a batch) and cut the connection each
	// time without answering.
	LoseAllocationAnswers(t testing.TB, n int)
	// AllocationWrite is a fault, of no kind yet, that matches allocation
	// requests (of one claim or of a batch), for Server's InjectFault.
	AllocationWrite() httpfault.Fault
	// LoseRequestedAnswers makes the system apply the next n creations of
	// a record at a requested address and cut the connection each time
	// without answering.
	LoseRequestedAnswers(t testing.TB, n int)
	// RaceWrites makes the next n writes of kind w meet: each is held until
	// all n arrived, and none is answered before all were applied, so that
	// writers that each looked before any of them wrote race. The
	// gathering says whether they did. Writers of one manager take turns
	// at an address, so only SecondWriter's backends can race the others.
	RaceWrites(t testing.TB, w Write, n int) *httpfault.Gathering
	// LoseNextDeletion makes the system apply the next deletion of records
	// (of one, or of several at once), run then, and cut the connection
	// without answering: then acts while the deleting backend waits.
	LoseNextDeletion(t testing.TB, then func())
	// BeforeNextMarking runs then when the next write of a record's marker
	// arrives, before the system applies it: another writer acting between
	// a backend's read of a record and its write.
	BeforeNextMarking(t testing.TB, then func())
	// LoseNextMarking makes the system apply the next write of a record's
	// marker, run then, and cut the connection without answering: then
	// acts while the writing backend waits.
	LoseNextMarking(t testing.TB, then func())
	// FailBulkDeletions makes the system refuse every attempt of the next
	// deletion of several records at once with a server error, applying
	// none, and returns how many attempts a backend whose client retries
	// retryMax times sends: Infoblox sends a write by reference once (its
	// references name whatever object holds the address then, see
	// backendhttp.WithoutResend), NetBox retryMax+1 times.
	FailBulkDeletions(t testing.TB, retryMax int) (attempts int)
	// AllocationRequests counts the allocation requests the system
	// received (a lone claim's at least).
	AllocationRequests() int
	// Requests counts every request the system received.
	Requests() int
	// SetLatency delays each request by d.
	SetLatency(d time.Duration)
	// Server is the system's HTTP server, to disturb.
	Server() httpfault.Disturbable
}

// PoolOptions shape a backend beyond its networks.
type PoolOptions struct {
	// Batch bounds batching; zero is the backend's default.
	Batch backends.BatchOptions
	// RetryMax is how often a failed request is retried; 0 is the default.
	RetryMax int
	// PrefixLength narrows the networks, as a pool's prefixLength does.
	PrefixLength int
	// Uncertain, if set, is told of every create the system may still
	// apply, and of duplicates left for the late-record sweep
	// (backends.Options.Uncertain).
	Uncertain func()
	// SecondWriter builds the backend as a second manager process (or a
	// second management cluster) would: it reaches the system by another
	// name (localhost for 127.0.0.1), so it shares no in-process state
	// with the other backends, such as the turns that one manager's claims
	// take at one address.
	SecondWriter bool

	// childLength is the length of the children a carving pool carves.
	childLength int
}

// Write is a kind of write RaceWrites makes race.
type Write int

const (
	// RequestedCreate creates a record at a requested address.
	RequestedCreate Write = iota
	// PlannedAdoption writes a claim's marker on a planned record.
	PlannedAdoption
)

// Refusal is how a system refuses a claim's record: the claim's name, the
// kind of error and words of the system's own the backend reports.
type Refusal struct {
	Name string
	Kind error
	Text string
}

// Run runs the suite against h: every case of the core that every driver
// offers, and each case of an optional role (backends.Role) where the
// harness's driver offers it.
func Run(t *testing.T, h Harness) {
	probe := h.Pool(t, "10.201.255.0/29")
	for _, tc := range []struct {
		name  string
		cidr  string
		test  func(*testing.T, Harness, string)
		needs []backends.Role
	}{
		{"AllocateIsIdempotent", "10.201.0.0/28", allocateIsIdempotent, core},
		{"ClaimsGetDistinctAddresses", "10.201.1.0/26", claimsGetDistinctAddresses, core},
		{"LookupFindsTheMarker", "10.201.2.0/28", lookupFindsTheMarker, core},
		{"LostAnswerLeavesOneRecord", "10.201.3.0/28", lostAnswerLeavesOneRecord, core},
		{"ReleaseDeletesOnlyTheClaimsRecord", "10.201.4.0/28", releaseDeletesOnlyTheClaimsRecord, core},
		{"ReleaseLeavesATakenOverRecord", "10.201.5.0/28", releaseLeavesATakenOverRecord, core},
		{"ReleaseNeedsOnlyTheConnection", "10.201.9.0/28", releaseNeedsOnlyTheConnection, core},
		{"ExhaustionAndReuse", "10.201.6.0/29", exhaustionAndReuse, core},
		{"UsageCountsReservations", "10.201.7.0/28", usageCountsReservations, core},
		{"BadCredentials", "10.201.8.0/28", badCredentials, core},
		{"ThrottlingIsNotAnOutage", "10.201.10.0/28", throttlingIsNotAnOutage, core},
		{"IPv6", "2001:db8:201::/64", ipv6, core},
		{"RecordsListsThePoolsMarkedRecords", "10.201.16.0/28", recordsListsThePoolsMarkedRecords, roles(backends.RoleAuditLister)},
		{"RemarkAndDeleteOnlyWhatStillCarriesTheMarker", "10.201.12.0/28", remarkAndDeleteOnlyWhatStillCarriesTheMarker, core},
		{"RestoreReservesTheSameAddress", "10.201.13.0/28", restoreReservesTheSameAddress, roles(backends.RoleAddressRequester)},
		{"RetireKeepsATombstone", "10.201.14.0/28", retireKeepsATombstone, core},
		{"KeepHandsTheRecordToTheIPAMTeam", "10.201.54.0/28", keepHandsTheRecordToTheIPAMTeam, core},
		{"LostKeepAnswerLeavesTheRecordKept", "10.201.55.0/28", lostKeepAnswerLeavesTheRecordKept, core},
		{"KeepDeletesTheClaimsDuplicates", "10.201.56.0/28", keepDeletesTheClaimsDuplicates, roles(backends.RoleAddressRequester)},
		{"KeepKeepsTheRecordTheAuditRestored", "10.201.57.0/28", keepKeepsTheRecordTheAuditRestored, roles(backends.RoleAddressRequester)},
		{"BurstWithALostAnswerLeavesOneRecordEach", "10.201.15.0/27", burstWithALostAnswerLeavesOneRecordEach, core},
		{"GatewayIsTheFirstUsableAddressOfTheNarrowedNetwork", "10.201.17.0/28", gatewayOfTheNarrowedNetwork, core},
		{"GatewayAgreesAtValidationAndAllocation", "10.201.19.0/27", gatewayAgreesAtValidationAndAllocation, core},
		{"DuplicateWhoseDeletionFailedIsNeverHandedOut", "10.201.18.0/28", duplicateWhoseDeletionFailedIsNeverHandedOut, core},
		{"LostAnswersKeepTheOldestRecord", "10.201.30.0/24", lostAnswersKeepTheOldestRecord, core},
		{"RecordsOfAnotherClusterAreNeverTouched", "10.201.31.0/28", recordsOfAnotherClusterAreNeverTouched, core},
		{"FreshClaimsAnsweredAsASearchFirstWould", "10.201.33.0/27", freshClaimsAnsweredAsASearchFirstWould, core},
		// Writes whose answer is lost, or that another writer overtakes (lostwrites.go).
		{"LostDeletionNeverRemovesTheNextClaimsRecord", "10.201.32.0/29", lostDeletionNeverRemovesTheNextClaimsRecord, core},
		{"ResentCreateNeverDeletesAnotherWritersRecord", "10.201.34.0/28", resentCreateNeverDeletesAnotherWritersRecord, core},
		{"LostBatchDeletionNeverRemovesTheNextClaimsRecord", "10.201.32.8/29", lostBatchDeletionNeverRemovesTheNextClaimsRecord, core},
		{"MarkingNeverLandsOnTheNextClaimsRecord", "10.201.32.16/29", markingNeverLandsOnTheNextClaimsRecord, core},
		{"LostMarkingNeverLandsOnTheNextClaimsRecord", "10.201.32.24/29", lostMarkingNeverLandsOnTheNextClaimsRecord, core},
		// Batches (batch.go): each case takes the /24s its /23 or /22 holds.
		{"BatchSharesOneSearchAndOneRequest", "10.201.20.0/23", batchSharesOneSearchAndOneRequest, core},
		{"RefusedRecordFailsOnlyItsClaim", "10.201.22.0/24", refusedRecordFailsOnlyItsClaim, core},
		{"LostBatchAnswerIsAdoptedByMarkers", "10.201.24.0/23", lostBatchAnswerIsAdoptedByMarkers, core},
		{"BatchLargerThanItsSourceFillsItAndMovesOn", "10.201.26.0/23", batchLargerThanItsSourceFillsItAndMovesOn, core},
		{"BatchedReleaseDeletesExactlyTheClaimsRecords", "10.201.28.0/24", batchedReleaseDeletesExactlyTheClaimsRecords, core},
		{"FailedBulkDeletionFallsBackToOneDeletionPerRecord", "10.201.29.0/24", failedBulkDeletionFallsBack, core},
		// A requested address (requested.go).
		{"RequestedAddressIsReserved", "10.201.40.0/27", requestedAddressIsReserved, roles(backends.RoleAddressRequester)},
		{"RequestedAddressHeldByOthersIsRefused", "10.201.41.0/28", requestedAddressHeldByOthersIsRefused, roles(backends.RoleAddressRequester)},
		{"RequestedAddressLostAnswerLeavesOneRecord", "10.201.42.0/25", requestedAddressLostAnswerLeavesOneRecord, roles(backends.RoleAddressRequester)},
		{"RequestedClaimInABatchFailsAlone", "10.201.43.0/24", requestedClaimInABatchFailsAlone, roles(backends.RoleAddressRequester)},
		{"ClaimsRequestingOneAddressGetItOnce", "10.201.44.0/26", claimsRequestingOneAddressGetItOnce, roles(backends.RoleAddressRequester)},
		// Records planned ahead (planned.go).
		{"PlannedRecordIsAdoptedAndReturned", "10.201.45.0/28", plannedRecordIsAdoptedAndReturned, roles(backends.RolePlanAdopter)},
		{"PlannedRecordGoesToOneClaim", "10.201.46.0/28", plannedRecordGoesToOneClaim, roles(backends.RolePlanAdopter)},
		{"RequestedAddressPlannedForTheClaimIsAdopted", "10.201.47.0/28", requestedAddressPlannedForTheClaimIsAdopted, roles(backends.RoleAddressRequester, backends.RolePlanAdopter)},
		{"AuditLeavesPlannedRecordsToTheIPAMTeam", "10.201.48.0/28", auditLeavesPlannedRecordsToTheIPAMTeam, roles(backends.RolePlanAdopter, backends.RoleAuditLister)},
		{"PlannedRecordSurvivesAMove", "10.201.49.0/28", plannedRecordSurvivesAMove, roles(backends.RoleAddressRequester, backends.RolePlanAdopter)},
		{"OnlyPlansAreAdopted", "10.201.50.0/28", onlyPlansAreAdopted, roles(backends.RolePlanAdopter)},
		{"RetriedReleaseOfAPlanSucceeds", "10.201.51.0/28", retriedReleaseOfAPlanSucceeds, roles(backends.RolePlanAdopter)},
		{"PlansAreAdoptedAFewAtATime", "10.201.52.0/28", plansAreAdoptedAFewAtATime, roles(backends.RolePlanAdopter)},
		{"AdoptedPlanOutlivesThePoolsPlanned", "10.201.53.0/28", adoptedPlanOutlivesThePoolsPlanned, roles(backends.RolePlanAdopter)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, role := range tc.needs {
				if !backends.Offers(probe, role) {
					t.Skipf("the driver offers no %s", role)
				}
			}
			tc.test(t, h, tc.cidr)
		})
	}
	t.Run("Carving", func(t *testing.T) { runCarving(t, h) })
}

// roles are the optional roles a case needs; core, none.
func roles(rs ...backends.Role) []backends.Role { return rs }

var core []backends.Role

func claim(name string) backends.Claim {
	return backends.Claim{Marker: "conformance/" + name, Namespace: "conformance", Name: name, ClusterName: "c1"}
}

func markedWith(rs []Reservation, marker string) []Reservation {
	var out []Reservation
	for _, r := range rs {
		if r.Marker == marker {
			out = append(out, r)
		}
	}
	return out
}

func validated(t testing.TB, b backends.Backend) {
	t.Helper()
	_, err := b.Validate(context.Background())
	require.NoError(t, err)
}

func allocateIsIdempotent(t *testing.T, h Harness, cidr string) {
	ctx := context.Background()
	b := h.Pool(t, cidr)
	validated(t, b)
	network := netip.MustParsePrefix(cidr)

	first, err := b.Allocate(ctx, claim("idem"))
	require.NoError(t, err)
	assert.True(t, network.Contains(first.Address.Addr()), "address %s outside %s", first.Address, cidr)
	assert.Equal(t, network.Bits(), first.Address.Bits(), "prefix length of the network")
	assert.Equal(t, network.Addr().Next(), first.Gateway, "gateway is the first usable address")
	assert.NotEqual(t, first.Gateway, first.Address.Addr(), "the gateway is never handed out")
	assert.NotEmpty(t, first.Reference)

	before := h.AllocationRequests()
	again, err := b.Allocate(ctx, claim("idem"))
	require.NoError(t, err)
	assert.Equal(t, first.Address, again.Address)
	assert.Equal(t, before, h.AllocationRequests(), "a claim that holds an address makes no new reservation")
	assert.Len(t, markedWith(h.Reservations(t, cidr), "conformance/idem"), 1)
}

func claimsGetDistinctAddresses(t *testing.T, h Harness, cidr string) {
	ctx := context.Background()
	b := h.Pool(t, cidr)
	validated(t, b)
	const n = 20
	addrs := make([]netip.Prefix, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a, err := b.Allocate(ctx, claim(fmt.Sprintf("many-%d", i)))
			addrs[i], errs[i] = a.Address, err
		}()
	}
	wg.Wait()
	seen := map[netip.Prefix]int{}
	for i := range n {
		require.NoError(t, errs[i], "claim %d", i)
		if j, dup := seen[addrs[i]]; dup {
			t.Errorf("claims %d and %d both got %s", j, i, addrs[i])
		}
		seen[addrs[i]] = i
	}
	assert.Len(t, h.Reservations(t, cidr), n, "one record per claim")
}

// burstWithALostAnswerLeavesOneRecordEach allocates for claims at once, as
// the claim workers do (a backend may batch them), while an allocation's
// answer is lost; then releases most of them at once. Each claim keeps one
// record of its own, and a release deletes exactly the released claims'.
func burstWithALostAnswerLeavesOneRecordEach(t *testing.T, h Harness, cidr string) {
	ctx := context.Background()
	b := h.Pool(t, cidr)
	validated(t, b)
	h.LoseAllocationAnswers(t, 1)
	const n, released = 12, 9
	claims := make([]backends.Claim, n)
	allocs := make([]backends.Allocation, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		claims[i] = claim(fmt.Sprintf("burst-%d", i))
		wg.Go(func() { allocs[i], errs[i] = b.Allocate(ctx, claims[i]) })
	}
	wg.Wait()
	rs := h.Reservations(t, cidr)
	seen := map[netip.Prefix]int{}
	for i, c := range claims {
		require.NoError(t, errs[i], c.Marker)
		if j, dup := seen[allocs[i].Address]; dup {
			t.Errorf("claims %d and %d both got %s", j, i, allocs[i].Address)
		}
		seen[allocs[i].Address] = i
		mine := markedWith(rs, c.Marker)
		require.Len(t, mine, 1, "%s keeps one record", c.Marker)
		assert.Equal(t, allocs[i].Address.Addr(), mine[0].Address, c.Marker)
	}
	assert.Len(t, rs, n, "duplicates of the lost answer are released")

	for i := range released {
		wg.Go(func() { errs[i] = b.Release(ctx, claims[i], allocs[i].Reservation()) })
	}
	wg.Wait()
	rs = h.Reservations(t, cidr)
	for i, c := range claims {
		if i < released {
			require.NoError(t, errs[i], c.Marker)
			assert.Empty(t, markedWith(rs, c.Marker), "%s was released", c.Marker)
			continue
		}
		assert.Len(t, markedWith(rs, c.Marker), 1, "%s was not released", c.Marker)
	}
	assert.Len(t, rs, n-released)
}

// gatewayOfTheNarrowedNetwork: a source narrowed by prefixLength (a /28
// split into /29s) gives each address the first usable address of its own
// /29 as gateway, never one outside the machine's subnet.
func gatewayOfTheNarrowedNetwork(t *testing.T, h Harness, cidr string) {
	b := h.NarrowedPool(t, cidr, 29)
	validated(t, b)
	ctx := context.Background()
	var inSecond int
	for i := range 8 {
		alloc, err := b.Allocate(ctx, claim(fmt.Sprintf("narrowed-%d", i)))
		require.NoError(t, err)
		require.Equal(t, 29, alloc.Address.Bits(), "the prefix is the narrowed one")
		subnet := alloc.Address.Masked()
		assert.Equal(t, subnet.Addr().Next(), alloc.Gateway, "%s: the gateway is its own /29's first usable address", alloc.Address)
		assert.NotEqual(t, alloc.Gateway, alloc.Address.Addr(), "a gateway is never handed out")
		if subnet != netip.PrefixFrom(netip.MustParsePrefix(cidr).Addr(), 29) {
			inSecond++
		}
	}
	require.NotZero(t, inSecond, "some addresses come from the second /29")
}

func lookupFindsTheMarker(t *testing.T, h Harness, cidr string) {
	ctx := context.Background()
	b := h.Pool(t, cidr)
	validated(t, b)
	alloc, err := b.Allocate(ctx, claim("look"))
	require.NoError(t, err)

	found, err := b.Lookup(ctx, claim("look"))
	require.NoError(t, err)
	assert.Equal(t, alloc.Address, found.Address)
	assert.Equal(t, alloc.Gateway, found.Gateway)

	_, err = b.Lookup(ctx, claim("nobody"))
	assert.ErrorIs(t, err, backends.ErrNotFound)
}

func lostAnswerLeavesOneRecord(t *testing.T, h Harness, cidr string) {
	ctx := context.Background()
	b := h.Pool(t, cidr)
	validated(t, b)
	before := h.AllocationRequests()
	h.LoseAllocationAnswers(t, 1)

	alloc, err := b.Allocate(ctx, claim("lost"))
	require.NoError(t, err)
	assert.Greater(t, h.AllocationRequests()-before, 1, "the lost answer made the client send the request again")
	kept := markedWith(h.Reservations(t, cidr), "conformance/lost")
	require.Len(t, kept, 1, "the duplicate reservation is released")
	assert.Equal(t, alloc.Address.Addr(), kept[0].Address)

	again, err := b.Allocate(ctx, claim("lost"))
	require.NoError(t, err)
	assert.Equal(t, alloc.Address, again.Address)
}

// lostAnswersKeepTheOldestRecord: every attempt of a request whose answer
// is lost reserves an address; the claim keeps the oldest record, found by
// its marker. The record of the answered attempt is released at once; those
// of attempts whose answers were lost are left for the late-record sweep,
// which knows the record the claim is bound to: the backend cannot tell
// them from a record a second writer made and bound.
func lostAnswersKeepTheOldestRecord(t *testing.T, h Harness, cidr string) {
	ctx := context.Background()
	for i, lost := range []int{1, 2, 3} {
		t.Run(fmt.Sprintf("%d answers lost", lost), func(t *testing.T) {
			network := netip.PrefixFrom(netip.MustParsePrefix(cidr).Addr(), 26)
			for range i * 64 {
				network = netip.PrefixFrom(network.Addr().Next(), 26)
			}
			h.Pool(t, network.String())
			uncertain := 0
			b := h.PoolOver(t, PoolOptions{RetryMax: 2, Uncertain: func() { uncertain++ }}, network.String())
			validated(t, b)
			h.LoseAllocationAnswers(t, lost)
			attempts := min(lost+1, 3)
			answered := 0
			if lost < attempts {
				answered = 1
			}
			beforeAllocations, before := h.AllocationRequests(), h.Requests()

			alloc, err := b.Allocate(ctx, claim(fmt.Sprintf("oldest-%d", lost)))
			require.NoError(t, err)
			assert.Equal(t, attempts, h.AllocationRequests()-beforeAllocations, "the request and its resends, each applied")
			assert.Equal(t, 1+attempts+1+answered, h.Requests()-before,
				"the marker search, the request and its resends, the search resolving them, the deletion of the answered attempt's record")
			kept := markedWith(h.Reservations(t, network.String()), fmt.Sprintf("conformance/oldest-%d", lost))
			require.Len(t, kept, attempts-answered, "the answered attempt's record is released; the lost ones' are left")
			assert.Contains(t, kept, Reservation{Address: alloc.Address.Addr(), Marker: kept[0].Marker, Reference: alloc.Reference})
			assert.Equal(t, network.Addr().Next().Next(), alloc.Address.Addr(), "the first record made is kept")
			assert.Positive(t, uncertain, "the late-record sweep is told")
		})
	}
}

// duplicateWhoseDeletionFailedIsNeverHandedOut: a resent request made
// duplicates, and deleting one was applied but its answer lost, and the
// retries failed. The record of the request's answer may be the deleted
// duplicate: it is never handed out, and the next attempt keeps the oldest.
func duplicateWhoseDeletionFailedIsNeverHandedOut(t *testing.T, h Harness, cidr string) {
	ctx := context.Background()
	b := h.Pool(t, cidr)
	validated(t, b)
	h.LoseAllocationAnswers(t, 2)
	// A deletion by reference, or as a request object's operation.
	deletion := wapisim.WriteTo(http.MethodDelete, "")
	h.Server().InjectFault(httpfault.Fault{Kind: httpfault.LoseResponse, Match: deletion})
	h.Server().InjectFault(httpfault.Fault{Kind: httpfault.Status, Status: http.StatusBadGateway, Match: deletion, Times: 10})
	t.Cleanup(h.Server().ClearFaults)

	if alloc, err := b.Allocate(ctx, claim("dup")); err == nil {
		kept := markedWith(h.Reservations(t, cidr), "conformance/dup")
		require.NotEmpty(t, kept)
		assert.Contains(t, kept, Reservation{Address: alloc.Address.Addr(), Marker: "conformance/dup", Reference: alloc.Reference},
			"the address handed out is held by the claim's record")
	}
	h.Server().ClearFaults()
	alloc, err := b.Allocate(ctx, claim("dup"))
	require.NoError(t, err)
	kept := markedWith(h.Reservations(t, cidr), "conformance/dup")
	assert.Contains(t, kept, Reservation{Address: alloc.Address.Addr(), Marker: "conformance/dup", Reference: alloc.Reference})
	assert.Equal(t, netip.MustParsePrefix(cidr).Addr().Next().Next(), alloc.Address.Addr(), "the oldest record is kept")
}

func releaseDeletesOnlyTheClaimsRecord(t *testing.T, h Harness, cidr string) {
	ctx := context.Background()
	b := h.Pool(t, cidr)
	validated(t, b)
	mine, err := b.Allocate(ctx, claim("mine"))
	require.NoError(t, err)
	_, err = b.Allocate(ctx, claim("theirs"))
	require.NoError(t, err)

	require.NoError(t, b.Release(ctx, claim("mine"), mine.Reservation()))
	rs := h.Reservations(t, cidr)
	assert.Empty(t, markedWith(rs, "conformance/mine"))
	assert.Len(t, markedWith(rs, "conformance/theirs"), 1)

	require.NoError(t, b.Release(ctx, claim("mine"), mine.Reservation()), "releasing twice is not an error")
	require.NoError(t, b.Release(ctx, claim("never"), backends.Reservation{}), "nothing to release is not an error")
	_, err = b.Lookup(ctx, claim("mine"))
	assert.ErrorIs(t, err, backends.ErrNotFound)
}

// releaseNeedsOnlyTheConnection releases through a pool whose spec no longer
// matches the system (its only source retired, never validated): the record
// made by the first pool is deleted all the same, found by the recorded
// reference and the marker.
func releaseNeedsOnlyTheConnection(t *testing.T, h Harness, cidr string) {
	ctx := context.Background()
	b := h.Pool(t, cidr)
	validated(t, b)
	alloc, err := b.Allocate(ctx, claim("moved-on"))
	require.NoError(t, err)
	assert.Equal(t, b.Endpoint(), alloc.Endpoint)
	assert.NotEmpty(t, alloc.Reference)

	retired := h.RetiredPool(t, "10.251.0.0/28")
	_, err = retired.Validate(ctx)
	require.Error(t, err, "the changed pool cannot validate")
	require.NoError(t, retired.Release(ctx, claim("moved-on"), alloc.Reservation()))
	assert.Empty(t, markedWith(h.Reservations(t, cidr), "conformance/moved-on"))
}

func releaseLeavesATakenOverRecord(t *testing.T, h Harness, cidr string) {
	ctx := context.Background()
	b := h.Pool(t, cidr)
	validated(t, b)
	alloc, err := b.Allocate(ctx, claim("taken"))
	require.NoError(t, err)
	h.Disown(t, alloc.Address.Addr())

	err = b.Release(ctx, claim("taken"), alloc.Reservation())
	require.ErrorIs(t, err, backends.ErrNotOwned)
	assert.Contains(t, err.Error(), "conformance/taken", "the error names the claim's marker")

	assert.Empty(t, markedWith(h.Reservations(t, cidr), "conformance/taken"))

	// Had the release deleted the record, the next free address would be
	// the one it held.
	other, err := b.Allocate(ctx, claim("other"))
	require.NoError(t, err)
	assert.NotEqual(t, alloc.Address.Addr(), other.Address.Addr(), "the taken-over record still holds its address")
}

func exhaustionAndReuse(t *testing.T, h Harness, cidr string) {
	ctx := context.Background()
	b := h.Pool(t, cidr)
	validated(t, b)
	var got []backends.Allocation
	var err error
	for i := 0; i < 16; i++ {
		var a backends.Allocation
		if a, err = b.Allocate(ctx, claim(fmt.Sprintf("fill-%d", i))); err != nil {
			break
		}
		got = append(got, a)
	}
	require.ErrorIs(t, err, backends.ErrExhausted)
	require.NotErrorIs(t, err, backends.ErrInvalidConfig)
	// A /29 has six usable IPv4 addresses; the gateway holds one.
	assert.Len(t, got, 5)

	require.NoError(t, b.Release(ctx, claim("fill-2"), got[2].Reservation()))
	again, err := b.Allocate(ctx, claim("late"))
	require.NoError(t, err)
	assert.Equal(t, got[2].Address, again.Address, "the released address is handed out again")
}

func usageCountsReservations(t *testing.T, h Harness, cidr string) {
	ctx := context.Background()
	b := h.Pool(t, cidr)
	u0, err := b.Validate(ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(14), u0.Total, "a /28 has 14 usable addresses")
	assert.Equal(t, int64(1), u0.Used, "the gateway")

	for i := range 3 {
		_, err := b.Allocate(ctx, claim(fmt.Sprintf("count-%d", i)))
		require.NoError(t, err)
	}
	u, err := b.Usage(ctx)
	require.NoError(t, err)
	assert.Equal(t, u0.Total, u.Total)
	assert.Equal(t, int64(4), u.Used)
	assert.Equal(t, int64(10), u.Free())
}

func badCredentials(t *testing.T, h Harness, cidr string) {
	ctx := context.Background()
	b := h.PoolWithBadCredentials(t, cidr)
	_, err := b.Validate(ctx)
	require.ErrorIs(t, err, backends.ErrUnauthorized)
	_, err = b.Allocate(ctx, claim("refused"))
	require.Error(t, err)
	assert.False(t, errors.Is(err, backends.ErrExhausted), "refused credentials are not exhaustion: %v", err)
	assert.Empty(t, h.Reservations(t, cidr))
}

// throttlingIsNotAnOutage: a system that refuses requests as too many on
// every attempt, or asks for a pause longer than a request may wait, is
// throttling: ErrThrottled, which is an ErrUnavailable, retried alike.
func throttlingIsNotAnOutage(t *testing.T, h Harness, cidr string) {
	b := h.Pool(t, cidr)
	for _, tc := range []struct {
		name     string
		throttle func(*testing.T)
		inError  string
	}{
		{"429 on every attempt", func(t *testing.T) {
			h.Server().InjectFault(httpfault.Fault{Kind: httpfault.Status, Status: http.StatusTooManyRequests, Times: 1 << 30})
			t.Cleanup(h.Server().ClearFaults)
		}, "HTTP 429"},
		{"a pause longer than the request may wait", func(t *testing.T) {
			h.Server().SetThrottle(httpfault.ThrottleLimit{RequestsPerSecond: 1, RetryAfter: time.Hour})
			t.Cleanup(func() { h.Server().SetThrottle(httpfault.ThrottleLimit{}) })
		}, "asked for quiet until"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.throttle(t)
			_, err := b.Validate(context.Background())
			require.ErrorIs(t, err, backends.ErrThrottled)
			require.ErrorIs(t, err, backends.ErrUnavailable)
			assert.Contains(t, err.Error(), tc.inError)
		})
	}
}

func ipv6(t *testing.T, h Harness, cidr string) {
	ctx := context.Background()
	b := h.Pool(t, cidr)
	validated(t, b)
	network := netip.MustParsePrefix(cidr)

	alloc, err := b.Allocate(ctx, claim("six"))
	require.NoError(t, err)
	assert.True(t, alloc.Address.Addr().Is6())
	assert.True(t, network.Contains(alloc.Address.Addr()))
	assert.Equal(t, 64, alloc.Address.Bits())
	assert.Equal(t, network.Addr().Next(), alloc.Gateway)

	again, err := b.Allocate(ctx, claim("six"))
	require.NoError(t, err)
	assert.Equal(t, alloc.Address, again.Address)
	other, err := b.Allocate(ctx, claim("six-b"))
	require.NoError(t, err)
	assert.NotEqual(t, alloc.Address, other.Address)

	require.NoError(t, b.Release(ctx, claim("six"), alloc.Reservation()))
	assert.Empty(t, markedWith(h.Reservations(t, cidr), "conformance/six"))
	assert.Len(t, markedWith(h.Reservations(t, cidr), "conformance/six-b"), 1)
}

// recordsListsThePoolsMarkedRecords: an audit's listing holds the records of
// the pool's sources whose marker has the prefix, and nothing else.
func recordsListsThePoolsMarkedRecords(t *testing.T, h Harness, cidr string) {
	ctx := context.Background()
	b := h.Pool(t, cidr)
	validated(t, b)
	want := map[string]netip.Prefix{}
	for _, name := range []string{"listed-a", "listed-b", "listed-c"} {
		a, err := b.Allocate(ctx, claim(name))
		require.NoError(t, err)
		want["conformance/"+name] = a.Address
	}
	_, err := b.Allocate(ctx, backends.Claim{Marker: "elsewhere/ns/not-listed", Namespace: "ns", Name: "not-listed"})
	require.NoError(t, err)
	other := h.Pool(t, "10.201.11.0/28")
	validated(t, other)
	_, err = other.Allocate(ctx, claim("other-pool"))
	require.NoError(t, err)

	records, err := b.Records(ctx, "conformance/")
	require.NoError(t, err)
	got := map[string]netip.Prefix{}
	for _, r := range records {
		assert.NotEmpty(t, r.Reference)
		got[r.Marker] = netip.PrefixFrom(r.Address.Addr(), want[r.Marker].Bits())
	}
	assert.Equal(t, want, got, "the pool's records with the prefix, no other pool's, no other prefix")
}

// remarkAndDeleteOnlyWhatStillCarriesTheMarker: Remark and Delete act on a
// record only while it carries the marker it was listed with.
func remarkAndDeleteOnlyWhatStillCarriesTheMarker(t *testing.T, h Harness, cidr string) {
	ctx := context.Background()
	b := h.Pool(t, cidr)
	validated(t, b)
	a, err := b.Allocate(ctx, claim("remarked"))
	require.NoError(t, err)
	listed := backends.Record{Address: a.Address, Marker: "conformance/remarked", Reference: a.Reference}

	tombstone := backends.TombstoneMarker(listed.Marker, time.Now())
	require.NoError(t, b.Remark(ctx, listed, tombstone))
	assert.Len(t, markedWith(h.Reservations(t, cidr), tombstone), 1)
	_, err = b.Lookup(ctx, claim("remarked"))
	assert.ErrorIs(t, err, backends.ErrNotFound, "a tombstone is not the claim's record")

	assert.ErrorIs(t, b.Remark(ctx, listed, "conformance/thief"), backends.ErrNotOwned)
	assert.ErrorIs(t, b.Delete(ctx, listed), backends.ErrNotOwned, "the record no longer carries the listed marker")
	assert.Len(t, markedWith(h.Reservations(t, cidr), tombstone), 1, "kept")

	retired := listed
	retired.Marker = tombstone
	require.NoError(t, b.Delete(ctx, retired))
	assert.Empty(t, markedWith(h.Reservations(t, cidr), tombstone))
	require.NoError(t, b.Delete(ctx, retired), "deleting what is gone is not an error")
}

// restoreReservesTheSameAddress: a record deleted outside the provider is
// reserved again at the claim's address; an address someone else holds is
// never taken.
func restoreReservesTheSameAddress(t *testing.T, h Harness, cidr string) {
	ctx := context.Background()
	b := h.Pool(t, cidr)
	validated(t, b)
	a, err := b.Allocate(ctx, claim("restored"))
	require.NoError(t, err)
	require.NoError(t, b.Delete(ctx, backends.Record{Address: a.Address, Marker: "conformance/restored", Reference: a.Reference}))
	require.Empty(t, markedWith(h.Reservations(t, cidr), "conformance/restored"))

	again, err := b.Restore(ctx, claim("restored"), a.Address)
	require.NoError(t, err)
	assert.Equal(t, a.Address, again.Address)
	assert.Equal(t, a.Gateway, again.Gateway)
	found, err := b.Lookup(ctx, claim("restored"))
	require.NoError(t, err)
	assert.Equal(t, a.Address.Addr(), found.Address.Addr(), "the marker finds it again")
	twice, err := b.Restore(ctx, claim("restored"), a.Address)
	require.NoError(t, err, "restoring twice is not an error")
	assert.Equal(t, a.Address.Addr(), twice.Address.Addr())
	assert.Len(t, markedWith(h.Reservations(t, cidr), "conformance/restored"), 1)

	h.Disown(t, a.Address.Addr())
	_, err = b.Restore(ctx, claim("restored"), a.Address)
	require.ErrorIs(t, err, backends.ErrAddressTaken)
	assert.Empty(t, markedWith(h.Reservations(t, cidr), "conformance/restored"), "nothing was taken over")

	_, err = b.Restore(ctx, claim("restored"), netip.MustParsePrefix("10.251.9.9/28"))
	require.ErrorIs(t, err, backends.ErrOutsidePool)
}

// retireKeepsATombstone: with a grace period, a release keeps the record
// under a tombstone marker, so its address is neither the claim's nor free.
func retireKeepsATombstone(t *testing.T, h Harness, cidr string) {
	ctx := context.Background()
	b := h.Pool(t, cidr)
	validated(t, b)
	a, err := b.Allocate(ctx, claim("retired"))
	require.NoError(t, err)
	at := time.Now()
	require.NoError(t, b.Retire(ctx, claim("retired"), a.Reservation(), at))

	tombstone := backends.TombstoneMarker("conformance/retired", at)
	kept := markedWith(h.Reservations(t, cidr), tombstone)
	require.Len(t, kept, 1)
	assert.Equal(t, a.Address.Addr(), kept[0].Address)
	_, err = b.Lookup(ctx, claim("retired"))
	assert.ErrorIs(t, err, backends.ErrNotFound)
	require.NoError(t, b.Retire(ctx, claim("retired"), a.Reservation(), at.Add(time.Minute)), "retiring twice is not an error")
	assert.Len(t, markedWith(h.Reservations(t, cidr), tombstone), 1, "and keeps the first release time")

	next, err := b.Allocate(ctx, claim("after-retired"))
	require.NoError(t, err)
	assert.NotEqual(t, a.Address.Addr(), next.Address.Addr(), "a tombstone's address is not handed out")
	u, err := b.Usage(ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(3), u.Used, "the gateway, the tombstone and the new claim")
}

// keepHandsTheRecordToTheIPAMTeam: a claim whose record is retained keeps
// the record in the system, without its marker, so that nothing of the
// provider's holds it and its address is handed to no one.
func keepHandsTheRecordToTheIPAMTeam(t *testing.T, h Harness, cidr string) {
	ctx := context.Background()
	b := h.Pool(t, cidr)
	before := usedOf(t, b) // the gateway, and on a real NetBox what earlier runs kept
	a, err := b.Allocate(ctx, claim("kept"))
	require.NoError(t, err)
	other, err := b.Allocate(ctx, claim("kept-neighbour"))
	require.NoError(t, err)
	// A real NetBox outlives the run: what a rerun would adopt goes.
	t.Cleanup(func() {
		_ = b.Release(ctx, claim("kept-neighbour"), other.Reservation())
		_ = b.Release(ctx, claim("after-kept"), backends.Reservation{})
	})

	require.NoError(t, b.Keep(ctx, claim("kept"), a.Reservation()))
	t.Cleanup(func() { _ = b.Delete(ctx, backends.Record{Address: a.Address, Reference: a.Reference}) })
	assert.Empty(t, markedWith(h.Reservations(t, cidr), "conformance/kept"), "the record no longer carries the claim's marker")
	assert.NotNil(t, h.Snapshot(t, a.Reference), "the record is still in the system")
	_, err = b.Lookup(ctx, claim("kept"))
	require.ErrorIs(t, err, backends.ErrNotFound)
	require.NoError(t, b.Keep(ctx, claim("kept"), a.Reservation()), "keeping again, as after a lost answer, is done")
	assert.Len(t, markedWith(h.Reservations(t, cidr), "conformance/kept-neighbour"), 1, "the other claim's record is untouched")

	next, err := b.Allocate(ctx, claim("after-kept"))
	require.NoError(t, err)
	assert.NotEqual(t, a.Address.Addr(), next.Address.Addr(), "a kept record's address is not handed out")
	assert.NotEqual(t, other.Address.Addr(), next.Address.Addr())
	assert.Equal(t, before+3, usedOf(t, b), "the kept record and two claims'")
}

// keepDeletesTheClaimsDuplicates: only the record the claim was bound to
// is kept; another carrying its marker (a resent request's, which no
// machine used) is deleted, not left to hold an address for no one.
func keepDeletesTheClaimsDuplicates(t *testing.T, h Harness, cidr string) {
	ctx := context.Background()
	b := h.Pool(t, cidr)
	before := usedOf(t, b)
	a, err := b.Allocate(ctx, claim("kept-once"))
	require.NoError(t, err)
	// A second record of the claim's, of the pool's kind, at a free address.
	_, err = b.Restore(ctx, claim("kept-once"), netip.PrefixFrom(a.Address.Addr().Next().Next(), a.Address.Bits()))
	require.NoError(t, err)
	require.Len(t, markedWith(h.Reservations(t, cidr), "conformance/kept-once"), 2)

	require.NoError(t, b.Keep(ctx, claim("kept-once"), a.Reservation()))
	t.Cleanup(func() { _ = b.Delete(ctx, backends.Record{Address: a.Address, Reference: a.Reference}) })
	assert.Empty(t, markedWith(h.Reservations(t, cidr), "conformance/kept-once"))
	assert.NotNil(t, h.Snapshot(t, a.Reference), "the claim's record is kept")
	assert.Equal(t, before+1, usedOf(t, b), "the kept record: the duplicate is deleted")
}

// keepKeepsTheRecordTheAuditRestored: the claim's record was deleted and
// restored at its address under another reference than the one recorded
// when the claim was bound; keeping finds it by its address and keeps it.
func keepKeepsTheRecordTheAuditRestored(t *testing.T, h Harness, cidr string) {
	ctx := context.Background()
	b := h.Pool(t, cidr)
	before := usedOf(t, b)
	a, err := b.Allocate(ctx, claim("kept-restored"))
	require.NoError(t, err)
	require.NoError(t, b.Delete(ctx, backends.Record{Address: a.Address, Marker: "conformance/kept-restored", Reference: a.Reference}))
	restored, err := b.Restore(ctx, claim("kept-restored"), a.Address)
	require.NoError(t, err)
	if restored.Reference == a.Reference {
		t.Skip("the system gave the restored record the reference of the deleted one")
	}
	t.Cleanup(func() { _ = b.Delete(ctx, backends.Record{Address: restored.Address, Reference: restored.Reference}) })

	require.NoError(t, b.Keep(ctx, claim("kept-restored"), a.Reservation()), "the reservation as recorded at binding")
	assert.Empty(t, markedWith(h.Reservations(t, cidr), "conformance/kept-restored"))
	assert.NotNil(t, h.Snapshot(t, restored.Reference), "the restored record is kept")
	assert.Equal(t, before+1, usedOf(t, b))
}

// usedOf validates b and returns its used count.
func usedOf(t *testing.T, b backends.Backend) int64 {
	t.Helper()
	u, err := b.Validate(context.Background())
	require.NoError(t, err)
	return u.Used
}

// lostKeepAnswerLeavesTheRecordKept: the answer to the removal of the
// marker is lost after the system applied it; the keep, retried if it
// failed, ends with the record kept, unmarked, once.
func lostKeepAnswerLeavesTheRecordKept(t *testing.T, h Harness, cidr string) {
	ctx := context.Background()
	b := h.Pool(t, cidr)
	before := usedOf(t, b)
	a, err := b.Allocate(ctx, claim("kept-lost"))
	require.NoError(t, err)

	t.Cleanup(func() { _ = b.Delete(ctx, backends.Record{Address: a.Address, Reference: a.Reference}) })
	h.LoseNextMarking(t, func() {})
	if err := b.Keep(ctx, claim("kept-lost"), a.Reservation()); err != nil {
		require.NotErrorIs(t, err, backends.ErrNotOwned, "the claim's own write is not someone else's")
		require.NoError(t, b.Keep(ctx, claim("kept-lost"), a.Reservation()), "the retried keep finds the record kept")
	}
	assert.Empty(t, markedWith(h.Reservations(t, cidr), "conformance/kept-lost"))
	assert.NotNil(t, h.Snapshot(t, a.Reference), "the record is still in the system")
	assert.Equal(t, before+1, usedOf(t, b), "the kept record")
}

// raceWait bounds how long RaceWrites holds a write for the others: long
// enough for any writer that looked before the others wrote to reach its
// own write, short enough that a test whose writers take turns fails
// quickly instead of hanging.
const raceWait = 10 * time.Second

// otherName is hostOrURL with its loopback host named the other way
// (localhost for 127.0.0.1 and back), as a second manager process might
// reach the same system. It skips t where the system has no such name.
func otherName(t testing.TB, hostOrURL string) string {
	switch {
	case strings.Contains(hostOrURL, "127.0.0.1"):
		return strings.Replace(hostOrURL, "127.0.0.1", "localhost", 1)
	case strings.Contains(hostOrURL, "localhost"):
		return strings.Replace(hostOrURL, "localhost", "127.0.0.1", 1)
	}
	t.Skipf("%s is reachable by no second name, as a second manager would reach it", hostOrURL)
	return ""
}
