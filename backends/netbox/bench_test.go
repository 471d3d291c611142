package netbox_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// BenchmarkAllocateRelease measures one claim's life against the in-process
// simulator: the client's own cost, and the NetBox requests it makes.
func BenchmarkAllocateRelease(b *testing.B) {
	sim := newSim(b, "10.0.0.0/16")
	backend := newBackend(b, sim, withSources(prefixSources("10.0.0.0/16")...))
	ctx := context.Background()
	_, err := backend.Validate(ctx)
	require.NoError(b, err)
	sim.ResetCalls()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		c := claim(fmt.Sprintf("m-%d", i))
		alloc, err := backend.Allocate(ctx, c)
		if err != nil {
			b.Fatal(err)
		}
		if err := backend.Release(ctx, c, alloc.Reservation()); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(sim.Calls()))/float64(b.N), "requests/claim")
}
