package claim

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/api/v1alpha1"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/reasons"
)

// A held claim asks again only once its wait is over, its request changed,
// or an event released it.
func TestHoldsEndWithTheWaitAChangedRequestOrAnEvent(t *testing.T) {
	for _, tc := range []struct {
		name string
		// then happens after the claim is held for a minute; it says
		// whether the hold is over.
		then func(h *holds, c *clocktesting.FakePassiveClock, claim *ipamv1.IPAddressClaim)
		over bool
	}{
		{name: "nothing", then: func(*holds, *clocktesting.FakePassiveClock, *ipamv1.IPAddressClaim) {}},
		{name: "the wait passes", over: true,
			then: func(_ *holds, c *clocktesting.FakePassiveClock, _ *ipamv1.IPAddressClaim) {
				c.SetTime(c.Now().Add(time.Minute))
			}},
		{name: "most of the wait passes",
			then: func(_ *holds, c *clocktesting.FakePassiveClock, _ *ipamv1.IPAddressClaim) {
				c.SetTime(c.Now().Add(time.Minute - time.Second))
			}},
		{name: "the request is corrected", over: true,
			then: func(_ *holds, _ *clocktesting.FakePassiveClock, claim *ipamv1.IPAddressClaim) {
				claim.Annotations[v1alpha1.RequestedAddressAnnotation] = "10.0.0.9"
			}},
		{name: "the spec changes", over: true,
			then: func(_ *holds, _ *clocktesting.FakePassiveClock, claim *ipamv1.IPAddressClaim) { claim.Generation++ }},
		{name: "the status changes",
			then: func(_ *holds, _ *clocktesting.FakePassiveClock, claim *ipamv1.IPAddressClaim) {
				setReady(claim, metav1.ConditionFalse, reasons.RequestedAddressUnavailableReason, "held")
			}},
		{name: "an event releases it", over: true,
			then: func(h *holds, _ *clocktesting.FakePassiveClock, claim *ipamv1.IPAddressClaim) {
				h.release(client.ObjectKeyFromObject(claim))
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := clocktesting.NewFakePassiveClock(time.Now())
			h := newHolds(c)
			claim := &ipamv1.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a", Generation: 1,
				Annotations: map[string]string{v1alpha1.RequestedAddressAnnotation: "10.0.0.8"}}}
			other := claim.DeepCopy()
			other.Name = "b"
			assert.Zero(t, h.remaining(claim), "not held")
			h.hold(claim, time.Minute)
			h.hold(other, time.Minute)
			assert.Equal(t, time.Minute, h.remaining(claim))
			start := c.Now()
			tc.then(h, c, claim)
			if tc.over {
				assert.Zero(t, h.remaining(claim))
			} else {
				assert.Positive(t, h.remaining(claim))
			}
			if c.Now().Equal(start) {
				assert.Positive(t, h.remaining(other), "another claim stays held")
			}
		})
	}
}
