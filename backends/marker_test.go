package backends_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends"
)

func TestMarker(t *testing.T) {
	assert.Equal(t, "ns/claim", backends.Marker("", "ns", "claim"))
	assert.Equal(t, "mgmt-eu1/ns/claim", backends.Marker("mgmt-eu1", "ns", "claim"))
	assert.NotEqual(t, backends.Marker("a", "ns", "claim"), backends.Marker("b", "ns", "claim"),
		"management clusters sharing one IPAM system stay apart")
}

func TestValidateIdentity(t *testing.T) {
	tests := []struct {
		identity string
		valid    bool
	}{
		{"", true},
		{"mgmt-eu1", true},
		{"prod.example.com", true},
		{"a/b", false},
		{"Upper", false},
		{"-leading", false},
		{"trailing-", false},
	}
	for _, tt := range tests {
		t.Run(tt.identity, func(t *testing.T) {
			err := backends.ValidateIdentity(tt.identity)
			assert.Equal(t, tt.valid, err == nil, "%v", err)
		})
	}
}

func TestSameClaim(t *testing.T) {
	claim := backends.Claim{Namespace: "default", Name: "machine-0"}
	for _, tc := range []struct {
		marker string
		want   bool
	}{
		{"default/machine-0", true},
		{"mgmt-a/default/machine-0", true},
		{"0b3c1e9e-5b0e-4a57-9d43-6c2f0e0c2d11/default/machine-0", true},
		{"default/machine-01", false},
		{"other/machine-0", false},
		{"x/other/default/machine-0", false},
		{"/default/machine-0", false},
		{"", false},
	} {
		assert.Equal(t, tc.want, backends.SameClaim(tc.marker, claim), tc.marker)
	}
}
