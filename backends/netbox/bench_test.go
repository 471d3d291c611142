package netbox_test

import (
	"testing"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/conformance"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/netboxsim"
)

// The benchmarks are the conformance suite's (test/conformance/bench.go),
// on a NetBox simulator of their own.

func BenchmarkAllocateRelease(b *testing.B) {
	conformance.BenchAllocateRelease(b, harness(b))
}

func BenchmarkNewClaim(b *testing.B) { conformance.BenchNewClaim(b, harness) }

func BenchmarkAudit(b *testing.B) { conformance.BenchAudit(b, harness) }

func harness(t testing.TB) conformance.Harness {
	sim := netboxsim.New()
	t.Cleanup(sim.Close)
	return conformance.NetBoxHarness(sim)
}
