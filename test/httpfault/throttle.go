package httpfault

import (
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Disturbable is a server whose faults and throttle a test controls: the
// simulators and the proxy before a real NetBox.
type Disturbable interface {
	InjectFault(Fault)
	ClearFaults()
	SetThrottle(ThrottleLimit)
}

// ThrottleLimit is what a throttled server accepts; a zero field is no
// bound.
type ThrottleLimit struct {
	// RequestsPerSecond, with a burst of as many, is the rate it accepts.
	RequestsPerSecond int
	// MaxConcurrent is how many requests it processes at once.
	MaxConcurrent int
	// RetryAfter is what it asks a refused client to wait (default 1s,
	// sent in whole seconds).
	RetryAfter time.Duration
}

// Arrival is a request that reached a throttled server.
type Arrival struct {
	At time.Time
	// Throttled: it was answered 429.
	Throttled bool
	// Concurrent is how many requests the server held, this one included.
	Concurrent int
}

// Throttle refuses, with 429 and Retry-After, the requests that exceed its
// limit, as a rate-limiting proxy in front of an IPAM system does. The
// zero value accepts everything. Safe for concurrent use.
type Throttle struct {
	mu       sync.Mutex
	limit    ThrottleLimit
	rate     *rate.Limiter
	inFlight int
	arrivals []Arrival
}

// Set replaces the limit and forgets the arrivals.
func (t *Throttle) Set(l ThrottleLimit) {
	if l.RetryAfter <= 0 {
		l.RetryAfter = time.Second
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.limit = l
	t.rate = nil
	if l.RequestsPerSecond > 0 {
		t.rate = rate.NewLimiter(rate.Limit(l.RequestsPerSecond), l.RequestsPerSecond)
	}
	t.arrivals = nil
}

// Limit is the limit in force.
func (t *Throttle) Limit() ThrottleLimit {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.limit
}

// Arrivals lists the requests that reached the server since the last Set,
// in order.
func (t *Throttle) Arrivals() []Arrival {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]Arrival(nil), t.arrivals...)
}

// Admit takes r in, or refuses it: it sets Retry-After, answers with
// writeStatus(w, 429), records the call in log and returns false. When it
// admits, done must be called once r is answered.
func (t *Throttle) Admit(w http.ResponseWriter, r *http.Request, log *Log,
	writeStatus func(http.ResponseWriter, int) int) (done func(), admitted bool) {
	t.mu.Lock()
	if t.limit == (ThrottleLimit{}) {
		t.mu.Unlock()
		return func() {}, true
	}
	t.inFlight++
	a := Arrival{At: time.Now(), Concurrent: t.inFlight}
	a.Throttled = (t.limit.MaxConcurrent > 0 && t.inFlight > t.limit.MaxConcurrent) || (t.rate != nil && !t.rate.Allow())
	t.arrivals = append(t.arrivals, a)
	retryAfter := t.limit.RetryAfter
	t.mu.Unlock()
	done = func() {
		t.mu.Lock()
		t.inFlight--
		t.mu.Unlock()
	}
	if !a.Throttled {
		return done, true
	}
	defer done()
	log.Record(r, http.StatusTooManyRequests)
	w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(retryAfter.Seconds()))))
	writeStatus(w, http.StatusTooManyRequests)
	return nil, false
}
