package controllers

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// InFlight counts, per pool, the allocations that may still write an
// IPAddress. The claim and pool reconcilers share it within one manager (one
// leader at a time), so a deleted pool is let go only when no allocation from
// it can still land.
type InFlight struct {
	mu sync.Mutex
	n  map[types.UID]int
}

// start records an allocation from the pool; the returned func ends it.
func (f *InFlight) start(pool types.UID) (done func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
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
	}
}

// count is the number of allocations from the pool under way.
func (f *InFlight) count(pool types.UID) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.n[pool]
}
