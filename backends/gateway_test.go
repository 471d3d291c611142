package backends_test

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends"
)

func TestSourceGateways(t *testing.T) {
	addrs := func(ss ...string) []netip.Addr {
		var out []netip.Addr
		for _, s := range ss {
			out = append(out, netip.MustParseAddr(s))
		}
		return out
	}
	for _, tc := range []struct {
		name         string
		network      string
		first, last  string
		prefixLength int
		want         []netip.Addr
		invalid      bool
	}{
		{"no prefixLength", "10.0.0.0/24", "10.0.0.1", "10.0.0.254", 0, addrs("10.0.0.1"), false},
		{"no narrowing", "10.0.0.0/24", "10.0.0.1", "10.0.0.254", 24, addrs("10.0.0.1"), false},
		{"a range past the gateway", "10.0.0.0/24", "10.0.0.10", "10.0.0.20", 0, nil, false},
		{"widening: the wider subnet's, outside the source", "10.0.0.64/26", "10.0.0.65", "10.0.0.126", 24, nil, false},
		{"widening: the wider subnet's, inside the source", "10.0.0.0/26", "10.0.0.1", "10.0.0.62", 24, addrs("10.0.0.1"), false},
		{"a /31 has none", "10.0.0.4/31", "10.0.0.4", "10.0.0.5", 0, nil, false},
		{"a /32 has none", "10.0.0.4/32", "10.0.0.4", "10.0.0.4", 0, nil, false},
		{"narrowed to /31s: none", "10.0.0.0/16", "10.0.0.0", "10.0.255.255", 31, nil, false},
		{"narrowed to /32s: none", "10.0.0.0/24", "10.0.0.0", "10.0.0.255", 32, nil, false},
		{"an IPv6 /127 has none", "2001:db8::/127", "2001:db8::", "2001:db8::1", 0, nil, false},
		{"a /22 in four /24s", "10.0.0.0/22", "10.0.0.1", "10.0.3.254", 24, addrs("10.0.0.1", "10.0.1.1", "10.0.2.1", "10.0.3.1"), false},
		{"only those the source hands out", "10.0.0.0/22", "10.0.1.10", "10.0.2.200", 24, addrs("10.0.2.1"), false},
		{"IPv6", "2001:db8::/63", "2001:db8::1", "2001:db8:0:1:ffff:ffff:ffff:ffff", 64, addrs("2001:db8::1", "2001:db8:0:1::1"), false},
		{"too many", "10.0.0.0/16", "10.0.0.1", "10.0.255.254", 28, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := backends.SourceGateways(netip.MustParsePrefix(tc.network), netip.MustParseAddr(tc.first), netip.MustParseAddr(tc.last), tc.prefixLength)
			if tc.invalid {
				require.ErrorIs(t, err, backends.ErrInvalidConfig)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestCheckPrefixLength(t *testing.T) {
	tests := []struct {
		network      string
		prefixLength int
		wantErr      bool
	}{
		{"10.0.0.0/24", 0, false},
		{"10.0.0.0/24", 32, false},
		{"10.0.0.0/24", 33, true},
		{"10.0.0.0/24", 64, true},
		{"2001:db8::/48", 64, false},
		{"2001:db8::/48", 128, false},
	}
	for _, tt := range tests {
		err := backends.CheckPrefixLength(tt.prefixLength, netip.MustParsePrefix(tt.network), "source "+tt.network)
		if tt.wantErr {
			assert.ErrorIs(t, err, backends.ErrInvalidConfig, "%s with %d", tt.network, tt.prefixLength)
		} else {
			assert.NoError(t, err, "%s with %d", tt.network, tt.prefixLength)
		}
	}
}

func TestFirstUsable(t *testing.T) {
	for _, tc := range []struct {
		prefix string
		want   string
	}{
		{"10.0.0.7/24", "10.0.0.1"},
		{"10.0.1.9/23", "10.0.0.1"},
		{"10.0.1.9/24", "10.0.1.1"},
		{"10.0.0.10/29", "10.0.0.9"},
		{"10.0.0.4/31", ""},
		{"10.0.0.4/32", ""},
		{"2001:db8::42/64", "2001:db8::1"},
	} {
		t.Run(tc.prefix, func(t *testing.T) {
			got := backends.FirstUsable(netip.MustParsePrefix(tc.prefix))
			if tc.want == "" {
				assert.False(t, got.IsValid(), "no gateway fits %s, got %s", tc.prefix, got)
				return
			}
			assert.Equal(t, tc.want, got.String())
		})
	}
}
