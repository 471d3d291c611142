package netbox_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends/netbox"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/netboxsim"
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

// BenchmarkAudit measures one audit's listing of a pool holding 1,000 and
// 10,000 records of this management cluster (and a tenth as many of
// another): the requests it costs and the time it takes, without and with
// 10 ms per request.
func BenchmarkAudit(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		for _, latency := range []time.Duration{0, 10 * time.Millisecond} {
			b.Run(fmt.Sprintf("records=%d/latency=%s", n, latency), func(b *testing.B) {
				sim := newSim(b, "10.0.0.0/16")
				sim.AddTag(netbox.DefaultTag, netbox.DefaultTag)
				sim.AddCustomField(netbox.DefaultMarkerField, "exact")
				for i := range n + n/10 {
					marker := fmt.Sprintf("uid/ns/m-%d", i)
					if i >= n {
						marker = fmt.Sprintf("other/ns/m-%d", i)
					}
					sim.AddIPAddress(fmt.Sprintf("10.0.%d.%d/16", (i+2)/256, (i+2)%256), netboxsim.IPOptions{
						Tags: []string{netbox.DefaultTag}, CustomFields: map[string]any{netbox.DefaultMarkerField: marker},
					})
				}
				backend := newBackend(b, sim, withSources(prefixSources("10.0.0.0/16")...))
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
