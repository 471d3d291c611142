package backends

import (
	"context"
	"sync"
	"time"
)

// DefaultMaxBatchSize is how many claims one batched request carries at most
// when a backend is given no size: enough to drain a burst of the claim
// workers, small enough for one request line and one transaction.
const DefaultMaxBatchSize = 50

// DefaultBatchWindow is the longest a batch waits for more calls after its
// first arrived, unless it is full: long enough that a burst arriving at the
// pace the API server writes claims fills batches, short beside the time a
// burst takes.
const DefaultBatchWindow = 500 * time.Millisecond

// DefaultBatchQuiet is how long a batch waits for one more call: a batch
// starts once no call arrived for this long, so a lone claim, or the last
// of a burst, is not kept for the whole window. Shorter, a claim worker
// busy writing the IPAddresses of the last batch's answers leaves gaps that
// cut batches short: with one worker, 50 ms made batches of 24 and 100 ms
// of 33 on the bench.
const DefaultBatchQuiet = 100 * time.Millisecond

// DefaultCarveWindow and DefaultCarveQuiet are the batch window and quiet
// of carving pools. A carve's request is the costliest a pool sends (NetBox
// builds each child under its server-wide lock), and a fleet's carves
// reach the pool in waves, each claim first writing its finalizer: with
// the addresses' 100 ms, the first wave went out alone, and 100 carves on
// the real NetBox took three or four requests where two lists of 50
// suffice. A lone carve waits 300 ms more, little beside the request
// itself.
const (
	DefaultCarveWindow = time.Second
	DefaultCarveQuiet  = 300 * time.Millisecond
)

// CarvingBatch is o with the carving window, and quiet unless o gives one,
// where o leaves the window to its default.
func CarvingBatch(o BatchOptions) BatchOptions {
	if o.Window <= 0 {
		o.Window = DefaultCarveWindow
		if o.Quiet <= 0 {
			o.Quiet = DefaultCarveQuiet
		}
	}
	return o
}

// Result is one call's answer in a batch.
type Result[Out any] struct {
	Value Out
	Err   error
}

// Batcher coalesces concurrent calls into batches run by one function, so
// that a backend pays one request where it would pay one per call. A batch
// starts when Max calls wait, when no call arrived for Quiet, or at the
// latest Window after its first call arrived; calls that arrive while a
// batch runs wait for the next one. One batch runs at a time (with Look,
// one batch's second stage): the IPAM systems serialise allocations
// anyway, and the queue that builds up meanwhile becomes the next batch.
// Each caller gets its own
// result, or its context's error if that ends first (the batch still runs:
// what it reserved for the caller is found again by its marker).
//
// Max <= 1 runs every call alone, at once. Safe for concurrent use.
type Batcher[In, Out any] struct {
	Max    int
	Window time.Duration
	// Quiet, when above zero and below Window, starts a batch once no call
	// arrived for this long.
	Quiet time.Duration
	// Observe, if set, is told the size of every batch run.
	Observe func(size int)
	// Run answers a batch: one result per input, in order. Its context
	// carries the first caller's values, never a caller's cancellation,
	// so one caller giving up cannot fail the others.
	Run func(ctx context.Context, ins []In) []Result[Out]
	// Look, when set, answers a batch in two stages instead of Run: Look
	// runs as soon as the batch is taken, while the batch before it may
	// still be in its second stage, and returns that stage, which runs once
	// the batch before it has finished. A backend looks up what its claims
	// already hold while the batch before creates: the IPAM system is not
	// left idle between two batches' creates, waiting for a search. At
	// most two batches are under way, one looking and one in its second
	// stage, and a batch that shares a Key with the one before it looks
	// only once that one has finished, so that it sees what that one made.
	// Look gets the same context as Run.
	Look func(ctx context.Context, ins []In) (rest func() []Result[Out])
	// Key names a call for Look's rule above; without it every two
	// batches are taken to share one.
	Key func(In) string

	mu      sync.Mutex
	queue   []*batchCall[In, Out]
	running bool
	full    chan struct{} // signalled when the queue reaches Max
	// arrived is signalled when a call arrives while the batcher runs: it
	// wakes a drain that waits for the last batch's second stage with an
	// empty queue, so that the new calls' batch looks at once.
	arrived chan struct{}
}

// stagedBatch is a batch answered by Look, under way.
type stagedBatch struct {
	keys map[string]bool
	// resting is closed when its second stage starts, that is once the
	// batch before it has finished; done when it has finished.
	resting, done chan struct{}
}

type batchCall[In, Out any] struct {
	ctx     context.Context
	in      In
	arrived time.Time
	done    chan Result[Out]
}

// Do runs in as part of a batch and returns its result.
func (b *Batcher[In, Out]) Do(ctx context.Context, in In) (Out, error) {
	if b.Max <= 1 {
		b.observe(1)
		r := b.Run(ctx, []In{in})[0]
		return r.Value, r.Err
	}
	call := &batchCall[In, Out]{ctx: ctx, in: in, arrived: time.Now(), done: make(chan Result[Out], 1)}
	b.mu.Lock()
	b.queue = append(b.queue, call)
	if b.full == nil {
		b.full = make(chan struct{}, 1)
		b.arrived = make(chan struct{}, 1)
	}
	if !b.running {
		b.running = true
		go b.drain()
	} else {
		signal(b.arrived)
		if len(b.queue) >= b.Max {
			signal(b.full)
		}
	}
	b.mu.Unlock()
	select {
	case r := <-call.done:
		return r.Value, r.Err
	case <-ctx.Done():
		var zero Out
		return zero, ctx.Err()
	}
}

// signal wakes whoever waits on c, unless a wake-up is already pending.
func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// drain runs batches until the queue is empty and no batch is under way.
func (b *Batcher[In, Out]) drain() {
	var last *stagedBatch
	for {
		if last != nil {
			// The next batch is taken once it may look, when last is in its
			// second stage: the calls that arrive until then join it.
			<-last.resting
		}
		if batch := b.next(); batch != nil {
			last = b.run(batch, last)
			continue
		}
		if last != nil {
			// The last batch's second stage still runs: calls arriving
			// meanwhile make the next batch, which looks at once.
			select {
			case <-last.done:
				last = nil
			case <-b.arrived:
			}
			continue
		}
		b.mu.Lock()
		if len(b.queue) == 0 {
			b.running = false
			b.mu.Unlock()
			return
		}
		b.mu.Unlock()
	}
}

// next waits until the queue is full, quiet, or its first call's window has
// passed, and takes a batch from it; nil when the queue is empty.
func (b *Batcher[In, Out]) next() []*batchCall[In, Out] {
	b.mu.Lock()
	for len(b.queue) > 0 && len(b.queue) < b.Max {
		wait := time.Until(b.due())
		if wait <= 0 {
			break
		}
		b.mu.Unlock()
		timer := time.NewTimer(wait)
		select {
		case <-timer.C:
		case <-b.full:
			timer.Stop()
		}
		b.mu.Lock()
	}
	defer b.mu.Unlock()
	// A stale signal from a queue that filled during the last batch.
	select {
	case <-b.full:
	default:
	}
	n := min(len(b.queue), b.Max)
	if n == 0 {
		return nil
	}
	batch := b.queue[:n:n]
	b.queue = append([]*batchCall[In, Out](nil), b.queue[n:]...)
	return batch
}

// due is when the waiting batch starts unless it fills first: Window after
// its first call, or Quiet after its last, whichever is sooner. Called with
// mu held and a queue that is not empty.
func (b *Batcher[In, Out]) due() time.Time {
	due := b.queue[0].arrived.Add(b.Window)
	if b.Quiet > 0 {
		if quiet := b.queue[len(b.queue)-1].arrived.Add(b.Quiet); quiet.Before(due) {
			due = quiet
		}
	}
	return due
}

// run answers the calls of a batch whose callers still wait, after last,
// the batch before it if Look answers it; it returns the batch under way,
// if any.
func (b *Batcher[In, Out]) run(batch []*batchCall[In, Out], last *stagedBatch) *stagedBatch {
	live := batch[:0:0]
	for _, c := range batch {
		if err := c.ctx.Err(); err != nil {
			c.done <- Result[Out]{Err: err}
			continue
		}
		live = append(live, c)
	}
	if len(live) == 0 {
		return last
	}
	ins := make([]In, len(live))
	for i, c := range live {
		ins[i] = c.in
	}
	b.observe(len(ins))
	ctx := context.WithoutCancel(live[0].ctx)
	if b.Look == nil {
		answer(live, b.Run(ctx, ins))
		return nil
	}
	return b.runStaged(ctx, live, ins, last)
}

// runStaged looks at a batch now and leaves its second stage to run after
// last's (see Look).
func (b *Batcher[In, Out]) runStaged(ctx context.Context, live []*batchCall[In, Out], ins []In, last *stagedBatch) *stagedBatch {
	this := &stagedBatch{keys: map[string]bool{}, resting: make(chan struct{}), done: make(chan struct{})}
	shares := b.Key == nil
	for _, in := range ins {
		if b.Key != nil {
			k := b.Key(in)
			this.keys[k] = true
			shares = shares || last != nil && last.keys[k]
		}
	}
	if last != nil {
		// Two batches under way at most: last is in its second stage.
		<-last.resting
		if shares {
			<-last.done
		}
	}
	rest := b.Look(ctx, ins)
	go func() {
		defer close(this.done)
		if last != nil {
			<-last.done
		}
		close(this.resting)
		answer(live, rest())
	}()
	return this
}

// answer hands each call its result.
func answer[In, Out any](calls []*batchCall[In, Out], results []Result[Out]) {
	for i, c := range calls {
		c.done <- results[i]
	}
}

func (b *Batcher[In, Out]) observe(size int) {
	if b.Observe != nil {
		b.Observe(size)
	}
}

// BatchOptions bound the batches a backend sends.
type BatchOptions struct {
	// MaxSize is how many calls one batch carries at most: 0 is
	// DefaultMaxBatchSize, 1 turns batching off.
	MaxSize int
	// Window is the longest a batch waits for more calls after its first;
	// 0 is DefaultBatchWindow.
	Window time.Duration
	// Quiet starts a batch once no call arrived for this long. 0 is
	// DefaultBatchQuiet with the default window, and no quiet rule with a
	// window given: the batch then waits the whole window unless it fills.
	Quiet time.Duration
	// Observe, if set, is told the size of every batch, by operation
	// (allocate, release).
	Observe func(operation string, size int)
}

// NewBatcher returns a Batcher bounded by o that answers batches of
// operation with run.
func NewBatcher[In, Out any](o BatchOptions, operation string, run func(context.Context, []In) []Result[Out]) *Batcher[In, Out] {
	if o.MaxSize <= 0 {
		o.MaxSize = DefaultMaxBatchSize
	}
	if o.Window <= 0 {
		o.Window = DefaultBatchWindow
		if o.Quiet <= 0 {
			o.Quiet = DefaultBatchQuiet
		}
	}
	b := &Batcher[In, Out]{Max: o.MaxSize, Window: o.Window, Quiet: o.Quiet, Run: run}
	if o.Observe != nil {
		b.Observe = func(size int) { o.Observe(operation, size) }
	}
	return b
}

// NewStagedBatcher is NewBatcher for batches answered in two stages (see
// Batcher.Look), calls named by key.
func NewStagedBatcher[In, Out any](o BatchOptions, operation string, look func(context.Context, []In) func() []Result[Out], key func(In) string) *Batcher[In, Out] {
	b := NewBatcher(o, operation, func(ctx context.Context, ins []In) []Result[Out] { return look(ctx, ins)() })
	b.Look, b.Key = look, key
	return b
}

// Deduplicated answers calls that may name the same claim more than once (a
// retried reconcile next to the first): run sees each marker once, so one
// claim never gets two records, and every call gets its marker's result.
func Deduplicated[Out any](claims []Claim, run func([]Claim) []Result[Out]) []Result[Out] {
	unique, spread := deduplicate[Out](claims)
	return spread(run(unique))
}

// deduplicate returns claims with each marker once, and what spreads their
// results back over claims.
func deduplicate[Out any](claims []Claim) (unique []Claim, spread func([]Result[Out]) []Result[Out]) {
	first := map[string]int{}
	for _, c := range claims {
		i, seen := first[c.Marker]
		if !seen {
			first[c.Marker] = len(unique)
			unique = append(unique, c)
			continue
		}
		// Fresh only if every call says so: one that does not may know
		// of a reservation.
		unique[i].Fresh = unique[i].Fresh && c.Fresh
	}
	return unique, func(uniqueResults []Result[Out]) []Result[Out] {
		results := make([]Result[Out], len(claims))
		for i, c := range claims {
			results[i] = uniqueResults[first[c.Marker]]
		}
		return results
	}
}

// claimMarker names a claim by its marker, for Batcher.Key.
func claimMarker(c Claim) string { return c.Marker }
