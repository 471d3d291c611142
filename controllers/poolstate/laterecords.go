package poolstate

import (
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/pkg/poolkind"
)

// DefaultLateRecordWindow is how long after it was sent a create may still
// be applied by default: NetBox's gunicorn kills a worker whose request runs
// longer than 120 s, and a request queued behind NetBox's allocation lock
// finishes even when its client gave up.
const DefaultLateRecordWindow = 2 * time.Minute

// LateRecords knows when records the IPAM systems may still make could
// land. A create whose answer was lost, or that took more than one attempt,
// may wait in the system after the provider looked for it (a server queues
// creates behind its lock and finishes those whose client gave up), and so
// may every create that a manager process sent before it died: its
// successor's marker search cannot see them. Such a record carries its
// claim's marker but lands after the claim was bound to another record: a
// duplicate. The audit therefore sweeps each pool every quarter of the
// window while such a create may land, and once more at its end, and drops
// the duplicates it finds at once instead of after the pool's minimum age.
type LateRecords struct {
	// Window is the longest a create may still be applied after it was
	// sent.
	Window time.Duration

	mu sync.Mutex
	// started is when this process started to act as the leader: every
	// create of its predecessor was sent before.
	started time.Time
	plans   map[types.UID]sweepPlan
	wake    poolWake
}

// sweepPlan is a pool's sweeps: the next is due at next (zero: none), the
// last at until, when the last create that may land has landed.
type sweepPlan struct{ next, until time.Time }

// clockSkew is how far apart the API server's clock, which stamps a pool's
// creation, and this process's may be.
const clockSkew = 10 * time.Second

// NewLateRecords returns the late records of a process that started to act
// at started, or, when started is zero, at its first look at a pool: the
// controllers look only once this process leads, and a standby replica
// may take the lead long after it started. A nil *LateRecords plans no
// sweeps.
func NewLateRecords(window time.Duration, started time.Time) *LateRecords {
	if window <= 0 {
		window = DefaultLateRecordWindow
	}
	return &LateRecords{Window: window, started: started, plans: map[types.UID]sweepPlan{}}
}

// plan is the pool's plan; the caller holds l.mu. A pool first seen
// starts with the creates of the process before this one, unless the API
// server created it after this process started to act: none of its claims
// was that process's.
func (l *LateRecords) plan(pool metav1.Object) sweepPlan {
	if l.started.IsZero() {
		l.started = time.Now()
	}
	p, ok := l.plans[pool.GetUID()]
	if !ok {
		if !pool.GetCreationTimestamp().After(l.started.Add(clockSkew)) {
			p = sweepPlan{next: l.started.Add(l.Window / 4), until: l.started.Add(l.Window)}
		}
		l.plans[pool.GetUID()] = p
	}
	return p
}

// Uncertain notes that a create of the pool's claims may still be applied
// until a window from now, and wakes the pool's audit when that brings its
// next sweep forward.
func (l *LateRecords) Uncertain(kind poolkind.Kind, pool poolkind.Pool) {
	if l == nil {
		return
	}
	now := time.Now()
	l.mu.Lock()
	p := l.plan(pool)
	sooner := p.next.IsZero() || p.next.After(now.Add(l.Window/4))
	if sooner {
		p.next = now.Add(l.Window / 4)
	}
	if now.Add(l.Window).After(p.until) {
		p.until = now.Add(l.Window)
	}
	l.plans[pool.GetUID()] = p
	l.mu.Unlock()
	if sooner {
		l.wake.notify(kind, pool)
	}
}

// Next is when the pool's next sweep is due.
func (l *LateRecords) Next(pool metav1.Object) (time.Time, bool) {
	if l == nil {
		return time.Time{}, false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	p := l.plan(pool)
	return p.next, !p.next.IsZero()
}

// Sweeping says whether an audit of the pool at now is a sweep: its next
// sweep is due.
func (l *LateRecords) Sweeping(pool metav1.Object, now time.Time) bool {
	next, ok := l.Next(pool)
	return ok && !next.After(now)
}

// Swept notes that an audit that started at at swept the pool: the next
// sweep is a quarter of the window later, or at the window's end, or none
// once that has passed.
func (l *LateRecords) Swept(pool metav1.Object, at time.Time) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	p := l.plan(pool)
	switch {
	case p.next.IsZero() || p.next.After(at):
		return
	case !at.Before(p.until):
		p.next = time.Time{}
	case at.Add(l.Window / 4).Before(p.until):
		p.next = at.Add(l.Window / 4)
	default:
		p.next = p.until
	}
	l.plans[pool.GetUID()] = p
}

// Forget drops a deleted pool.
func (l *LateRecords) Forget(pool types.UID) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.plans, pool)
}

// Source is what the audit of kind watches to learn of new sweeps.
func (l *LateRecords) Source(kind poolkind.Kind) source.Source { return l.wake.source(kind) }
