package conformance

import (
	"context"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends"
)

// BenchAllocateRelease measures one claim's life, each claim alone: the
// client's own cost, and the requests it makes of the system.
func BenchAllocateRelease(b *testing.B, h Harness) {
	backend := h.Pool(b, "10.0.0.0/16")
	validated(b, backend)
	ctx := context.Background()
	before := h.Requests()
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
	b.ReportMetric(float64(h.Requests()-before)/float64(b.N), "requests/claim")
}

// BenchNewClaim measures the time a lone new claim's reservation takes,
// through the batch's quiet and the requests it makes, with the system
// answering each request after a latency: a claim seen for the first time
// (backends.Claim.Fresh), searched for while it is reserved, against one
// searched for first.
func BenchNewClaim(b *testing.B, newHarness func(testing.TB) Harness) {
	for _, latency := range []time.Duration{10 * time.Millisecond, 50 * time.Millisecond} {
		for _, fresh := range []bool{false, true} {
			name := map[bool]string{false: "searched first", true: "fresh"}[fresh]
			b.Run(fmt.Sprintf("%v per request, %s", latency, name), func(b *testing.B) {
				h := newHarness(b)
				backend := h.Pool(b, "10.0.0.0/16")
				validated(b, backend)
				h.SetLatency(latency)
				ctx := context.Background()
				before := h.Requests()
				for i := 0; b.Loop(); i++ {
					c := claim(fmt.Sprintf("m-%d", i))
					c.Fresh = fresh
					if _, err := backend.Allocate(ctx, c); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(h.Requests()-before)/float64(b.N), "requests/claim")
			})
		}
	}
}

// BenchAudit measures one audit's listing of a pool holding 1,000 and
// 10,000 records of this management cluster (and a tenth as many of
// another), each on a fresh system from newHarness: the requests it costs
// and the time it takes, without and with 10 ms per request.
func BenchAudit(b *testing.B, newHarness func(testing.TB) Harness) {
	for _, n := range []int{1000, 10000} {
		for _, latency := range []time.Duration{0, 10 * time.Millisecond} {
			b.Run(fmt.Sprintf("records=%d/latency=%s", n, latency), func(b *testing.B) {
				h := newHarness(b)
				backend := h.Pool(b, "10.0.0.0/16")
				validated(b, backend)
				if !backends.Offers(backend, backends.RoleAuditLister) {
					b.Skipf("the driver offers no %s", backends.RoleAuditLister)
				}
				for i := range n + n/10 {
					marker := fmt.Sprintf("uid/ns/m-%d", i)
					if i >= n {
						marker = fmt.Sprintf("other/ns/m-%d", i)
					}
					h.Hold(b, netip.MustParsePrefix(fmt.Sprintf("10.0.%d.%d/16", (i+2)/256, (i+2)%256)), marker)
				}
				ctx := context.Background()
				h.SetLatency(latency)
				before := h.Requests()
				b.ReportAllocs()
				b.ResetTimer()
				for b.Loop() {
					records, err := backend.Records(ctx, "uid/")
					if err != nil || len(records) != n {
						b.Fatalf("listed %d records (%v), want %d", len(records), err, n)
					}
				}
				b.ReportMetric(float64(h.Requests()-before)/float64(b.N), "requests/audit")
			})
		}
	}
}
