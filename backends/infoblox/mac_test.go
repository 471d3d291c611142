package infoblox_test

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends"
)

func withMAC(name, mac string) backends.Claim {
	c := claim(name)
	c.MAC = mac
	return c
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
