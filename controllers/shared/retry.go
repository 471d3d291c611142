package shared

import (
	"maps"
	"sync"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// DefaultMaxRetryInterval caps every wait of a claim or pool that no event is
// guaranteed to end: a claim is looked at again at least this often.
const DefaultMaxRetryInterval = 5 * time.Minute

// firstRetryInterval is the first wait of a claim that is not bound.
const FirstRetryInterval = time.Second

// waitBackoff hands out capped, per-object exponential waits for states that
// are expected (a pool that is not ready, a missing Cluster) and so are not
// reconcile errors. Forget resets an object once it no longer waits.
type WaitBackoff struct {
	limiter workqueue.TypedRateLimiter[types.NamespacedName]
}

func NewWaitBackoff(first, maxInterval time.Duration) *WaitBackoff {
	return &WaitBackoff{limiter: workqueue.NewTypedItemExponentialFailureRateLimiter[types.NamespacedName](
		first, maxInterval)}
}

// next is the wait before the object's next attempt; each call doubles it, up
// to the cap.
func (b *WaitBackoff) Next(key types.NamespacedName) time.Duration { return b.limiter.When(key) }

func (b *WaitBackoff) Forget(key types.NamespacedName) { b.limiter.Forget(key) }

// errorRateLimiter is controller-runtime's default rate limiter for failed
// reconciles with the per-object backoff capped at maxInterval instead of
// about 17 minutes, so that a failed release or allocation is retried at
// least that often.
func ErrorRateLimiter(maxInterval time.Duration) workqueue.TypedRateLimiter[reconcile.Request] {
	return workqueue.NewTypedMaxOfRateLimiter(
		workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](5*time.Millisecond, maxInterval),
		&workqueue.TypedBucketRateLimiter[reconcile.Request]{Limiter: rate.NewLimiter(rate.Limit(10), 100)},
	)
}

// holds keeps a claim's next reservation back after one was refused, until
// the claim's wait has passed or an event that may end the wait wakes the
// claim (release). Whatever else brings the claim back meanwhile (its own
// status write, an error retried by the controller, whose backoff the
// reconcile that starts a reservation resets) must not start another
// reservation at once: the IPAM system would be asked the same question as
// fast as it answers.
type Holds struct {
	clock  clock.PassiveClock
	mu     sync.Mutex
	claims map[types.NamespacedName]hold
}

// hold is a claim held back.
type hold struct {
	until time.Time
	// The claim's generation and annotations when it was held: a change of
	// either (a corrected request) ends the hold.
	generation  int64
	annotations map[string]string
}

func NewHolds(c clock.PassiveClock) *Holds {
	return &Holds{clock: c, claims: map[types.NamespacedName]hold{}}
}

// hold holds the claim back for d.
func (h *Holds) Hold(claim *ipamv1.IPAddressClaim, d time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.claims[client.ObjectKeyFromObject(claim)] = hold{until: h.clock.Now().Add(d),
		generation: claim.Generation, annotations: maps.Clone(claim.Annotations)}
}

// remaining is how long the claim is still held back; 0 once it may try
// again.
func (h *Holds) Remaining(claim *ipamv1.IPAddressClaim) time.Duration {
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
func (h *Holds) Release(key types.NamespacedName) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.claims, key)
}
