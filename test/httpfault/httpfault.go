// Package httpfault holds what the simulators and test proxies share to
// disturb and count HTTP requests: a queue of injected faults, the call log,
// and cutting a connection without an answer.
package httpfault

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"
)

// Kind says how an injected fault disturbs a request.
type Kind int

const (
	// Status replies with Fault.Status without processing the request.
	Status Kind = iota
	// Drop closes the connection without reply and without processing.
	Drop
	// LoseResponse processes the request fully (e.g. allocates), then
	// closes the connection without replying.
	LoseResponse
	// Latency sleeps Fault.Latency, then processes normally. The request is
	// processed even if the client gave up meanwhile, as a real server would.
	Latency
	// Gather holds the matching requests until all of Fault.Gathering's
	// have arrived, then processes them and answers none before all were
	// processed: writers that each looked before any of them wrote then
	// race for sure, as two manager processes can.
	Gather
	// Before runs Fault.Then, then processes the request normally: another
	// writer acting between a client's read of an object and its write.
	Before
)

// Gathering is the meeting point of a Gather fault's requests.
type Gathering struct {
	n       int
	wait    time.Duration
	mu      sync.Mutex
	arrived int
	done    int
	// gaveUp: a request stopped waiting before all had arrived.
	gaveUp   bool
	all      chan struct{}
	finished chan struct{}
}

// NewGathering gathers n requests; a request waits at most wait for the
// others, so that a test whose writers never race fails instead of
// hanging.
func NewGathering(n int, wait time.Duration) *Gathering {
	return &Gathering{n: n, wait: wait, all: make(chan struct{}), finished: make(chan struct{})}
}

// Complete says whether all the requests arrived before any stopped
// waiting: they raced.
func (g *Gathering) Complete() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.all:
		return !g.gaveUp
	default:
		return false
	}
}

// Arrived counts the requests that arrived.
func (g *Gathering) Arrived() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.arrived
}

// Arrive waits for the others, or for the wait to run out.
func (g *Gathering) Arrive() {
	g.mu.Lock()
	if g.arrived++; g.arrived == g.n {
		close(g.all)
	}
	g.mu.Unlock()
	select {
	case <-g.all:
	case <-time.After(g.wait):
		g.mu.Lock()
		// Requests that arrive now were not gathered: they took turns.
		g.gaveUp = g.gaveUp || g.arrived < g.n
		g.mu.Unlock()
	}
}

// Processed waits, once all arrived, until all were processed.
func (g *Gathering) Processed() {
	g.mu.Lock()
	if g.done++; g.done == g.n {
		close(g.finished)
	}
	g.mu.Unlock()
	if !g.Complete() {
		return
	}
	select {
	case <-g.finished:
	case <-time.After(g.wait):
	}
}

// Fault is consumed, in order of injection, by the first matching requests.
// Go's HTTP client silently retries idempotent requests (GET) whose reused
// connection dies, so a drop on a GET may go unnoticed by the caller.
type Fault struct {
	Kind         Kind
	Method       string // "" = any
	PathContains string
	// BodyContains, if set, must occur in the request body: it tells apart
	// requests to one path, such as the operations of a WAPI request object.
	BodyContains string
	Times        int // matching requests affected; default 1
	Status       int // Status; default 503
	Latency      time.Duration
	// Gathering is where a Gather fault's requests meet; Times defaults to
	// the number it gathers.
	Gathering *Gathering
	// Match, if set, must also accept the request (its body is nil where
	// the server does not read it for faults).
	Match func(method, path string, body []byte) bool
	// Then runs, outside any lock of the server, before a Before fault's
	// request is processed, and after a LoseResponse fault's request was
	// processed and before its connection is cut: what another client does
	// while this one waits.
	Then func()
}

// Queue holds injected faults until requests consume them.
type Queue struct {
	mu     sync.Mutex
	faults []*Fault
}

// Add queues a fault, with its defaults applied.
func (q *Queue) Add(f Fault) {
	if f.Kind == Gather && f.Times <= 0 {
		f.Times = f.Gathering.n
	}
	if f.Times <= 0 {
		f.Times = 1
	}
	if f.Kind == Status && f.Status == 0 {
		f.Status = http.StatusServiceUnavailable
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.faults = append(q.faults, &f)
}

// Clear drops all pending faults.
func (q *Queue) Clear() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.faults = nil
}

// Take consumes one use of the first fault matching the request, of those
// that look at no body.
func (q *Queue) Take(method, path string) (Fault, bool) { return q.take(method, path, nil) }

// TakeWithBody is Take for a request with its body.
func (q *Queue) TakeWithBody(method, path string, body []byte) (Fault, bool) {
	return q.take(method, path, body)
}

func (q *Queue) take(method, path string, body []byte) (Fault, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for i, f := range q.faults {
		if (f.Method == "" || strings.EqualFold(f.Method, method)) && strings.Contains(path, f.PathContains) &&
			(f.BodyContains == "" || body != nil && bytes.Contains(body, []byte(f.BodyContains))) &&
			(f.Match == nil || f.Match(method, path, body)) {
			f.Times--
			if f.Times == 0 {
				q.faults = append(q.faults[:i:i], q.faults[i+1:]...)
			}
			return *f, true
		}
	}
	return Fault{}, false
}

// Call is one request a server processed (or dropped). Status is what the
// server produced: 0 when the connection was dropped before processing, the
// real status when the response was processed and then lost.
type Call struct {
	Method string
	Path   string // without query
	Query  string // raw query string
	Status int
	// At is when the call was recorded: after the server's answer where
	// the server answered.
	At time.Time
}

// Untimed is the call without the time it was answered, for comparing
// what was asked.
func (c Call) Untimed() Call {
	c.At = time.Time{}
	return c
}

// Log records calls; it is safe for concurrent use.
type Log struct {
	mu    sync.Mutex
	calls []Call
}

// Record appends a call. Servers record before the client can see any answer,
// so a caller whose request just returned always finds its call counted.
func (l *Log) Record(r *http.Request, status int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls = append(l.calls, Call{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Status: status, At: time.Now()})
}

// Calls returns the recorded calls in order.
func (l *Log) Calls() []Call {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Call(nil), l.calls...)
}

// Reset forgets the recorded calls.
func (l *Log) Reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls = nil
}

// Count counts recorded calls with the method ("" = any) whose path starts
// with pathPrefix.
func (l *Log) Count(method, pathPrefix string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, c := range l.calls {
		if (method == "" || strings.EqualFold(c.Method, method)) && strings.HasPrefix(c.Path, pathPrefix) {
			n++
		}
	}
	return n
}

// CloseWithoutResponse cuts the connection without an answer, as a crashed
// proxy or a network fault would.
func CloseWithoutResponse(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		panic("httpfault: connection cannot be hijacked (HTTP/2?)")
	}
	conn, _, err := hj.Hijack()
	if err == nil {
		_ = conn.Close()
	}
}

// Serve runs handle, which processes the request and returns the status it
// wrote, under the first fault of q that matches r: Status answers with
// writeStatus without processing, Drop cuts the connection without
// processing, LoseResponse processes and then cuts, Latency waits first. The
// call is recorded in log before the client can see any answer. closing
// ends latency waits early when the server shuts down.
func Serve(w http.ResponseWriter, r *http.Request, q *Queue, log *Log, closing <-chan struct{},
	writeStatus func(http.ResponseWriter, int) int, handle func(http.ResponseWriter) int) {
	// The body is read here so that faults may match on it; the handler
	// reads it again.
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	f, faulty := q.TakeWithBody(r.Method, r.URL.Path, body)
	if faulty && f.Kind == Latency && !Sleep(f.Latency, closing) {
		log.Record(r, 0)
		CloseWithoutResponse(w)
		return
	}
	switch {
	case faulty && f.Kind == Status:
		_, _ = io.Copy(io.Discard, r.Body)
		rec := httptest.NewRecorder()
		writeStatus(rec, f.Status)
		log.Record(r, f.Status)
		copyRecorded(w, rec)
	case faulty && f.Kind == Drop:
		// Drain the body so the client sees a clean close, not a reset.
		_, _ = io.Copy(io.Discard, r.Body)
		log.Record(r, 0)
		CloseWithoutResponse(w)
	default:
		if faulty && f.Kind == Gather {
			f.Gathering.Arrive()
		}
		if faulty && f.Kind == Before {
			f.RunThen()
		}
		rec := httptest.NewRecorder()
		status := handle(rec)
		log.Record(r, status)
		if faulty && f.Kind == Gather {
			f.Gathering.Processed()
		}
		if faulty && f.Kind == LoseResponse {
			f.RunThen()
			CloseWithoutResponse(w)
			return
		}
		copyRecorded(w, rec)
	}
}

// RunThen runs f.Then, if set.
func (f Fault) RunThen() {
	if f.Then != nil {
		f.Then()
	}
}

func copyRecorded(w http.ResponseWriter, rec *httptest.ResponseRecorder) {
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.WriteHeader(rec.Code)
	_, _ = w.Write(rec.Body.Bytes())
}

// Sleep waits d unless closing closes first (then it returns false). A
// client going away does not cut it short: servers finish what they began.
func Sleep(d time.Duration, closing <-chan struct{}) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-closing:
		return false
	}
}
