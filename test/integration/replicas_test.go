package integration

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
)

// duplicatesReleased bounds how long a second writer's reservation may
// outlive its lost IPAddress; the audit, which would also remove it,
// runs every ten minutes.
const duplicatesReleased = 15 * time.Second

// TestTwoManagersLeaveOneRecordPerClaim: two managers reconcile the same
// claims, as two replicas started without leader election do. Both may
// reserve for a claim at once; the one whose IPAddress create loses
// releases its reservation at once, so every claim is left with exactly
// one record, at its IPAddress's address.
func TestTwoManagersLeaveOneRecordPerClaim(t *testing.T) {
	forEachSystem(t, func(t *testing.T, f *fixture) {
		f.filter = "replicas-" + f.ns
		for range 2 {
			_, err := startManager(f.ctx, f.filter, "", nil)
			require.NoError(t, err)
		}
		f.seedNetwork("10.143.0.0/24")
		pool := f.createPool("replicas", "10.143.0.0/24")
		f.waitPoolReady(pool)

		claims := f.createClaimsAtOnce(20, pool.GetName())
		bound := map[string]string{}
		for _, c := range claims {
			bound[f.marker(c.Name)] = f.waitBound(c).Spec.Address
		}
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			records := f.markedRecords()
			assert.Len(c, records, len(claims), "one record per claim")
			for _, r := range records {
				want, ok := bound[r.Marker]
				if assert.True(c, ok, "record %s carries the marker %q of no claim", r.Address, r.Marker) {
					assert.Equal(c, want, r.Address.Addr().String(), "the record of %s is not at its IPAddress's address", r.Marker)
				}
			}
		}, duplicatesReleased, pollInterval)
		// And the claims stay bound to those addresses.
		for _, c := range claims {
			address := &ipamv1.IPAddress{}
			require.NoError(t, k8s.Get(f.ctx, client.ObjectKeyFromObject(c), address))
			assert.Equal(t, bound[f.marker(c.Name)], address.Spec.Address)
		}
	})
}
