package netbox_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends/netbox"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/httpfault"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/netboxsim"
)

// The batching both systems share is in test/conformance; this is NetBox's
// own limit on it.

// gunicorn, which serves NetBox, refuses request lines over 4094 bytes: a
// batch of long markers is searched in as many requests as it takes, sent
// at once.
func TestLongMarkersAreSearchedInRequestsGunicornAccepts(t *testing.T) {
	sim := newSim(t, "10.0.0.0/24")
	b := newBackend(t, sim, withSources(prefixSources("10.0.0.0/24")...), func(c *netbox.Config) {
		// Only a full batch starts: the test sees exactly one.
		c.Batch = backends.BatchOptions{MaxSize: 40, Window: time.Hour}
	})
	_, err := b.Validate(context.Background())
	require.NoError(t, err)
	sim.ResetCalls()
	// Each search waits for the other: sent one after the other, the first
	// would wait alone until it gave up.
	var arrived atomic.Int32
	var waitedAlone atomic.Bool
	both := make(chan struct{})
	sim.InjectFault(netboxsim.Fault{Kind: httpfault.Before, Method: "GET", PathContains: "/api/ipam/ip-addresses/", Times: 2, Then: func() {
		if arrived.Add(1) == 2 {
			close(both)
		}
		select {
		case <-both:
		case <-time.After(5 * time.Second):
			waitedAlone.Store(true)
		}
	}})

	errs := make([]error, 40)
	var wg sync.WaitGroup
	for i := range errs {
		c := claim(fmt.Sprintf("%s-%02d", strings.Repeat("long-machine-name", 5), i))
		wg.Go(func() { _, errs[i] = b.Allocate(context.Background(), c) })
	}
	wg.Wait()
	for i, err := range errs {
		require.NoError(t, err)
		assert.Len(t, marked(sim, claim(fmt.Sprintf("%s-%02d", strings.Repeat("long-machine-name", 5), i)).Marker), 1)
	}
	searches := 0
	for _, c := range sim.Calls() {
		if c.Method == "GET" {
			searches++
			assert.Less(t, len("GET "+c.Path+"?"+c.Query+" HTTP/1.1"), 4094, "request line")
		}
	}
	assert.Equal(t, 2, searches, "the markers fill two searches")
	assert.False(t, waitedAlone.Load(), "the two searches are sent at once")
	assert.Equal(t, 1, sim.CountCalls("POST", "/api/ipam/prefixes/"))
}
