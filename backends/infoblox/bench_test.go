package infoblox_test

import (
	"testing"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends/infoblox"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/conformance"
)

// The benchmarks are the conformance suite's (test/conformance/bench.go),
// on a WAPI simulator over TLS of their own.

func BenchmarkAllocateRelease(b *testing.B) {
	conformance.BenchAllocateRelease(b, conformance.InfobloxHarness(b, infoblox.FixedAddress))
}

func BenchmarkAudit(b *testing.B) {
	conformance.BenchAudit(b, func(t testing.TB) conformance.Harness { return conformance.InfobloxHarness(t, infoblox.FixedAddress) })
}
