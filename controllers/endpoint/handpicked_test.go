package endpoint

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestHoldsTellsWhetherASourceHoldsAnAddress(t *testing.T) {
	for _, tc := range []struct {
		name          string
		source        [2]string
		addr          string
		inside, known bool
	}{
		{"inside a CIDR", [2]string{"10.0.0.0/24"}, "10.0.0.7", true, true},
		{"outside a CIDR", [2]string{"10.0.0.0/24"}, "10.0.1.7", false, true},
		{"first of a range", [2]string{"10.0.0.10", "10.0.0.20"}, "10.0.0.10", true, true},
		{"last of a range", [2]string{"10.0.0.10", "10.0.0.20"}, "10.0.0.20", true, true},
		{"past a range", [2]string{"10.0.0.10", "10.0.0.20"}, "10.0.0.21", false, true},
		{"IPv6", [2]string{"2001:db8::/64"}, "2001:db8::10", true, true},
		{"a source named by ID", [2]string{""}, "10.0.0.7", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inside, known := holds(tc.source, netip.MustParseAddr(tc.addr))
			assert.Equal(t, tc.inside, inside)
			assert.Equal(t, tc.known, known)
		})
	}
}
