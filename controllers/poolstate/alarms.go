package poolstate

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/source"

	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/pkg/poolkind"
)

// Credentials take effect at once, in both directions:
//   - a claim whose request the IPAM system refuses as unauthenticated or
//     forbidden reports it to its pool, which says so at once
//     (AuthenticationFailed, PermissionDenied) instead of at its next
//     validation, and keeps saying so until its credentials or its spec
//     change;
//   - a changed Secret wakes the claims that wait on the pools reading it,
//     whatever their backoff, and the pools validate it (secretToPools).

// Alarms carries what claims meet to their pools' reconcilers:
// refused credentials, and answers that suggest the pool no longer holds
// (see Revalidate).
type Alarms struct {
	mu     sync.Mutex
	byPool map[types.UID]refusal
	// due holds when Revalidate asked, until the pool has validated.
	due  map[types.UID]time.Time
	wake poolWake
}

// refusal is the last refused request of a pool's claims, with the backend
// (pool spec and Secret version) that sent it.
type refusal struct {
	// backend is compared by identity only: the claim reconciler holds it
	// as a Reserver, the pool reconciler as a Prober.
	backend any
	err     error
	at      time.Time
}

// NewAlarms returns empty Alarms.
func NewAlarms() *Alarms {
	return &Alarms{byPool: map[types.UID]refusal{}, due: map[types.UID]time.Time{}}
}

// IsRefusal says whether err is the IPAM system refusing the credentials.
func IsRefusal(err error) bool {
	return errors.Is(err, backends.ErrUnauthorized) || errors.Is(err, backends.ErrForbidden)
}

// Refused records that backend's request for claim was refused with err and
// has the pool reconciled at once.
func (c *Alarms) Refused(kind poolkind.Kind, pool poolkind.Pool, backend backends.Reserver, claim *ipamv1.IPAddressClaim, err error) {
	c.mu.Lock()
	c.byPool[pool.GetUID()] = refusal{backend: backend, at: time.Now(),
		err: fmt.Errorf("the IPAM system refused the request of claim %s/%s: %w", claim.Namespace, claim.Name, err)}
	c.mu.Unlock()
	c.wake.notify(kind, pool)
}

// Revalidate has the pool validated at once: the IPAM system answered a
// claim with an address the pool may not give, which a pool whose gateway
// record was deleted, or whose prefix was resized, would. Until the pool has
// validated, its claims start no reservation (see Revalidating): the system
// would answer the same address again, and a reservation of the gateway
// under way would let the validation pass.
func (c *Alarms) Revalidate(kind poolkind.Kind, pool poolkind.Pool) {
	c.mu.Lock()
	c.due[pool.GetUID()] = time.Now()
	c.mu.Unlock()
	c.wake.notify(kind, pool)
}

// revalidationWait bounds how long claims wait for a validation that
// Revalidate asked for: a pool reconcile that never gets to validate (its
// backend cannot be built, say) makes the pool not ready instead.
const revalidationWait = time.Minute

// Revalidating says whether the pool has yet to validate as Revalidate
// asked.
func (c *Alarms) Revalidating(pool poolkind.Pool) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	at, ok := c.due[pool.GetUID()]
	return ok && time.Since(at) < revalidationWait
}

// RevalidationDue says whether Revalidate asked for the pool, and when.
func (c *Alarms) RevalidationDue(pool poolkind.Pool) (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	at, ok := c.due[pool.GetUID()]
	return at, ok
}

// Revalidated records that the pool validated after Revalidate asked at
// at; a request made since stays due.
func (c *Alarms) Revalidated(pool poolkind.Pool, at time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.due[pool.GetUID()].Equal(at) {
		delete(c.due, pool.GetUID())
	}
}

// Current returns the refusal that still applies to the pool with backend:
// one made with this very backend, within maxAge. A new backend (new
// credentials or spec) or an old refusal is forgotten, and the pool is
// validated as usual.
func (c *Alarms) Current(pool poolkind.Pool, backend backends.Prober, maxAge time.Duration) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	r, ok := c.byPool[pool.GetUID()]
	if !ok {
		return nil
	}
	if r.backend != any(backend) || time.Since(r.at) >= maxAge {
		delete(c.byPool, pool.GetUID())
		return nil
	}
	return r.err
}

// Forget drops a deleted pool's refusal.
func (c *Alarms) Forget(pool poolkind.Pool) {
	c.mu.Lock()
	delete(c.byPool, pool.GetUID())
	delete(c.due, pool.GetUID())
	c.mu.Unlock()
}

// Source is what the pool reconciler of kind watches for reports.
func (c *Alarms) Source(kind poolkind.Kind) source.Source { return c.wake.source(kind) }
