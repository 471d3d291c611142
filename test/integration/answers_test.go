package integration

import (
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/api/v1alpha1"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/reasons"
)

// TestAnUnusableAnswerIsNeverBound: the IPAM team deletes the record that
// held a ready pool's gateway, so the IPAM system hands the gateway out as
// the next free address (a claim bound before keeps the pool's backend
// from validating afresh). The provider never binds it: the reservation is
// released, the claim and the pool say what the system answered, and the
// pool, validated at once, waits for the gateway to be held again. Then the
// claim gets the next address.
func TestAnUnusableAnswerIsNeverBound(t *testing.T) {
	forEachSystem(t, func(t *testing.T, f *fixture) {
		network := netip.MustParsePrefix("10.142.0.0/24")
		gateway := network.Addr().Next()
		f.seedNetwork(network.String())
		pool := f.createPool("answers", network.String())
		f.waitPoolReady(pool)

		// A claim bound first: the pool's backend is prepared and settled.
		first := f.waitBound(f.createClaim("m-0", pool.GetName()))
		require.Equal(t, gateway.Next().String(), first.Spec.Address)

		f.sys.deleteAt(gateway)
		claim := f.createClaim("m-1", pool.GetName())
		f.waitEvent(f.ns, claim.Name, reasons.UnusableAddressAnsweredReason)
		f.waitEvent(f.ns, pool.GetName(), reasons.UnusableAddressAnsweredReason)
		f.waitPoolReason(pool, metav1.ConditionFalse, v1alpha1.InvalidConfigurationReason)
		address := &ipamv1.IPAddress{}
		err := k8s.Get(f.ctx, client.ObjectKeyFromObject(claim), address)
		require.True(t, apierrors.IsNotFound(err), "the claim was bound to %s (%v)", address.Spec.Address, err)

		// The claim has seen the pool not ready. A reservation it started
		// before, still under way in the background, may hold the gateway
		// for a moment (and release it, as every unusable answer is): once
		// it has answered, nothing holds the gateway.
		f.waitClaimReason(claim, ipamv1.IPAddressClaimReadyPoolNotReadyReason)
		require.Eventually(t, func() bool { return !f.sys.holds(gateway) }, waitTimeout, pollInterval,
			"the reservation of the gateway was not released")
		f.sys.holdGateway(gateway)
		// A change of the pool validates it again before its sync period.
		f.update(pool, func() { pool.SetAnnotations(map[string]string{"touched": time.Now().String()}) })
		bound := f.waitBound(claim)
		assert.Equal(t, gateway.Next().Next().String(), bound.Spec.Address)
		assert.Equal(t, gateway.String(), bound.Spec.Gateway)
	})
}
