package backendhttp

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// An endpoint that redirects does not take the request, or its
// credentials, anywhere else: the redirect is the answer.
func TestARedirectIsNeverFollowed(t *testing.T) {
	var reached atomic.Int32
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
	}))
	t.Cleanup(elsewhere.Close)
	for _, status := range []int{http.StatusMovedPermanently, http.StatusFound, http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		allowed := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, elsewhere.URL+"/api/", status)
		}))
		t.Cleanup(allowed.Close)
		c := NewClient(Options{Timeout: 5 * time.Second, RetryWaitMin: time.Millisecond, RetryWaitMax: 5 * time.Millisecond}, nil)
		req, err := http.NewRequest(http.MethodGet, allowed.URL+"/api/", nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Token secret")
		resp, err := c.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, status, resp.StatusCode, "the redirect is handed back")
	}
	assert.Zero(t, reached.Load(), "no request reached the redirect's target")
}
