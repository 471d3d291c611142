package integration

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/api/v1alpha1"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/pkg/poolkind"
)

const (
	// refusalNoticed bounds how long a pool may say Ready after a claim's
	// request was refused; the suite validates pools only once a minute.
	refusalNoticed = 15 * time.Second
	// backoffGrowth is how long claims wait on a pool that is not ready
	// before the test looks for their next attempt: their backoff (1s, 2s,
	// 4s, ...) has then grown past newCredentialsNoticed.
	backoffGrowth = 20 * time.Second
	// newCredentialsNoticed bounds how long after a Secret update its
	// waiting claims bind (the target is 5 s).
	newCredentialsNoticed = 10 * time.Second
)

// TestCredentialsTakeEffectAtOnce: the IPAM team revokes the pool's
// credentials while the pool is idle. The first claim refused marks the
// pool AuthenticationFailed at once, not at its next validation. Rotated
// credentials wake the waiting claims at once, not at their next backoff.
// Read-only credentials pass the pool's validation but not a claim's
// reservation: the pool says PermissionDenied, and keeps saying it until
// the credentials change, instead of flapping back to ready.
func TestCredentialsTakeEffectAtOnce(t *testing.T) {
	forEachSystem(t, func(t *testing.T, f *fixture) {
		// A manager of the test's own, which notes when it reads claim m-0:
		// the claim's attempts, to know when its backoff would wake it.
		f.filter = "credentials-" + f.ns
		attempts := &attemptLog{}
		_, err := startManager(f.ctx, f.filter, "", func(c client.WithWatch) client.Client {
			return interceptor.NewClient(c, interceptor.Funcs{
				Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
					if _, ok := obj.(*ipamv1.IPAddressClaim); ok && key == (client.ObjectKey{Namespace: f.ns, Name: "m-0"}) {
						attempts.note(time.Now())
					}
					return c.Get(ctx, key, obj, opts...)
				},
			})
		})
		require.NoError(t, err)
		f.seedNetwork("10.141.0.0/24")
		pool := f.createPool("rotated", "10.141.0.0/24")
		f.waitPoolReady(pool)

		f.sys.revokeCredentials()
		claims := []*ipamv1.IPAddressClaim{f.createClaim("m-0", pool.GetName()), f.createClaim("m-1", pool.GetName())}
		f.waitPoolReasonWithin(pool, v1alpha1.AuthenticationFailedReason, refusalNoticed)
		f.waitEvent(f.ns, pool.GetName(), v1alpha1.AuthenticationFailedReason)
		for _, c := range claims {
			f.waitClaimReason(c, ipamv1.IPAddressClaimReadyPoolNotReadyReason)
		}

		// Rotate right after one of m-0's attempts, once the gap since the
		// one before has grown past newCredentialsNoticed: its backoff then
		// wakes it no sooner than that gap (it doubles), so a claim bound
		// within newCredentialsNoticed was woken by the rotation.
		time.Sleep(backoffGrowth)
		seen := attempts.count()
		require.Eventually(t, func() bool { return attempts.count() > seen }, 2*backoffGrowth, 10*time.Millisecond,
			"m-0 made no attempt while it waited")
		gap := attempts.lastGap()
		f.rotateSecret(f.sys.rotateCredentials())
		rotated := time.Now()
		require.Greater(t, gap, newCredentialsNoticed, "m-0's backoff had not grown past the bound: waking is not proven")
		for _, c := range claims {
			f.waitBoundWithin(c, newCredentialsNoticed)
		}
		t.Logf("%s: claims bound %s after the Secret update; m-0's backoff would have woken it %s after its last attempt",
			f.sys.name(), time.Since(rotated).Round(10*time.Millisecond), gap.Round(10*time.Millisecond))

		// Read-only credentials: the pool validates, the reservation is
		// refused, and the pool says why until the credentials change.
		f.rotateSecret(f.sys.readOnlyCredentials())
		late := f.createClaim("m-2", pool.GetName())
		f.waitPoolReasonWithin(pool, v1alpha1.PermissionDeniedReason, refusalNoticed)
		f.waitClaimReason(late, ipamv1.IPAddressClaimReadyPoolNotReadyReason)
		require.Never(t, func() bool {
			got := pool.DeepCopyObject().(poolkind.Pool)
			return k8s.Get(f.ctx, client.ObjectKeyFromObject(pool), got) == nil && conditions.IsTrue(got, v1alpha1.ReadyCondition)
		}, 5*time.Second, 200*time.Millisecond, "the pool flapped back to ready with credentials that may not write")

		f.rotateSecret(f.sys.rotateCredentials())
		f.waitBoundWithin(late, newCredentialsNoticed)
		f.waitPoolReady(pool)
	})
}

// attemptLog notes a claim's attempts: the reads of one attempt come
// within a moment of each other.
type attemptLog struct {
	mu    sync.Mutex
	times []time.Time
}

// sameAttempt is how close two reads are to belong to one attempt.
const sameAttempt = 500 * time.Millisecond

func (a *attemptLog) note(at time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if n := len(a.times); n > 0 && at.Sub(a.times[n-1]) < sameAttempt {
		a.times[n-1] = at
		return
	}
	a.times = append(a.times, at)
}

func (a *attemptLog) count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.times)
}

// lastGap is the time between the last two attempts.
func (a *attemptLog) lastGap() time.Duration {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.times) < 2 {
		return 0
	}
	return a.times[len(a.times)-1].Sub(a.times[len(a.times)-2])
}

// rotateSecret writes data into the fixture's credentials Secret.
func (f *fixture) rotateSecret(data map[string][]byte) {
	f.t.Helper()
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: f.secret}}
	f.update(secret, func() { secret.Data = data })
}

func (f *fixture) waitPoolReasonWithin(pool poolkind.Pool, reason string, within time.Duration) {
	f.t.Helper()
	require.EventuallyWithT(f.t, func(c *assert.CollectT) {
		got := pool.DeepCopyObject().(poolkind.Pool)
		require.NoError(c, k8s.Get(f.ctx, client.ObjectKeyFromObject(pool), got))
		cond := conditions.Get(got, v1alpha1.ReadyCondition)
		require.NotNil(c, cond)
		assert.Equal(c, reason, cond.Reason, cond.Message)
		assert.Equal(c, metav1.ConditionFalse, cond.Status)
	}, within, pollInterval)
}
