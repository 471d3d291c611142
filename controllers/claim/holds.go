package claim

import (
	"maps"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// holds keeps a claim's next reservation back after one was refused, until
// the claim's wait has passed or an event that may end the wait wakes the
// claim (release). Whatever else brings the claim back meanwhile (its own
// status write, an error retried by the controller, whose backoff the
// reconcile that starts a reservation resets) must not start another
// reservation at once: the IPAM system would be asked the same question as
// fast as it answers.
type holds struct {
	clock  clock.PassiveClock
	mu     sync.Mutex
	claims map[types.NamespacedName]hold
}

func newHolds(c clock.PassiveClock) *holds {
	return &holds{clock: c, claims: map[types.NamespacedName]hold{}}
}

// hold holds the claim back for d.
func (h *holds) hold(claim *ipamv1.IPAddressClaim, d time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.claims[client.ObjectKeyFromObject(claim)] = hold{until: h.clock.Now().Add(d),
		generation: claim.Generation, annotations: maps.Clone(claim.Annotations)}
}

// remaining is how long the claim is still held back; 0 once it may try
// again.
func (h *holds) remaining(claim *ipamv1.IPAddressClaim) time.Duration {
	key := client.ObjectKeyFromObject(claim)
	h.mu.Lock()
	defer h.mu.Unlock()
	held, ok := h.claims[key]
	if !ok {
		return 0
	}
	wait := held.until.Sub(h.clock.Now())
	if wait > 0 && held.generation == claim.Generation && maps.Equal(held.annotations, claim.Annotations) {
		return wait
	}
	delete(h.claims, key)
	return 0
}

// release ends the claim's hold: an event may have ended what it waits
// for, or it no longer waits.
func (h *holds) release(key types.NamespacedName) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.claims, key)
}

// hold is a claim held back.
type hold struct {
	until time.Time
	// The claim's generation and annotations when it was held: a change of
	// either (a corrected request) ends the hold.
	generation  int64
	annotations map[string]string
}
