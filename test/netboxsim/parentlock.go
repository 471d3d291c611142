package netboxsim

import (
	"encoding/json"
	"strings"
	"sync"
	"time"
)

// allocationCost is what an allocation costs NetBox while it holds the
// parent's lock: a fixed part per request and a part per object created.
type allocationCost struct {
	perRequest, perObject time.Duration
}

// SetAllocationCost makes every available-ips POST hold its prefix's or
// range's lock for perRequest plus perObject for each object of its list, as
// NetBox's advisory lock on the parent does: allocations of one parent run
// one after another, allocations of different parents side by side. A list
// of objects pays the fixed part once, which is what makes batching pay.
func (s *Server) SetAllocationCost(perRequest, perObject time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.allocCost = allocationCost{perRequest: perRequest, perObject: perObject}
}

// parentLocks are the simulated advisory locks, one per available-ips URL.
type parentLocks struct {
	mu    sync.Mutex
	locks map[string]*sync.Mutex
}

func (p *parentLocks) get(path string) *sync.Mutex {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.locks == nil {
		p.locks = map[string]*sync.Mutex{}
	}
	l, ok := p.locks[path]
	if !ok {
		l = &sync.Mutex{}
		p.locks[path] = l
	}
	return l
}

// lockKey is the advisory lock an allocation takes: its parent's for
// available-ips, one for every parent for available-prefixes
// (ADVISORY_LOCK_KEYS['available-prefixes'] names no parent).
func lockKey(path string) string {
	if strings.HasSuffix(path, "/available-prefixes/") {
		return "available-prefixes"
	}
	return path
}

// holdParent takes the lock of the parent an allocation POST names and
// spends the allocation's cost under it; the caller unlocks when done. It
// returns false, unlocked, when the server closes meanwhile.
func (s *Server) holdParent(path string, body []byte) (unlock func(), ok bool) {
	s.mu.Lock()
	cost := s.allocCost
	s.mu.Unlock()
	if cost == (allocationCost{}) {
		return func() {}, true
	}
	objects := 1
	var list []json.RawMessage
	if json.Unmarshal(body, &list) == nil {
		objects = len(list)
	}
	l := s.parents.get(path)
	l.Lock()
	if !s.sleep(cost.perRequest + time.Duration(objects)*cost.perObject) {
		l.Unlock()
		return nil, false
	}
	return l.Unlock, true
}
