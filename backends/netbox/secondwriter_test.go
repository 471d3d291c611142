package netbox_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends/netbox"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/httpfault"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/netboxsim"
)

// Two writers of one claim (replicas without leader election, or a leader
// paused past its lease): writer A's create is applied but its answer is
// lost, writer B, which searched before A's create was applied, makes the
// claim's record and binds it, and A's client resends. A keeps the claim's
// oldest record, its own, and may delete the duplicate its resend made,
// but never B's record: B's machine uses that address, and NetBox would
// give it to the next claim. B's record is a duplicate for the late-record
// sweep, which knows which record the claim is bound to.
func TestAResentCreateNeverDeletesARecordAnotherWriterMade(t *testing.T) {
	sim := newSim(t, "10.0.0.0/24")
	sources := withSources(prefixSources("10.0.0.0/24")...)
	uncertain := 0
	a := newBackend(t, sim, sources, func(c *netbox.Config) {
		// B's create, let go once A's is applied, lands before A resends.
		c.HTTP.RetryWaitMin, c.HTTP.RetryWaitMax = 200*time.Millisecond, 200*time.Millisecond
		c.Batch.MaxSize = 1
		c.Uncertain = func() { uncertain++ }
	})
	b := newBackend(t, sim, sources, func(c *netbox.Config) { c.Batch.MaxSize = 1 })
	ctx := context.Background()
	for _, w := range []backends.Backend{a, b} {
		_, err := w.Validate(ctx)
		require.NoError(t, err)
	}
	c := claim("m")

	bWaits, aApplied := make(chan struct{}), make(chan struct{})
	sim.InjectFault(netboxsim.Fault{Kind: httpfault.Before, Method: http.MethodPost, PathContains: "/available-ips/", Times: 1,
		Then: func() { close(bWaits); <-aApplied }})
	var bAlloc backends.Allocation
	var bErr error
	bDone := make(chan struct{})
	go func() {
		defer close(bDone)
		bAlloc, bErr = b.Allocate(ctx, c)
	}()
	select {
	case <-bWaits:
	case <-time.After(10 * time.Second):
		t.Fatal("B never sent its create")
	}
	sim.InjectFault(netboxsim.Fault{Kind: httpfault.LoseResponse, Method: http.MethodPost, PathContains: "/available-ips/", Times: 1,
		Then: func() { close(aApplied) }})
	aAlloc, aErr := a.Allocate(ctx, c)
	<-bDone
	require.NoError(t, bErr)
	require.NoError(t, aErr)

	var held []string
	for _, ip := range marked(sim, c.Marker) {
		held = append(held, ip.Address)
	}
	assert.Contains(t, held, bAlloc.Address.String(), "B's record, which B bound, is kept")
	assert.Contains(t, held, aAlloc.Address.String(), "A's oldest record, which A answers")
	assert.Len(t, held, 2, "the duplicate A's resend made is deleted at once")
	assert.Positive(t, uncertain, "the duplicate left is the late-record sweep's")
}
