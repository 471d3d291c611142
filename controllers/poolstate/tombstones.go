package poolstate

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// Tombstones remembers, per pool, the earliest end of a grace period that a
// release in this process started, so that the audit deletes the tombstone
// on time. After a restart the pool's status.audit.nextTombstoneExpiry and
// the periodic audit cover it.
type Tombstones struct {
	mu       sync.Mutex
	expiries map[types.UID]time.Time
}

// Add notes a tombstone of the pool that expires at expiry.
func (t *Tombstones) Add(pool types.UID, expiry time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.expiries == nil {
		t.expiries = map[types.UID]time.Time{}
	}
	if cur, ok := t.expiries[pool]; !ok || expiry.Before(cur) {
		t.expiries[pool] = expiry
	}
}

func (t *Tombstones) Next(pool types.UID) (time.Time, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	at, ok := t.expiries[pool]
	return at, ok
}

// ForgetUntil forgets the pool's expiry if it is not after at: an audit
// that started at at saw that tombstone. A later one came from a release
// during the audit and is kept.
func (t *Tombstones) ForgetUntil(pool types.UID, at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if next, ok := t.expiries[pool]; ok && !next.After(at) {
		delete(t.expiries, pool)
	}
}
