package backends

import (
	"context"
	"errors"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// deleteOnly is a Backend that records its Deletes; CheckAnswer calls no
// other method but Endpoint.
type deleteOnly struct {
	Backend
	deleted []Record
	err     error
}

func (d *deleteOnly) Endpoint() string { return "https://ipam.example.com" }

func (d *deleteOnly) Delete(_ context.Context, rec Record) error {
	d.deleted = append(d.deleted, rec)
	return d.err
}

func TestCheckAnswer(t *testing.T) {
	source := netip.MustParsePrefix("10.0.0.0/24")
	inSources := func(a netip.Addr) bool { return source.Contains(a) }
	claim := Claim{Marker: "mgmt/ns/m-0"}
	tests := []struct {
		name      string
		alloc     Allocation
		deleteErr error
		wantErr   string
	}{
		{name: "an address in the sources", alloc: Allocation{Address: netip.MustParsePrefix("10.0.0.7/24"), Gateway: netip.MustParseAddr("10.0.0.1"), Reference: "r7"}},
		{name: "no gateway", alloc: Allocation{Address: netip.MustParsePrefix("10.0.0.1/24"), Reference: "r1"}},
		{name: "the gateway", alloc: Allocation{Address: netip.MustParsePrefix("10.0.0.1/24"), Gateway: netip.MustParseAddr("10.0.0.1"), Reference: "r1"},
			wantErr: "https://ipam.example.com reserved 10.0.0.1/24 as r1, which is the gateway the pool gives its machines; it was released"},
		{name: "outside the sources", alloc: Allocation{Address: netip.MustParsePrefix("10.0.1.5/24"), Reference: "r5"},
			wantErr: "reserved 10.0.1.5/24 as r5, which lies in none of the pool's sources; it was released"},
		{name: "of the other family", alloc: Allocation{Address: netip.MustParsePrefix("2001:db8::5/64"), Reference: "r6"},
			wantErr: "which lies in none of the pool's sources"},
		{name: "a release that fails", alloc: Allocation{Address: netip.MustParsePrefix("10.0.1.5/24"), Reference: "r5"}, deleteErr: ErrUnavailable,
			wantErr: "releasing it failed: backend unavailable"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := &deleteOnly{err: tt.deleteErr}
			got, err := CheckAnswer(context.Background(), b, claim, tt.alloc, inSources)
			if tt.wantErr == "" {
				require.NoError(t, err)
				assert.Equal(t, tt.alloc, got)
				assert.Empty(t, b.deleted)
				return
			}
			require.Error(t, err)
			assert.True(t, errors.Is(err, ErrUnusableAnswer))
			assert.Contains(t, err.Error(), tt.wantErr)
			assert.Equal(t, Allocation{}, got)
			assert.Equal(t, []Record{{Address: tt.alloc.Address, Marker: claim.Marker, Reference: tt.alloc.Reference}}, b.deleted,
				"the reservation is released, and only while it carries the claim's marker")
		})
	}
}
