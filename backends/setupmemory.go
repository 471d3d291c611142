package backends

import (
	"crypto/sha256"
	"encoding/hex"
	"time"

	"github.com/hashicorp/golang-lru/v2/expirable"
)

// SetupMemory remembers for a while what an IPAM system confirmed of a
// pool's setup (the provider's tag, marker field or attribute, the extra
// fields a pool writes): a fleet of pools on one system (a roll-out of
// ClusterSubnets makes two each; a restarted manager validates every pool
// at once) checks it once, not once a pool. Only a confirmation is
// remembered: a failed check is asked again at the next validation. A
// definition the IPAM team deletes meanwhile fails the writes that name
// it, and the first validation after SetupMemoryTime says so.
type SetupMemory[V any] struct {
	confirmed *expirable.LRU[string, V]
}

// SetupMemoryTime is how long a confirmed setup is remembered.
const SetupMemoryTime = time.Minute

// NewSetupMemory returns an empty memory.
func NewSetupMemory[V any]() *SetupMemory[V] {
	return &SetupMemory[V]{confirmed: expirable.NewLRU[string, V](1024, nil, SetupMemoryTime)}
}

// Get returns what was confirmed under key, if it still is remembered.
func (m *SetupMemory[V]) Get(key string) (V, bool) { return m.confirmed.Get(key) }

// Confirmed remembers v under key.
func (m *SetupMemory[V]) Confirmed(key string, v V) { m.confirmed.Add(key, v) }

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
