package backends_test

import (
	"testing"
	"time"

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

func TestTombstoneMarker(t *testing.T) {
	at := time.Date(2026, 11, 23, 17, 4, 5, 0, time.FixedZone("x", 3600))
	tomb := backends.TombstoneMarker("uid/ns/claim", at)
	assert.Equal(t, "uid/ns/claim@released=2026-11-23T16:04:05Z", tomb)

	for _, tt := range []struct {
		marker    string
		wantClaim string
		ok        bool
	}{
		{tomb, "uid/ns/claim", true},
		{"uid/ns/claim", "", false},
		{"uid/ns/claim@released=yesterday", "", false},
		{"ns/claim@released=2026-11-23T16:04:05Z", "ns/claim", true},
	} {
		t.Run(tt.marker, func(t *testing.T) {
			claim, when, ok := backends.ParseTombstone(tt.marker)
			assert.Equal(t, tt.ok, ok)
			assert.Equal(t, tt.wantClaim, claim)
			if ok {
				assert.True(t, when.Equal(at))
			}
		})
	}
	assert.True(t, backends.IsTombstoneOf(tomb, "uid/ns/claim"))
	assert.False(t, backends.IsTombstoneOf(tomb, "uid/ns/other"))
	assert.False(t, backends.IsTombstoneOf("uid/ns/claim", "uid/ns/claim"), "a live marker is no tombstone")
	assert.False(t, backends.SameClaim(tomb, backends.Claim{Namespace: "ns", Name: "claim"}), "a tombstone never names a claim")
}

func TestParseMarker(t *testing.T) {
	for _, tt := range []struct {
		identity, marker string
		ns, name         string
		ok               bool
	}{
		{"uid", "uid/ns/claim", "ns", "claim", true},
		{"uid", "other/ns/claim", "", "", false},
		{"uid", "ns/claim", "", "", false},
		{"uid", "uid/ns/claim@released=2026-11-23T16:04:05Z", "", "", false},
		{"uid", "uid/ns", "", "", false},
		{"uid", "uid/ns/a/b", "", "", false},
		{"", "ns/claim", "", "", false},
	} {
		t.Run(tt.marker, func(t *testing.T) {
			ns, name, ok := backends.ParseMarker(tt.identity, tt.marker)
			assert.Equal(t, tt.ok, ok)
			assert.Equal(t, tt.ns, ns)
			assert.Equal(t, tt.name, name)
		})
	}
}

func TestPlannedMarker(t *testing.T) {
	for _, tc := range []struct {
		value   string
		marker  string
		planned bool
	}{
		{value: backends.PlannedMarker("id/ns/a"), marker: "id/ns/a", planned: true},
		{value: "id/ns/a", marker: "id/ns/a"},
		{value: "", marker: ""},
		{value: "#planned", marker: "#planned"},
		{value: "id/ns/a#plannedx", marker: "id/ns/a#plannedx"},
	} {
		t.Run(tc.value, func(t *testing.T) {
			marker, planned := backends.ParsePlanned(tc.value)
			assert.Equal(t, tc.marker, marker)
			assert.Equal(t, tc.planned, planned)
		})
	}
}
