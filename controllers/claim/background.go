package claim

import (
	"context"
	"fmt"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/event"

	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
)

// answerMemory is how long a finished call's answer waits for its claim's
// next reconcile: one that goes elsewhere (a paused Cluster, a pool not
// ready) lets it go, and the claim's next call finds its record again by
// its marker.
const answerMemory = time.Minute

// maxBackgroundCalls bounds the calls of one kind under way at once: enough
// to fill several pools' batches of DefaultMaxBatchSize, few enough that a
// burst of 10,000 claims does not hold 10,000 goroutines in the batches.
const maxBackgroundCalls = 256

// busyRetry is when a claim refused for the limit looks again, should the
// end of a call not wake it.
const busyRetry = 10 * time.Second

// slowAnswer is how long a call runs before it wakes its claim to say that
// it still waits for the IPAM system: a slow or throttling system would
// otherwise leave the claim without a word for as long as it takes.
const slowAnswer = 10 * time.Second

// callState is where a claim's background call stands.
type callState int

const (
	// noCall: none is under way or waiting to be taken.
	noCall callState = iota
	// callRunning: under way; its answer brings the claim back.
	callRunning
	// callDone: answered; the taker owns the answer.
	callDone
)

// backgroundCalls runs one call at a time per claim off the claim workers,
// so that a worker never waits in a backend's batch: the reconcile starts
// the call and returns, and the answer wakes the claim through a channel
// source, whose reconcile takes it. A burst so fills batches up to their
// size however few claim workers there are.
//
// Answers live in memory only. A restart loses them, and nothing with them:
// the claim's next call finds the record again by its marker, as it does
// after a lost answer. Safe for concurrent use.
type backgroundCalls[T any] struct {
	// lifetime ends the calls' waits when the manager stops.
	lifetime context.Context
	wake     chan event.GenericEvent
	// memory is how long an answer waits to be taken (answerMemory).
	memory time.Duration
	// limit is how many calls run at once (maxBackgroundCalls); each
	// waits in its batch with a goroutine and its stack.
	limit int
	// slowAfter is when a call still running wakes its claim once
	// (slowAnswer).
	slowAfter time.Duration

	mu      sync.Mutex
	calls   map[types.NamespacedName]*backgroundCall[T]
	running int
	// waiting are the claims refused for the limit, woken in turn as
	// calls end.
	waiting    []types.NamespacedName
	waitingSet map[types.NamespacedName]bool
}

// backgroundCall is one claim's call.
type backgroundCall[T any] struct {
	uid   types.UID
	done  bool
	value T
	err   error
	// forgotten: the claim let the call go while it ran; its answer is
	// dropped when it comes.
	forgotten bool
	// release frees what the call holds (an in-flight count), once.
	release func()
	once    sync.Once
	// slowAt is when the call counts as slow (see Slow).
	slowAt time.Time
}

// Slow says whether the call has run for slowAnswer or longer: its claim
// was woken then, to say that it waits for the IPAM system.
func (c *backgroundCall[T]) Slow() bool { return !time.Now().Before(c.slowAt) }

func newBackgroundCalls[T any](lifetime context.Context, wake chan event.GenericEvent) *backgroundCalls[T] {
	return &backgroundCalls[T]{lifetime: lifetime, wake: wake, memory: answerMemory, limit: maxBackgroundCalls, slowAfter: slowAnswer,
		calls: map[types.NamespacedName]*backgroundCall[T]{}, waitingSet: map[types.NamespacedName]bool{}}
}

// Finish frees what the call holds; the taker of an answer calls it when
// done with it.
func (c *backgroundCall[T]) Finish() {
	c.once.Do(func() {
		if c.release != nil {
			c.release()
		}
	})
}

// take returns the claim's call and where it stands. A done call is the
// caller's from then on: it is forgotten here, and the caller must Finish
// it. A call of an earlier claim of the same name is let go.
func (b *backgroundCalls[T]) take(claim *ipamv1.IPAddressClaim) (*backgroundCall[T], callState) {
	key := types.NamespacedName{Namespace: claim.Namespace, Name: claim.Name}
	b.mu.Lock()
	defer b.mu.Unlock()
	call, ok := b.calls[key]
	switch {
	case !ok:
		return nil, noCall
	case call.uid != claim.UID:
		b.forgetLocked(key, call)
		if call.done {
			return nil, noCall
		}
		// The predecessor's call still runs; waiting for it keeps one call
		// per marker under way at a time.
		return nil, callRunning
	case !call.done:
		return call, callRunning
	}
	delete(b.calls, key)
	return call, callDone
}

// start runs fn in the background for the claim; release, when not nil,
// is called once its answer is taken and finished, or let go. The caller
// has checked that no call of the claim is under way (take). It returns
// false, and runs nothing, when limit calls are under way: the claim is
// woken when one ends, and should look again after busyRetry regardless.
func (b *backgroundCalls[T]) start(ctx context.Context, claim *ipamv1.IPAddressClaim, release func(), fn func(context.Context) (T, error)) bool {
	key := types.NamespacedName{Namespace: claim.Namespace, Name: claim.Name}
	call := &backgroundCall[T]{uid: claim.UID, release: release}
	b.mu.Lock()
	if b.limit > 0 && b.running >= b.limit {
		if !b.waitingSet[key] {
			b.waitingSet[key] = true
			b.waiting = append(b.waiting, key)
		}
		b.mu.Unlock()
		return false
	}
	b.running++
	call.slowAt = time.Now().Add(b.slowAfter)
	b.calls[key] = call
	b.mu.Unlock()
	// Most answers come sooner, and stop the timer: a burst costs no
	// reconcile more.
	slow := time.AfterFunc(b.slowAfter, func() { b.wakeClaim(key) })
	// The reconcile's values (its logger) go with the call; its end does
	// not, the manager's does.
	callCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(b.lifetime, cancel)
	go func() {
		defer cancel()
		defer stop()
		value, err := fn(callCtx)
		slow.Stop()
		b.mu.Lock()
		b.running--
		woken := b.nextWaitingLocked()
		call.value, call.err, call.done = value, err, true
		if call.forgotten {
			if b.calls[key] == call {
				delete(b.calls, key)
			}
			call.Finish()
		} else {
			time.AfterFunc(b.memory, func() { b.expire(key, call) })
		}
		b.mu.Unlock()
		for _, k := range append(woken, key) {
			if !b.wakeClaim(k) {
				return
			}
		}
	}()
	return true
}

// wakeClaim brings the claim back to the claim reconciler; false once the
// manager stops.
func (b *backgroundCalls[T]) wakeClaim(key types.NamespacedName) bool {
	obj := &ipamv1.IPAddressClaim{}
	obj.Namespace, obj.Name = key.Namespace, key.Name
	select {
	case b.wake <- event.GenericEvent{Object: obj}:
		return true
	case <-b.lifetime.Done():
		return false
	}
}

// nextWaitingLocked takes the claims refused for the limit that the free
// calls can now run: one per free call, so that a woken claim that starts
// nothing (gone meanwhile) leaves its turn to the next.
func (b *backgroundCalls[T]) nextWaitingLocked() []types.NamespacedName {
	n := min(len(b.waiting), b.limit-b.running)
	if n <= 0 {
		return nil
	}
	woken := b.waiting[:n:n]
	b.waiting = append([]types.NamespacedName(nil), b.waiting[n:]...)
	for _, k := range woken {
		delete(b.waitingSet, k)
	}
	return woken
}

// forget lets the claim's call go: a done one at once, a running one when
// it ends. Another call of the claim may start only once it has ended.
func (b *backgroundCalls[T]) forget(key types.NamespacedName) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if call, ok := b.calls[key]; ok {
		b.forgetLocked(key, call)
	}
}

func (b *backgroundCalls[T]) forgetLocked(key types.NamespacedName, call *backgroundCall[T]) {
	if call.done {
		delete(b.calls, key)
		call.Finish()
		return
	}
	call.forgotten = true
	// Kept until it ends, so that take reports it running.
	call.uid = ""
}

// expire lets an answer go that no reconcile took in time.
func (b *backgroundCalls[T]) expire(key types.NamespacedName, call *backgroundCall[T]) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.calls[key] == call {
		delete(b.calls, key)
		call.Finish()
	}
}

// waitingForAnswer says on the claim that its reservation or release has
// waited slowAnswer for the IPAM system, which is slow or throttling: the
// answer still brings the claim back. Not an event: nothing is wrong yet.
func waitingForAnswer(s *scope, reason string, what string) {
	s.setReady(metav1.ConditionFalse, reason, fmt.Sprintf(
		"the IPAM system of %s %s has not answered the claim's %s for %s: it is slow or throttling (see the pool's conditions and the metrics capi_ipam_bridge_backend_*); the claim goes on once it answers",
		s.kind.Kind, s.pool.GetName(), what, slowAnswer))
}
