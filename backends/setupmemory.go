package backends

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"time"

	"github.com/hashicorp/golang-lru/v2/expirable"
	"golang.org/x/sync/singleflight"
)

// SetupMemory remembers for a while what an IPAM system confirmed of a
// pool's setup (the provider's tag, marker field or attribute, the extra
// fields a pool writes): a fleet of pools on one system (a roll-out of
// ClusterSubnets makes two each; a restarted manager validates every pool
// at once) checks it once, not once a pool, and pools that check it at the
// same moment share one check. Only a confirmation is remembered: a failed
// check is asked again at the next validation. A definition the IPAM team
// deletes meanwhile fails the writes that name it, and the first
// validation after SetupMemoryTime says so.
type SetupMemory[V any] struct {
	confirmed *expirable.LRU[string, V]
	checking  singleflight.Group
}

// SetupMemoryTime is how long a confirmed setup is remembered.
const SetupMemoryTime = time.Minute

// NewSetupMemory returns an empty memory.
func NewSetupMemory[V any]() *SetupMemory[V] {
	return &SetupMemory[V]{confirmed: NewMemory[string, V](1024, SetupMemoryTime)}
}

// NewMemory returns a memory of up to size entries, each kept for ttl, that
// ForgetConfirmedSetups forgets with the confirmed setups: what a driver
// learnt of a system's setup outside a SetupMemory. Call it when a package
// is initialised: the list of memories to forget is not locked.
func NewMemory[K comparable, V any](size int, ttl time.Duration) *expirable.LRU[K, V] {
	m := expirable.NewLRU[K, V](size, nil, ttl)
	memories = append(memories, m.Purge)
	return m
}

// Confirm returns what was confirmed under key, or runs check (once for
// every caller waiting on the same key) and remembers its answer if it
// confirmed. The check runs on ctx's values without its cancellation, so
// that a caller that gives up fails only itself.
func (m *SetupMemory[V]) Confirm(ctx context.Context, key string, check func(context.Context) (V, error)) (V, error) {
	if v, ok := m.confirmed.Get(key); ok {
		return v, nil
	}
	answer := m.checking.DoChan(key, func() (any, error) {
		if v, ok := m.confirmed.Get(key); ok {
			// Confirmed by a check that ended since the look above.
			return v, nil
		}
		v, err := check(context.WithoutCancel(ctx))
		if err == nil {
			m.confirmed.Add(key, v)
		}
		return v, err
	})
	select {
	case <-ctx.Done():
		var zero V
		return zero, ctx.Err()
	case r := <-answer:
		confirmed, _ := r.Val.(V)
		return confirmed, r.Err
	}
}

// memories purges every SetupMemory and NewMemory (ForgetConfirmedSetups).
var memories []func()

// ForgetConfirmedSetups forgets every confirmed setup. A test that starts
// a fresh simulator, which may listen where an earlier one did, calls it:
// to the memory, one address is one system.
func ForgetConfirmedSetups() {
	for _, purge := range memories {
		purge()
	}
}

// SetupKey names a setup by everything it depends on, credentials
// included, without holding any of them: a hash of parts.
func SetupKey(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}
