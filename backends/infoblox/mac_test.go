package infoblox_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends/infoblox"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/wapisim"
)

func withMAC(name, mac string) backends.Claim {
	c := claim(name)
	c.MAC = mac
	return c
}

// plannedDHCPReservation is a backend of a pool that adopts plans named
// after the machine, and the IPAM team's fixed address planned for machine
// db-0 with MAC 52:54:00:00:00:99.
func plannedDHCPReservation(t *testing.T) (*wapisim.Server, backends.Backend, string) {
	t.Helper()
	sim := newSim(t, "10.0.0.0/24")
	cfg := config(sim, "10.0.0.0/24")
	cfg.Reservation.NamePattern = "{{ .MachineName }}"
	cfg.Planned = &infoblox.Planned{}
	b := newBackend(t, cfg)
	ref := sim.AddFixedAddress("default", "10.0.0.40", nil)
	sim.SetName(ref, "db-0")
	sim.SetMAC(ref, "52:54:00:00:00:99")
	return sim, b, ref
}

// TestFixedAddressWithMACIsADHCPReservation: a claim with a MAC gets a
// fixed address that the grid's DHCP serves to that MAC.
func TestFixedAddressWithMACIsADHCPReservation(t *testing.T) {
	sim := newSim(t, "10.0.0.0/24")
	b := newBackend(t, config(sim, "10.0.0.0/24"))
	_, err := b.Allocate(context.Background(), withMAC("m0", "52:54:00:aa:bb:01"))
	require.NoError(t, err)
	objs := markedWith(sim, "fixedaddress", "ns/m0")
	require.Len(t, objs, 1)
	assert.Equal(t, "MAC_ADDRESS", objs[0].MatchClient)
	assert.Equal(t, "52:54:00:aa:bb:01", objs[0].MAC)
}

// TestMACHeldByAnotherFixedAddress: the grid refuses a MAC another fixed
// address of the network holds; the claim is told the MAC and the holder,
// and nothing is reserved for it. Claims allocated together in one request
// object are not failed by the one refused.
func TestMACHeldByAnotherFixedAddress(t *testing.T) {
	sim := newSim(t, "10.0.0.0/24")
	b := newBackend(t, config(sim, "10.0.0.0/24"))
	ctx := context.Background()
	_, err := b.Allocate(ctx, withMAC("holder", "52:54:00:aa:bb:01"))
	require.NoError(t, err)

	_, err = b.Allocate(ctx, withMAC("dup", "52:54:00:aa:bb:01"))
	require.ErrorIs(t, err, backends.ErrMACAddressInUse)
	assert.Contains(t, err.Error(), "MAC address 52:54:00:aa:bb:01 is held by fixedaddress/")
	assert.Contains(t, err.Error(), `CAPI-IPAM-Claim="ns/holder"`, "the holder is named by its marker")
	assert.Empty(t, markedWith(sim, "fixedaddress", "ns/dup"), "nothing is reserved for the refused claim")

	// A batch: the refused claim fails alone.
	claims := []backends.Claim{withMAC("b1", "52:54:00:aa:bb:11"), withMAC("b2", "52:54:00:aa:bb:01"), withMAC("b3", "52:54:00:aa:bb:13")}
	errs := make([]error, len(claims))
	var wg sync.WaitGroup
	for i, c := range claims {
		wg.Go(func() { _, errs[i] = b.Allocate(ctx, c) })
	}
	wg.Wait()
	require.NoError(t, errs[0])
	require.ErrorIs(t, errs[1], backends.ErrMACAddressInUse)
	require.NoError(t, errs[2])
	assert.Len(t, markedWith(sim, "fixedaddress", "ns/b1"), 1)
	assert.Empty(t, markedWith(sim, "fixedaddress", "ns/b2"))
	assert.Len(t, markedWith(sim, "fixedaddress", "ns/b3"), 1)
}

// TestARetiredDHCPReservationServesNoMachine: a fixed address kept as a
// tombstone for the pool's grace period holds its address for no one: it
// is a reservation again (match_client RESERVED, the zero MAC), so that
// the grid's DHCP no longer serves the machine that is gone, and the MAC
// is free for another fixed address.
func TestARetiredDHCPReservationServesNoMachine(t *testing.T) {
	sim := newSim(t, "10.0.0.0/24")
	b := newBackend(t, config(sim, "10.0.0.0/24"))
	ctx := context.Background()
	c := withMAC("m0", "52:54:00:aa:bb:01")
	alloc, err := b.Allocate(ctx, c)
	require.NoError(t, err)

	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	require.NoError(t, b.Retire(ctx, c, alloc.Reservation(), at))
	retired, ok := sim.Object(alloc.Reference)
	require.True(t, ok, "kept for the grace period")
	assert.Equal(t, backends.TombstoneMarker(c.Marker, at), retired.EAs[infoblox.DefaultMarkerEA])
	assert.Equal(t, "RESERVED", retired.MatchClient)
	assert.Equal(t, "00:00:00:00:00:00", retired.MAC)
	assert.Equal(t, alloc.Address.Addr(), retired.Addresses[0], "its address stays held")
	require.NoError(t, b.Retire(ctx, c, alloc.Reservation(), at.Add(time.Minute)), "retiring twice is not an error")

	_, err = b.Allocate(ctx, withMAC("m1", "52:54:00:aa:bb:01"))
	require.NoError(t, err, "the MAC is free for the machine's next fixed address")
}

// TestAPlannedDHCPReservationGoesBackAsPlanned: a planned fixed address
// keeps the MAC the IPAM team set when a claim with another MAC adopts
// it, and goes back to them exactly as planned when the claim is retired
// or released.
func TestAPlannedDHCPReservationGoesBackAsPlanned(t *testing.T) {
	for _, retire := range []bool{false, true} {
		t.Run(map[bool]string{false: "released", true: "retired"}[retire], func(t *testing.T) {
			sim, b, ref := plannedDHCPReservation(t)
			ctx := context.Background()
			planned, _ := sim.Object(ref)

			c := withMAC("db-0-pool", "52:54:00:aa:bb:01")
			c.MachineName = "db-0"
			alloc, err := b.Allocate(ctx, c)
			require.NoError(t, err)
			require.Equal(t, ref, alloc.Reference, "the planned fixed address is adopted")
			adopted, _ := sim.Object(ref)
			assert.Equal(t, "52:54:00:00:00:99", adopted.MAC, "adoption writes the marker only")
			assert.Equal(t, "52:54:00:00:00:99", alloc.MAC, "the allocation says the MAC the plan carries")
			assert.Equal(t, "MAC_ADDRESS", adopted.MatchClient)

			if retire {
				require.NoError(t, b.Retire(ctx, c, alloc.Reservation(), time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)))
			} else {
				require.NoError(t, b.Release(ctx, c, alloc.Reservation()))
			}
			back, _ := sim.Object(ref)
			assert.Equal(t, planned, back, "as the IPAM team planned it")
		})
	}
}

// TestAllocationSaysTheMACTheRecordCarries: the allocation says the MAC
// the grid's DHCP serves the record's address to, which is not always the
// claim's: a reservation, an IPv6 fixed address and a host record carry
// none, a plan the one the IPAM team set. Looked up later, it says the
// same.
func TestAllocationSaysTheMACTheRecordCarries(t *testing.T) {
	const machine = "52:54:00:aa:bb:01"
	for _, tc := range []struct {
		name    string
		network string
		claim   backends.Claim
		mutate  func(*infoblox.Config)
		// plan, when set, plans a record for the claim's machine "db-0".
		plan func(sim *wapisim.Server) string
		want string
	}{
		{name: "a DHCP reservation made for the claim", network: "10.0.0.0/24", claim: withMAC("m0", machine), want: machine},
		{name: "a reservation without a MAC", network: "10.0.0.0/24", claim: claim("m0")},
		{name: "an IPv6 fixed address keeps its DUID", network: "2001:db8::/64", claim: withMAC("m0", machine)},
		{name: "a host record gets no MAC", network: "10.0.0.0/24", claim: withMAC("m0", machine),
			mutate: func(c *infoblox.Config) { c.Reservation.ObjectType = infoblox.HostRecord }},
		{name: "a planned fixed address with the IPAM team's MAC", network: "10.0.0.0/24", claim: withMAC("db-0-pool", machine),
			plan: func(sim *wapisim.Server) string {
				ref := sim.AddFixedAddress("default", "10.0.0.40", nil)
				sim.SetName(ref, "db-0")
				sim.SetMAC(ref, "52:54:00:00:00:99")
				return ref
			},
			want: "52:54:00:00:00:99"},
		{name: "a planned reservation", network: "10.0.0.0/24", claim: withMAC("db-0-pool", machine),
			plan: func(sim *wapisim.Server) string {
				ref := sim.AddFixedAddress("default", "10.0.0.40", nil)
				sim.SetName(ref, "db-0")
				return ref
			}},
		{name: "a planned host record with DHCP", network: "10.0.0.0/24", claim: withMAC("db-0-pool", machine),
			mutate: func(c *infoblox.Config) { c.Reservation.ObjectType = infoblox.HostRecord },
			plan: func(sim *wapisim.Server) string {
				return sim.AddHostRecord(wapisim.HostRecord{Name: "db-0", Addresses: []string{"10.0.0.40"}, MAC: "52:54:00:00:00:98"})
			},
			want: "52:54:00:00:00:98"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sim := newSim(t, tc.network)
			cfg := config(sim, tc.network)
			if tc.mutate != nil {
				tc.mutate(&cfg)
			}
			var planned string
			if tc.plan != nil {
				cfg.Reservation.NamePattern = "{{ .MachineName }}"
				cfg.Planned = &infoblox.Planned{}
				planned = tc.plan(sim)
				tc.claim.MachineName = "db-0"
			}
			b := newBackend(t, cfg)
			ctx := context.Background()
			alloc, err := b.Allocate(ctx, tc.claim)
			require.NoError(t, err)
			if planned != "" {
				require.Equal(t, planned, alloc.Reference, "the plan is adopted")
			}
			assert.Equal(t, tc.want, alloc.MAC)
			found, err := b.Lookup(ctx, tc.claim)
			require.NoError(t, err)
			assert.Equal(t, tc.want, found.MAC, "looked up")
		})
	}
}

// TestAFixedAddressHandedOverServesTheHoldersMachine: the guard hands a
// fixed address answered for one claim to the claim whose machine already
// uses the address (Remark). The MAC it was made with is the first
// claim's machine's, which must not get the address from the grid's DHCP:
// the record serves the holder's MAC, or, without one or with one another
// fixed address holds, no machine. A plan keeps the MAC its team set.
func TestAFixedAddressHandedOverServesTheHoldersMachine(t *testing.T) {
	const answered, holders = "52:54:00:aa:bb:01", "52:54:00:aa:bb:02"
	for _, tc := range []struct {
		name            string
		holderMAC       string
		heldElsewhere   bool
		wantMAC, wantMC string
	}{
		{name: "the holder's MAC", holderMAC: holders, wantMAC: holders, wantMC: "MAC_ADDRESS"},
		{name: "a holder without a MAC", holderMAC: "", wantMAC: "00:00:00:00:00:00", wantMC: "RESERVED"},
		{name: "the holder's MAC, held by another fixed address", holderMAC: holders, heldElsewhere: true,
			wantMAC: "00:00:00:00:00:00", wantMC: "RESERVED"},
		{name: "the MAC it serves already", holderMAC: answered, wantMAC: answered, wantMC: "MAC_ADDRESS"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sim := newSim(t, "10.0.0.0/24")
			b := newBackend(t, config(sim, "10.0.0.0/24"))
			ctx := context.Background()
			if tc.heldElsewhere {
				_, err := b.Allocate(ctx, withMAC("other", holders))
				require.NoError(t, err)
			}
			c := withMAC("m0", answered)
			alloc, err := b.Allocate(ctx, c)
			require.NoError(t, err)

			rec := backends.Record{Address: alloc.Address, Marker: c.Marker, Reference: alloc.Reference, MAC: tc.holderMAC}
			require.NoError(t, b.Remark(ctx, rec, claim("holder").Marker))
			got, ok := sim.Object(alloc.Reference)
			require.True(t, ok)
			assert.Equal(t, claim("holder").Marker, got.EAs[infoblox.DefaultMarkerEA], "the record holds the address for the holder")
			assert.Equal(t, tc.wantMAC, got.MAC)
			assert.Equal(t, tc.wantMC, got.MatchClient)
		})
	}
	t.Run("a plan", func(t *testing.T) {
		sim, b, ref := plannedDHCPReservation(t)
		ctx := context.Background()
		c := withMAC("db-0-pool", answered)
		c.MachineName = "db-0"
		alloc, err := b.Allocate(ctx, c)
		require.NoError(t, err)
		require.Equal(t, ref, alloc.Reference, "the plan is adopted")

		rec := backends.Record{Address: alloc.Address, Marker: c.Marker, Reference: alloc.Reference, MAC: holders}
		require.NoError(t, b.Remark(ctx, rec, claim("holder").Marker))
		got, _ := sim.Object(ref)
		assert.Equal(t, "52:54:00:00:00:99", got.MAC, "a plan keeps the MAC its team set")
		assert.Equal(t, "MAC_ADDRESS", got.MatchClient)
	})
}
