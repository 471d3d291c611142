package httpfault

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestThrottleRefusesWhatExceedsItsLimit(t *testing.T) {
	for _, tc := range []struct {
		name  string
		limit ThrottleLimit
		// parallel requests are held until all have arrived or been refused.
		parallel int
		want     []int // status of each request, in order of arrival
	}{
		{"within the rate", ThrottleLimit{RequestsPerSecond: 3}, 1, []int{200, 200, 200}},
		{"beyond the rate", ThrottleLimit{RequestsPerSecond: 2}, 1, []int{200, 200, 429, 429}},
		{"beyond the concurrency", ThrottleLimit{MaxConcurrent: 2}, 3, []int{200, 200, 429}},
		{"no limit", ThrottleLimit{}, 3, []int{200, 200, 200}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var th Throttle
			th.Set(tc.limit)
			var log Log
			release := make(chan struct{})
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				done, ok := th.Admit(w, r, &log, func(w http.ResponseWriter, status int) int {
					w.WriteHeader(status)
					return status
				})
				if !ok {
					return
				}
				defer done()
				if tc.parallel > 1 {
					<-release
				}
			}))
			defer srv.Close()

			codes := make(chan *http.Response, len(tc.want))
			var wg sync.WaitGroup
			for range len(tc.want) {
				send := func() {
					resp, err := http.Get(srv.URL)
					require.NoError(t, err)
					resp.Body.Close()
					codes <- resp
				}
				if tc.parallel == 1 {
					send()
					continue
				}
				wg.Go(send)
			}
			if tc.parallel > 1 {
				require.Eventually(t, func() bool { return len(th.Arrivals()) == len(tc.want) }, 5*time.Second, time.Millisecond)
				close(release)
			}
			wg.Wait()
			close(codes)

			var got []int
			for resp := range codes {
				got = append(got, resp.StatusCode)
				if resp.StatusCode == http.StatusTooManyRequests {
					assert.Equal(t, "1", resp.Header.Get("Retry-After"))
				}
			}
			assert.ElementsMatch(t, tc.want, got)
			arrivals := th.Arrivals()
			require.Len(t, arrivals, len(tc.want))
			refused := 0
			for _, a := range arrivals {
				if a.Throttled {
					refused++
				}
			}
			assert.Equal(t, log.Count("", "/"), refused, "only refusals are logged by the throttle")
		})
	}
}
