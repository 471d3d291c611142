package retry

import (
	"time"

	"golang.org/x/time/rate"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// DefaultMaxRetryInterval caps every wait of a claim or pool that no event is
// guaranteed to end: a claim is looked at again at least this often.
const DefaultMaxRetryInterval = 5 * time.Minute

// FirstRetryInterval is the first wait of a claim that is not bound.
const FirstRetryInterval = time.Second

// WaitBackoff hands out capped, per-object exponential waits for states that
// are expected (a pool that is not ready, a missing Cluster) and so are not
// reconcile errors. Forget resets an object once it no longer waits.
type WaitBackoff struct {
	limiter workqueue.TypedRateLimiter[types.NamespacedName]
}

func NewWaitBackoff(first, maxInterval time.Duration) *WaitBackoff {
	return &WaitBackoff{limiter: workqueue.NewTypedItemExponentialFailureRateLimiter[types.NamespacedName](
		first, maxInterval)}
}

// Next is the wait before the object's next attempt; each call doubles it, up
// to the cap.
func (b *WaitBackoff) Next(key types.NamespacedName) time.Duration { return b.limiter.When(key) }

func (b *WaitBackoff) Forget(key types.NamespacedName) { b.limiter.Forget(key) }

// ErrorRateLimiter is controller-runtime's default rate limiter for failed
// reconciles with the per-object backoff capped at maxInterval instead of
// about 17 minutes, so that a failed release or allocation is retried at
// least that often.
func ErrorRateLimiter(maxInterval time.Duration) workqueue.TypedRateLimiter[reconcile.Request] {
	return workqueue.NewTypedMaxOfRateLimiter(
		workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](5*time.Millisecond, maxInterval),
		&workqueue.TypedBucketRateLimiter[reconcile.Request]{Limiter: rate.NewLimiter(rate.Limit(10), 100)},
	)
}
