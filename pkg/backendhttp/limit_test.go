package backendhttp

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLimitStricter(t *testing.T) {
	for _, tc := range []struct {
		name string
		a, b Limit
		want Limit
	}{
		{"each field from the tighter", Limit{20, 40, 10}, Limit{5, 50, 20}, Limit{5, 40, 10}},
		{"zero is no bound", Limit{}, Limit{5, 50, 20}, Limit{5, 50, 20}},
		{"zero on the other side", Limit{5, 0, 2}, Limit{}, Limit{5, 0, 2}},
		{"equal", DefaultLimit, DefaultLimit, DefaultLimit},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, tc.a.Stricter(tc.b))
			assert.Equal(t, tc.want, tc.b.Stricter(tc.a), "symmetric")
		})
	}
}

func TestEndpointOf(t *testing.T) {
	for _, tc := range []struct{ url, want string }{
		{"https://netbox.example.com", "https://netbox.example.com:443"},
		{"https://NetBox.Example.com:443/", "https://netbox.example.com:443"},
		{"http://netbox.example.com/netbox/api/ipam/", "http://netbox.example.com:80"},
		{"https://user:secret@gm.example.com:8443/wapi/v2.12", "https://gm.example.com:8443"},
		{"https://[2001:db8::1]/wapi/v2.12/network", "https://[2001:db8::1]:443"},
	} {
		t.Run(tc.url, func(t *testing.T) {
			assert.Equal(t, tc.want, EndpointOf(tc.url))
		})
	}
}

// Pools on one endpoint share its limit and the strictest wins; pools on
// another endpoint are not affected; a pool that leaves or moves takes its
// limit with it.
func TestLimitsSharedByEndpoint(t *testing.T) {
	const (
		netbox = "https://netbox.example.com"
		grid   = "https://gm.example.com/wapi/v2.12"
	)
	type set struct {
		owner, url string
		limit      *Limit // nil removes the owner
	}
	for _, tc := range []struct {
		name string
		sets []set
		want map[string]Limit
	}{
		{
			name: "no pool: the defaults",
			want: map[string]Limit{netbox: DefaultLimit},
		},
		{
			name: "one pool: its limit, even when looser than the defaults",
			sets: []set{{"a", netbox, &Limit{100, 200, 50}}},
			want: map[string]Limit{netbox: {100, 200, 50}, grid: DefaultLimit},
		},
		{
			name: "two pools on one endpoint: the strictest of each field",
			sets: []set{{"a", netbox, &Limit{20, 40, 10}}, {"b", netbox + "/", &Limit{5, 80, 20}}},
			want: map[string]Limit{netbox: {5, 40, 10}},
		},
		{
			name: "pools on different endpoints are apart",
			sets: []set{{"a", netbox, &Limit{1, 1, 1}}, {"b", grid, &Limit{50, 50, 50}}},
			want: map[string]Limit{netbox: {1, 1, 1}, grid: {50, 50, 50}},
		},
		{
			name: "a pool that changes its limit replaces it",
			sets: []set{{"a", netbox, &Limit{1, 1, 1}}, {"b", netbox, &Limit{10, 10, 10}}, {"a", netbox, &Limit{30, 30, 30}}},
			want: map[string]Limit{netbox: {10, 10, 10}},
		},
		{
			name: "a pool that moves takes its limit along",
			sets: []set{{"a", netbox, &Limit{1, 1, 1}}, {"b", netbox, &Limit{10, 10, 10}}, {"a", grid, &Limit{1, 1, 1}}},
			want: map[string]Limit{netbox: {10, 10, 10}, grid: {1, 1, 1}},
		},
		{
			name: "the last pool leaving restores the defaults",
			sets: []set{{"a", netbox, &Limit{1, 1, 1}}, {"b", netbox, &Limit{10, 10, 10}}, {"a", "", nil}, {"b", "", nil}},
			want: map[string]Limit{netbox: DefaultLimit},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ls := NewLimits()
			for _, s := range tc.sets {
				if s.limit == nil {
					ls.Remove(s.owner)
				} else {
					ls.Set(s.owner, s.url, *s.limit)
				}
			}
			for url, want := range tc.want {
				assert.Equal(t, want, ls.Effective(url), url)
			}
		})
	}
}

// server counts the requests it is answering at once and records when
// each arrived.
type server struct {
	*httptest.Server
	mu       sync.Mutex
	arrivals []time.Time
	inFlight atomic.Int32
	peak     atomic.Int32
}

func newServer(t *testing.T, handle func(n int, w http.ResponseWriter)) *server {
	s := &server{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		now := s.inFlight.Add(1)
		defer s.inFlight.Add(-1)
		for {
			peak := s.peak.Load()
			if now <= peak || s.peak.CompareAndSwap(peak, now) {
				break
			}
		}
		s.mu.Lock()
		s.arrivals = append(s.arrivals, time.Now())
		n := len(s.arrivals)
		s.mu.Unlock()
		handle(n, w)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *server) arrived() []time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Time(nil), s.arrivals...)
}

func get(ctx context.Context, c *http.Client, url string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	return resp.StatusCode, nil
}

var fastRetries = Options{RetryWaitMin: time.Millisecond, RetryWaitMax: 5 * time.Millisecond}

// Two clients of one manager (two pools) on one endpoint never have more
// requests in flight together than the endpoint's limit.
func TestConcurrencyIsSharedByTheClientsOfAnEndpoint(t *testing.T) {
	srv := newServer(t, func(int, http.ResponseWriter) { time.Sleep(20 * time.Millisecond) })
	limits := NewLimits()
	limits.Set("pool-a", srv.URL, Limit{MaxConcurrent: 2})
	limits.Set("pool-b", srv.URL, Limit{MaxConcurrent: 3})
	opts := fastRetries
	opts.Limits = limits
	clients := []*http.Client{NewClient(opts, nil), NewClient(opts, nil)}

	var wg sync.WaitGroup
	for i := range 12 {
		wg.Go(func() {
			code, err := get(context.Background(), clients[i%2], srv.URL+"/x")
			assert.NoError(t, err)
			assert.Equal(t, http.StatusOK, code)
		})
	}
	wg.Wait()
	assert.Len(t, srv.arrived(), 12)
	assert.LessOrEqual(t, srv.peak.Load(), int32(2), "the stricter pool's limit, across both clients")
	assert.Zero(t, testutil.ToFloat64(requestsInFlight.WithLabelValues(EndpointOf(srv.URL))), "every slot released")
}

// A request that cannot get a token before its deadline is not sent.
func TestRateLimitHoldsRequestsBack(t *testing.T) {
	srv := newServer(t, func(int, http.ResponseWriter) {})
	limits := &Limits{}
	limits.Set("pool", srv.URL, Limit{RequestsPerSecond: 1, Burst: 3})
	opts := fastRetries
	opts.Limits = limits
	opts.RetryMax = 1
	c := NewClient(opts, nil)

	for range 3 {
		_, err := get(context.Background(), c, srv.URL)
		require.NoError(t, err, "within the burst")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := get(ctx, c, srv.URL)
	require.Error(t, err, "the next token is a second away, past the deadline")
	assert.Len(t, srv.arrived(), 3, "the held-back request never reached the server")
}

// A 429, or a 503 with Retry-After, pauses every client of the endpoint for
// as long as the server asks; a 503 without Retry-After (an outage) does not.
func TestThrottlingAnswerPausesTheWholeEndpoint(t *testing.T) {
	for _, tc := range []struct {
		name       string
		status     int
		retryAfter func() string
		// minPause is the least the endpoint must stay quiet.
		minPause time.Duration
		paused   bool
	}{
		{"429 with seconds", http.StatusTooManyRequests, func() string { return "1" }, time.Second, true},
		{"429 with an HTTP date", http.StatusTooManyRequests,
			func() string { return time.Now().Add(2 * time.Second).UTC().Format(http.TimeFormat) }, 900 * time.Millisecond, true}, // whole seconds
		{"503 with seconds", http.StatusServiceUnavailable, func() string { return "1" }, time.Second, true},
		{"429 without Retry-After: the least backoff", http.StatusTooManyRequests, func() string { return "" }, 50 * time.Millisecond, true},
		{"503 without Retry-After: an outage, no pause", http.StatusServiceUnavailable, func() string { return "" }, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			throttledAt := make(chan time.Time, 1)
			srv := newServer(t, func(n int, w http.ResponseWriter) {
				if n == 1 {
					if ra := tc.retryAfter(); ra != "" {
						w.Header().Set("Retry-After", ra)
					}
					w.WriteHeader(tc.status)
					throttledAt <- time.Now()
				}
			})
			limits := &Limits{}
			opts := Options{RetryWaitMin: 50 * time.Millisecond, RetryWaitMax: 50 * time.Millisecond, Limits: limits}
			first, second := NewClient(opts, nil), NewClient(opts, nil)
			before := testutil.ToFloat64(throttledRequests.WithLabelValues(EndpointOf(srv.URL), fmt.Sprint(tc.status)))

			done := make(chan error, 1)
			go func() {
				code, err := get(context.Background(), first, srv.URL)
				if err == nil && code != http.StatusOK {
					err = fmt.Errorf("HTTP %d", code)
				}
				done <- err
			}()
			answered := <-throttledAt
			ep := limits.endpoint(EndpointOf(srv.URL))
			if tc.paused {
				require.Eventually(t, func() bool {
					ep.mu.Lock()
					defer ep.mu.Unlock()
					return !ep.pausedUntil.IsZero()
				}, 5*time.Second, time.Millisecond, "the answer pauses the endpoint")
			}
			code, err := get(context.Background(), second, srv.URL)
			require.NoError(t, err)
			assert.Equal(t, http.StatusOK, code)
			require.NoError(t, <-done, "the throttled request is retried")

			arrivals := srv.arrived()
			require.Len(t, arrivals, 3)
			for i, at := range arrivals[1:] {
				if tc.paused {
					assert.GreaterOrEqual(t, at.Sub(answered), tc.minPause, "request %d waited out the pause", i+2)
				}
			}
			ep.mu.Lock()
			pausedUntil := ep.pausedUntil
			ep.mu.Unlock()
			assert.Equal(t, tc.paused, !pausedUntil.IsZero())
			want := 0.0
			if tc.paused {
				want = 1
			}
			assert.Equal(t, want, testutil.ToFloat64(throttledRequests.WithLabelValues(EndpointOf(srv.URL), fmt.Sprint(tc.status)))-before)
		})
	}
}

// A pause longer than a request may wait fails the request at once, and
// nothing reaches the server meanwhile.
func TestPauseBeyondTheDeadlineFailsAtOnce(t *testing.T) {
	srv := newServer(t, func(n int, w http.ResponseWriter) {
		if n == 1 {
			w.Header().Set("Retry-After", "3600")
			w.WriteHeader(http.StatusTooManyRequests)
		}
	})
	opts := fastRetries
	opts.Limits = &Limits{}
	opts.Timeout = 200 * time.Millisecond
	c := NewClient(opts, nil)

	code, err := get(context.Background(), c, srv.URL)
	require.Error(t, err, "the server asked for an hour; the request may wait 200ms per attempt")
	assert.ErrorIs(t, err, ErrThrottled)
	assert.Zero(t, code)
	_, err = get(context.Background(), c, srv.URL)
	assert.ErrorIs(t, err, ErrThrottled)
	assert.Len(t, srv.arrived(), 1, "only the request that was answered 429 reached the server")
}

// The throttled counters of an endpoint exist at 0 while a pool names it,
// so that rate() sees the first 429, and go once none does.
func TestThrottledSeriesFollowThePoolsThatNameTheEndpoint(t *testing.T) {
	ls := NewLimits()
	before := testutil.CollectAndCount(throttledRequests)
	ls.Set("pool-a", "https://series.example.com/api", Limit{})
	ls.Set("pool-b", "https://series.example.com:443/other", Limit{})
	assert.Equal(t, before+2, testutil.CollectAndCount(throttledRequests), "429 and 503 at 0, once per endpoint")
	assert.Zero(t, testutil.ToFloat64(throttledRequests.WithLabelValues("https://series.example.com:443", "429")))
	ls.Remove("pool-a")
	assert.Equal(t, before+2, testutil.CollectAndCount(throttledRequests), "pool-b still names it")
	ls.Remove("pool-b")
	assert.Equal(t, before, testutil.CollectAndCount(throttledRequests), "no pool names it: its series are gone")
}
