package claim

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/cache"

	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/internal/apitest"
)

func TestCacheBehindUntilWhatTheManagerWroteIsSeen(t *testing.T) {
	_, c := apitest.Server(t)
	ctx := context.Background()
	ns := apitest.Namespace(t, c)
	for _, tc := range []struct {
		name, claim string
		// remembered is what written holds for the claim: nothing, false
		// (its IPAddress was created) or true (its bound status was
		// written too).
		remembered any
		// addressRef: the claim as read is bound; address: its IPAddress
		// exists.
		addressRef, address bool
		want                bool
	}{
		{name: "not remembered", claim: "unknown", want: false},
		{name: "status written, the claim read without addressRef", claim: "status-unseen", remembered: true, address: true, want: true},
		{name: "status seen, IPAddress missing", claim: "address-unseen", remembered: true, addressRef: true, want: true},
		{name: "IPAddress created, missing", claim: "created-unseen", remembered: false, want: true},
		{name: "status and IPAddress seen", claim: "seen", remembered: true, addressRef: true, address: true, want: false},
		{name: "IPAddress created and seen", claim: "created-seen", remembered: false, address: true, want: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			claim := apitest.CreateClaim(t, c, ns, tc.claim)
			if tc.address {
				apitest.CreateAddress(t, c, claim, "10.0.0.7", nil)
			}
			if tc.addressRef {
				claim.Status.AddressRef = ipamv1.IPAddressReference{Name: claim.Name}
			}
			r := &ClaimReconciler{Client: c, written: cache.NewExpiring()}
			if tc.remembered != nil {
				r.written.Set(claim.UID, tc.remembered, writtenMemory)
			}
			// Another claim's memory says nothing of this one.
			r.written.Set("another-claim", true, writtenMemory)

			behind, err := r.cacheBehind(ctx, claim)
			require.NoError(t, err)
			assert.Equal(t, tc.want, behind)
			_, stillThere := r.written.Get(claim.UID)
			assert.Equal(t, tc.remembered != nil, stillThere, "cacheBehind only reads the memory")
		})
	}
}
