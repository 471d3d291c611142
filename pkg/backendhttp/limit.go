package backendhttp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-retryablehttp"
	"golang.org/x/sync/semaphore"
	"golang.org/x/time/rate"
)

// Limit bounds the requests sent to one IPAM endpoint. A zero field is no
// bound.
type Limit struct {
	// RequestsPerSecond is the sustained rate.
	RequestsPerSecond int
	// Burst is how many requests may go at once after a quiet spell.
	Burst int
	// MaxConcurrent is how many requests may await their answer at once.
	MaxConcurrent int
}

// DefaultLimit applies to an endpoint no pool has set a limit for. A new
// claim costs two requests, so it allows 10 new claims a second sustained
// and a burst of 20; 10 requests in flight match the default number of
// claim workers.
var DefaultLimit = Limit{RequestsPerSecond: 20, Burst: 40, MaxConcurrent: 10}

// Stricter is the tighter of l and o in each field.
func (l Limit) Stricter(o Limit) Limit {
	tighter := func(a, b int) int {
		if a == 0 || (b != 0 && b < a) {
			return b
		}
		return a
	}
	return Limit{
		RequestsPerSecond: tighter(l.RequestsPerSecond, o.RequestsPerSecond),
		Burst:             tighter(l.Burst, o.Burst),
		MaxConcurrent:     tighter(l.MaxConcurrent, o.MaxConcurrent),
	}
}

// ErrThrottled says the endpoint asked, with a 429 or a 503 and
// Retry-After, to be left alone for longer than the request may wait.
var ErrThrottled = errors.New("the IPAM endpoint asked to be left alone")

// EndpointOf names the endpoint a URL belongs to: scheme, host and port,
// nothing that could hold a credential. Every URL of one server shares it.
func EndpointOf(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return ""
	}
	return endpointKey(u)
}

func endpointKey(u *url.URL) string {
	scheme := strings.ToLower(u.Scheme)
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[scheme]
	}
	return scheme + "://" + net.JoinHostPort(strings.ToLower(u.Hostname()), port)
}

// Limits holds one limiter per endpoint, shared by every client given the
// same Limits. Owners (pools) set the limit they want for their endpoint;
// the strictest wins, so no pool can make the manager harder on an IPAM
// system than another pool on it allows. Safe for concurrent use.
type Limits struct {
	// Default applies to an endpoint no owner has set a limit for.
	Default Limit

	mu        sync.Mutex
	endpoints map[string]*endpoint
	owners    map[string]string // owner -> endpoint key
}

// NewLimits returns Limits with DefaultLimit.
func NewLimits() *Limits { return &Limits{Default: DefaultLimit} }

// Set records owner's limit for the endpoint of rawURL, replacing what
// owner set before, wherever that was.
func (ls *Limits) Set(owner, rawURL string, l Limit) {
	key := EndpointOf(rawURL)
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if old, ok := ls.owners[owner]; ok && old != key {
		ls.leave(owner, old)
	}
	if ls.owners == nil {
		ls.owners = map[string]string{}
	}
	ls.owners[owner] = key
	ls.endpointLocked(key).want(owner, &l, ls.Default)
	// At 0 from the moment a pool names the endpoint, so that rate() and
	// increase() see the first throttled answer.
	for _, code := range []int{http.StatusTooManyRequests, http.StatusServiceUnavailable} {
		throttledRequests.WithLabelValues(key, fmt.Sprint(code))
	}
}

// Remove forgets owner's limit.
func (ls *Limits) Remove(owner string) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if key, ok := ls.owners[owner]; ok {
		ls.leave(owner, key)
	}
}

// Effective is the limit that applies to the endpoint of rawURL.
func (ls *Limits) Effective(rawURL string) Limit {
	ep := ls.endpoint(EndpointOf(rawURL))
	ep.mu.Lock()
	defer ep.mu.Unlock()
	return ep.limit
}

func (ls *Limits) leave(owner, key string) {
	delete(ls.owners, owner)
	if ep, ok := ls.endpoints[key]; ok && ep.want(owner, nil, ls.Default) == 0 {
		// Clients still holding it keep working; a new one gets defaults.
		delete(ls.endpoints, key)
		// No pool names the endpoint any more: its series go with it.
		forgetEndpointMetrics(key)
	}
}

func (ls *Limits) endpoint(key string) *endpoint {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return ls.endpointLocked(key)
}

func (ls *Limits) endpointLocked(key string) *endpoint {
	if ep, ok := ls.endpoints[key]; ok {
		return ep
	}
	if ls.endpoints == nil {
		ls.endpoints = map[string]*endpoint{}
	}
	ep := &endpoint{key: key, wants: map[string]Limit{}, rate: rate.NewLimiter(rate.Inf, 0)}
	ep.apply(ls.Default)
	ls.endpoints[key] = ep
	return ep
}

// endpoint is the limiter state of one IPAM endpoint.
type endpoint struct {
	key string

	mu    sync.Mutex
	wants map[string]Limit // by owner
	limit Limit
	rate  *rate.Limiter
	// slots bounds the requests in flight; nil is no bound. A change of
	// limit replaces it: requests already in flight release the old one, so
	// the new bound holds once they are answered.
	slots       *semaphore.Weighted
	pausedUntil time.Time
}

// want sets (nil: removes) owner's limit and returns how many owners remain.
func (ep *endpoint) want(owner string, l *Limit, fallback Limit) int {
	ep.mu.Lock()
	defer ep.mu.Unlock()
	if l == nil {
		delete(ep.wants, owner)
	} else {
		ep.wants[owner] = *l
	}
	effective := fallback
	if len(ep.wants) > 0 {
		effective = Limit{}
		for _, w := range ep.wants {
			effective = effective.Stricter(w)
		}
	}
	ep.apply(effective)
	return len(ep.wants)
}

// apply makes l the endpoint's limit; ep.mu is held (or ep is new).
func (ep *endpoint) apply(l Limit) {
	if l == ep.limit && ep.rate != nil {
		return
	}
	if l.MaxConcurrent != ep.limit.MaxConcurrent || ep.slots == nil && l.MaxConcurrent > 0 {
		ep.slots = nil
		if l.MaxConcurrent > 0 {
			ep.slots = semaphore.NewWeighted(int64(l.MaxConcurrent))
		}
	}
	ep.limit = l
	if l.RequestsPerSecond == 0 {
		ep.rate.SetLimit(rate.Inf)
		return
	}
	burst := l.Burst
	if burst == 0 {
		burst = l.RequestsPerSecond
	}
	ep.rate.SetLimit(rate.Limit(l.RequestsPerSecond))
	ep.rate.SetBurst(burst)
}

// wait blocks until a request may be sent: no pause is in force, a slot is
// free and the rate allows it. The pause is checked again last, so that no
// request leaves once the endpoint has asked for quiet. release frees the
// slot.
func (ep *endpoint) wait(ctx context.Context) (release func(), err error) {
	if err := ep.waitPause(ctx); err != nil {
		return nil, err
	}
	ep.mu.Lock()
	slots := ep.slots
	ep.mu.Unlock()
	release = func() {}
	if slots != nil {
		if err := slots.Acquire(ctx, 1); err != nil {
			return nil, fmt.Errorf("waiting for a free request slot of %s: %w", ep.key, err)
		}
		release = func() { slots.Release(1) }
	}
	if err := ep.rate.Wait(ctx); err != nil {
		release()
		return nil, fmt.Errorf("waiting for the request rate of %s: %w", ep.key, err)
	}
	if err := ep.waitPause(ctx); err != nil {
		release()
		return nil, err
	}
	return release, nil
}

// waitPause waits out the pause the endpoint asked for, failing at once if
// it outlasts the request's deadline.
func (ep *endpoint) waitPause(ctx context.Context) error {
	for {
		ep.mu.Lock()
		until := ep.pausedUntil
		ep.mu.Unlock()
		d := time.Until(until)
		if d <= 0 {
			return nil
		}
		if deadline, ok := ctx.Deadline(); ok && deadline.Before(until) {
			return fmt.Errorf("%w: %s asked for quiet until %s", ErrThrottled, ep.key, until.UTC().Format(time.RFC3339))
		}
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// pause holds every request to the endpoint back for d.
func (ep *endpoint) pause(d time.Duration) {
	until := time.Now().Add(d)
	ep.mu.Lock()
	defer ep.mu.Unlock()
	if until.After(ep.pausedUntil) {
		ep.pausedUntil = until
	}
}

// throttle reads a 429, or a 503 with Retry-After, as the server asking the
// whole endpoint to wait: as long as Retry-After says, or, for a 429
// without it, the least retry backoff. go-retryablehttp's backoff parses
// Retry-After (seconds or an HTTP date) and makes the throttled request
// itself wait as long.
func (ep *endpoint) throttle(resp *http.Response, minWait time.Duration) {
	retryAfter := resp.Header.Get("Retry-After") != ""
	if resp.StatusCode != http.StatusTooManyRequests && (resp.StatusCode != http.StatusServiceUnavailable || !retryAfter) {
		return
	}
	throttledRequests.WithLabelValues(ep.key, fmt.Sprint(resp.StatusCode)).Inc()
	ep.pause(retryablehttp.DefaultBackoff(minWait, minWait, 0, resp))
}

// limitingTransport sends each attempt through its endpoint's limiter.
type limitingTransport struct {
	next    http.RoundTripper
	limits  *Limits
	minWait time.Duration
}

func (t limitingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ep := t.limits.endpoint(endpointKey(req.URL))
	start := time.Now()
	release, err := ep.wait(req.Context())
	limiterWaitSeconds.WithLabelValues(ep.key).Observe(time.Since(start).Seconds())
	if err != nil {
		if req.Body != nil {
			_ = req.Body.Close()
		}
		return nil, err
	}
	inFlight := requestsInFlight.WithLabelValues(ep.key)
	inFlight.Inc()
	// The slot is held until the answer's headers arrive: the server has
	// done its work by then.
	defer func() {
		inFlight.Dec()
		release()
	}()
	resp, err := t.next.RoundTrip(req)
	if err == nil {
		ep.throttle(resp, t.minWait)
	}
	return resp, err
}
