package infoblox_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends"
)

// TestWriteMAC: a fixed address reserved without a MAC gets the machine's
// MAC, matched by MAC, once; one that carries a MAC keeps it; a record no
// longer the claim's, gone, or not matched by MAC is not written; a MAC
// another fixed address holds is refused with its holder named.
func TestWriteMAC(t *testing.T) {
	const mac = "00:50:56:aa:bb:01"
	tests := []struct {
		name string
		// prepare reserves what the test needs and returns the record to
		// write and the marker to write it under.
		prepare     func(t *testing.T, b backendWithWriter) backends.Record
		wantErr     error
		wantCarried string
		// wantMAC and wantMatch are the fixed address's afterwards.
		wantMAC, wantMatch string
	}{
		{name: "reserved without a MAC", wantCarried: mac, wantMAC: mac, wantMatch: "MAC_ADDRESS",
			prepare: func(t *testing.T, b backendWithWriter) backends.Record { return allocated(t, b, claim("m0")) }},
		{name: "a MAC already there is kept", wantCarried: "52:54:00:aa:bb:99", wantMAC: "52:54:00:aa:bb:99", wantMatch: "MAC_ADDRESS",
			prepare: func(t *testing.T, b backendWithWriter) backends.Record {
				return allocated(t, b, withMAC("m0", "52:54:00:aa:bb:99"))
			}},
		{name: "another marker", wantErr: backends.ErrNotOwned, wantMatch: "RESERVED",
			prepare: func(t *testing.T, b backendWithWriter) backends.Record {
				rec := allocated(t, b, claim("m0"))
				rec.Marker = "ns/other"
				return rec
			}},
		{name: "gone", wantErr: backends.ErrNotFound,
			prepare: func(t *testing.T, b backendWithWriter) backends.Record {
				rec := allocated(t, b, claim("m0"))
				require.NoError(t, b.Delete(context.Background(), rec))
				return rec
			}},
		{name: "another fixed address holds the MAC", wantErr: backends.ErrMACAddressInUse, wantMatch: "RESERVED",
			prepare: func(t *testing.T, b backendWithWriter) backends.Record {
				allocated(t, b, withMAC("holder", mac))
				return allocated(t, b, claim("m0"))
			}},
		{name: "a host record", wantErr: backends.ErrNoMACMatch,
			prepare: func(t *testing.T, _ backendWithWriter) backends.Record {
				return backends.Record{Reference: "record:host/ZG5z:m0.example.com/default", Marker: "ns/m0"}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sim := newSim(t, "10.0.0.0/24")
			b, ok := newBackend(t, config(sim, "10.0.0.0/24")).(backendWithWriter)
			require.True(t, ok, "an Infoblox backend writes MACs")
			rec := tt.prepare(t, b)
			carried, err := b.WriteMAC(context.Background(), rec, mac)
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
			} else {
				require.NoError(t, err)
				assert.Equal(t, tt.wantCarried, carried)
			}
			if tt.wantMatch == "" {
				return
			}
			objs := markedWith(sim, "fixedaddress", "ns/m0")
			require.Len(t, objs, 1)
			assert.Equal(t, tt.wantMatch, objs[0].MatchClient)
			if tt.wantMAC != "" {
				assert.Equal(t, tt.wantMAC, objs[0].MAC)
			}
		})
	}
}

// allocated reserves a fixed address for the claim and returns its record.
func allocated(t *testing.T, b backendWithWriter, c backends.Claim) backends.Record {
	t.Helper()
	alloc, err := b.Allocate(context.Background(), c)
	require.NoError(t, err)
	return backends.Record{Address: alloc.Address, Reference: alloc.Reference, Marker: c.Marker}
}

type backendWithWriter interface {
	backends.Backend
	backends.MACWriter
}
