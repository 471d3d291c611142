package infoblox_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends/infoblox"
)

// BenchmarkAllocateRelease measures one claim's life against the in-process
// WAPI simulator over TLS: the client's own cost, and the WAPI calls it makes.
func BenchmarkAllocateRelease(b *testing.B) {
	sim := newSim(b, "10.0.0.0/16")
	backend := newBackend(b, config(sim, "10.0.0.0/16"))
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

// BenchmarkAudit measures one audit's listing of a pool holding 1,000 and
// 10,000 objects of this management cluster (and a tenth as many of
// another): the WAPI calls it costs and the time it takes, without and
// with 10 ms per request.
func BenchmarkAudit(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		for _, latency := range []time.Duration{0, 10 * time.Millisecond} {
			b.Run(fmt.Sprintf("records=%d/latency=%s", n, latency), func(b *testing.B) {
				sim := newSim(b, "10.0.0.0/16")
				sim.AddEADefinition(infoblox.DefaultMarkerEA, "STRING")
				for i := range n + n/10 {
					marker := fmt.Sprintf("uid/ns/m-%d", i)
					if i >= n {
						marker = fmt.Sprintf("other/ns/m-%d", i)
					}
					sim.AddFixedAddress("default", fmt.Sprintf("10.0.%d.%d", (i+2)/256, (i+2)%256),
						map[string]string{infoblox.DefaultMarkerEA: marker})
				}
				backend := newBackend(b, config(sim, "10.0.0.0/16"))
				ctx := context.Background()
				_, err := backend.Validate(ctx)
				require.NoError(b, err)
				sim.SetLatency(latency)
				sim.ResetCalls()
				b.ReportAllocs()
				b.ResetTimer()
				for b.Loop() {
					records, err := backend.Records(ctx, "uid/")
					if err != nil || len(records) != n {
						b.Fatalf("listed %d records (%v), want %d", len(records), err, n)
					}
				}
				b.ReportMetric(float64(len(sim.Calls()))/float64(b.N), "requests/audit")
			})
		}
	}
}
