package poolstate

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// InFlight counts, per pool, the allocations that may still write an
// IPAddress, and closes a pool being deleted to new ones. The claim and pool
// reconcilers share it within one manager (one leader at a time), so a
// deleted pool is let go only when no allocation from it can still land:
// either the claim reconciler started its allocation first, and the pool
// waits for it, or the pool closed first, and the allocation is refused.
// Being in memory, the handshake costs no request to the API server, however
// stale either reconciler's cache is.
type InFlight struct {
	mu     sync.Mutex
	n      map[types.UID]int
	closed map[types.UID]bool
}

// Start records an allocation from the pool; the returned func ends it. It
// returns ok false, and records nothing, if the pool was closed.
func (f *InFlight) Start(pool types.UID) (done func(), ok bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed[pool] {
		return func() {}, false
	}
	if f.n == nil {
		f.n = map[types.UID]int{}
	}
	f.n[pool]++
	return func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.n[pool]--; f.n[pool] <= 0 {
			delete(f.n, pool)
		}
	}, true
}

// Close refuses new allocations from a pool being deleted and returns how
// many are still under way. A deletion is never undone and a UID never
// comes back, so a pool stays closed for the manager's life (a few bytes per
// deleted pool): a claim reconcile that read the pool before its deletion
// may call start however late.
func (f *InFlight) Close(pool types.UID) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed == nil {
		f.closed = map[types.UID]bool{}
	}
	f.closed[pool] = true
	return f.n[pool]
}
