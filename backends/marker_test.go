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

func TestClaimHolds(t *testing.T) {
	const (
		here  = "mgmt-b/default/machine-0"
		moved = "mgmt-a/default/machine-0"
	)
	recordedHere := backends.Claim{Marker: here, Recorded: here, Namespace: "default", Name: "machine-0"}
	movedHere := backends.Claim{Marker: here, Recorded: moved, Namespace: "default", Name: "machine-0"}
	unrecorded := backends.Claim{Marker: here, Namespace: "default", Name: "machine-0"}
	for _, tc := range []struct {
		name   string
		claim  backends.Claim
		marker string
		want   bool
	}{
		{"its own marker", recordedHere, here, true},
		{"another management cluster's claim of the same name", recordedHere, moved, false},
		{"a UID identity of another cluster", recordedHere, "0b3c1e9e-5b0e-4a57-9d43-6c2f0e0c2d11/default/machine-0", false},
		{"the marker recorded before a clusterctl move", movedHere, moved, true},
		{"its own marker after a move", movedHere, here, true},
		{"a third cluster's claim of the same name after a move", movedHere, "mgmt-c/default/machine-0", false},
		{"from before identities, nothing recorded", unrecorded, "default/machine-0", true},
		{"from before identities, another marker recorded", movedHere, "default/machine-0", false},
		{"another identity, nothing recorded", unrecorded, moved, false},
		{"another claim", unrecorded, "mgmt-b/default/machine-01", false},
		{"another namespace", unrecorded, "other/machine-0", false},
		{"no marker", unrecorded, "", false},
		{"a tombstone of its own", unrecorded, backends.TombstoneMarker(here, time.Unix(0, 0)), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, tc.claim.Holds(tc.marker), tc.marker)
		})
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
	assert.False(t, backends.Claim{Marker: "uid/ns/claim", Namespace: "ns", Name: "claim"}.Holds(tomb), "a tombstone is no claim's")
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
