package netboxsim

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// allocSetup returns a server with one prefix and its available-ips path.
func allocSetup(t *testing.T) (*Server, string) {
	s := newSim(t)
	pid := s.AddPrefix("10.50.0.0/24", PrefixOptions{})
	return s, fmt.Sprintf("/api/ipam/prefixes/%d/available-ips/", pid)
}

func TestFaultStatus(t *testing.T) {
	tests := []struct {
		status      int
		contentType string
		bodyHas     string
	}{
		{502, "text/html", "<center><h1>502 Bad Gateway</h1></center>"},
		{503, "text/html", "<title>503 Service Unavailable</title>"},
		{504, "text/html", "nginx"},
		{500, "application/json", `"exception":"OperationalError"`},
		{429, "application/json", `{"detail":"Too Many Requests"}`},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.status), func(t *testing.T) {
			s, path := allocSetup(t)
			s.InjectFault(Fault{Kind: FaultStatus, Status: tt.status, PathContains: "available-ips"})
			c := client(t, s)

			status, body, resp := c.do(http.MethodPost, path, []any{map[string]any{}})
			require.Equal(t, tt.status, status)
			assert.Equal(t, tt.contentType, resp.Header.Get("Content-Type"))
			assert.Contains(t, string(body), tt.bodyHas)
			assert.Empty(t, s.IPAddresses(), "a failed request must not allocate")

			status, _, _ = c.do(http.MethodPost, path, []any{map[string]any{}})
			assert.Equal(t, http.StatusCreated, status, "the fault is consumed")
		})
	}
}

func TestFaultMatchingAndTimes(t *testing.T) {
	s, path := allocSetup(t)
	c := client(t, s)
	s.InjectFault(Fault{Kind: FaultStatus, Status: 503, Method: "POST", PathContains: "available-ips", Times: 2})
	s.InjectFault(Fault{Kind: FaultStatus, Status: 502}) // any request, queued behind the first

	status, _, _ := c.do(http.MethodGet, path, nil)
	assert.Equal(t, 502, status, "GET skips the POST-only fault and takes the catch-all")
	for range 2 {
		status, _, _ = c.do(http.MethodPost, path, map[string]any{})
		assert.Equal(t, 503, status)
	}
	status, _, _ = c.do(http.MethodPost, path, map[string]any{})
	assert.Equal(t, 201, status, "Times is honoured")

	s.InjectFault(Fault{Kind: FaultStatus})
	s.ClearFaults()
	status, _, _ = c.do(http.MethodGet, path, nil)
	assert.Equal(t, 200, status)
}

func TestFaultDrop(t *testing.T) {
	s, path := allocSetup(t)
	s.InjectFault(Fault{Kind: FaultDrop, Method: "POST"})
	c := client(t, s)

	_, err := c.try(http.MethodPost, path, []any{map[string]any{}})
	require.Error(t, err, "the connection is closed without a response")
	assert.Empty(t, s.IPAddresses(), "a dropped request is not processed")
	calls := s.Calls()
	require.Len(t, calls, 1)
	assert.Equal(t, Call{Method: "POST", Path: path, Status: 0}, calls[0].Untimed())

	status, _, _ := c.do(http.MethodPost, path, []any{map[string]any{}})
	assert.Equal(t, http.StatusCreated, status)
}

func TestFaultLoseResponse(t *testing.T) {
	s, path := allocSetup(t)
	var mu sync.Mutex
	var hooked []IPAddress
	s.OnAllocate(func(created []IPAddress) { mu.Lock(); hooked = created; mu.Unlock() })
	s.InjectFault(Fault{Kind: FaultLoseResponse, PathContains: "available-ips"})
	c := client(t, s)

	_, err := c.try(http.MethodPost, path, []any{map[string]any{"description": "orphan"}})
	require.Error(t, err, "the client never sees the response")

	ips := s.IPAddresses()
	require.Len(t, ips, 1, "the allocation happened anyway")
	assert.Equal(t, "10.50.0.1/24", ips[0].Address)
	assert.Equal(t, "orphan", ips[0].Description)
	mu.Lock()
	assert.Len(t, hooked, 1)
	mu.Unlock()
	assert.Equal(t, http.StatusCreated, s.Calls()[0].Status, "the call records what the server produced")

	// A retry allocates a second address: the orphan is the caller's problem.
	status, body, _ := c.do(http.MethodPost, path, []any{map[string]any{}})
	require.Equal(t, http.StatusCreated, status)
	assert.Equal(t, []string{"10.50.0.2/24"}, addresses(t, decode(t, body)))
}

func TestLatency(t *testing.T) {
	s, path := allocSetup(t)
	c := client(t, s)

	s.InjectFault(Fault{Kind: FaultLatency, Latency: 150 * time.Millisecond, PathContains: "available-ips"})
	start := time.Now()
	status, _, _ := c.do(http.MethodPost, path, map[string]any{})
	assert.Equal(t, http.StatusCreated, status, "processed normally after the delay")
	assert.GreaterOrEqual(t, time.Since(start), 150*time.Millisecond)

	start = time.Now()
	c.do(http.MethodGet, "/api/status/", nil)
	assert.Less(t, time.Since(start), 150*time.Millisecond, "the latency fault was consumed")

	s.SetLatency(100 * time.Millisecond)
	start = time.Now()
	status, _, _ = c.do(http.MethodGet, "/api/status/", nil)
	assert.Equal(t, http.StatusOK, status)
	assert.GreaterOrEqual(t, time.Since(start), 100*time.Millisecond)

	t.Run("client timeout does not stop processing", func(t *testing.T) {
		s.SetLatency(0)
		s.InjectFault(Fault{Kind: FaultLatency, Latency: 300 * time.Millisecond, Method: "POST"})
		impatient := client(t, s)
		impatient.hc.Timeout = 50 * time.Millisecond
		_, err := impatient.try(http.MethodPost, path, map[string]any{})
		require.Error(t, err)
		require.Eventually(t, func() bool { return len(s.IPAddresses()) == 2 }, 2*time.Second, 20*time.Millisecond)
	})

	t.Run("close cuts sleeps short", func(t *testing.T) {
		slow := newSim(t)
		slow.SetLatency(time.Hour)
		done := make(chan struct{})
		go func() {
			defer close(done)
			_, _ = client(t, slow).try(http.MethodGet, "/api/status/", nil)
		}()
		time.Sleep(50 * time.Millisecond)
		slow.Close()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatal("Close did not release a sleeping request")
		}
	})
}

func TestCallCounting(t *testing.T) {
	s, path := allocSetup(t)
	c := client(t, s)
	c.do(http.MethodGet, "/api/status/", nil)
	c.do(http.MethodGet, "/api/ipam/ip-addresses/?parent=10.50.0.0/24&limit=5", nil)
	c.do(http.MethodPost, path, []any{map[string]any{}})
	c.do(http.MethodPost, path, []any{map[string]any{}})
	c.do(http.MethodGet, "/api/ipam/ip-addresses/999/", nil)

	calls := s.Calls()
	require.Len(t, calls, 5)
	assert.Equal(t, Call{Method: "GET", Path: "/api/ipam/ip-addresses/", Query: "parent=10.50.0.0/24&limit=5", Status: 200}, calls[1].Untimed())
	assert.Equal(t, 404, calls[4].Status)
	assert.Equal(t, 2, s.CountCalls("POST", "/api/ipam/prefixes/"))
	assert.Equal(t, 2, s.CountCalls("get", "/api/ipam/ip-addresses/"))
	assert.Equal(t, 5, s.CountCalls("", "/api/"))
	assert.Equal(t, 0, s.CountCalls("DELETE", "/api/"))

	s.ResetCalls()
	assert.Empty(t, s.Calls())
	c.do(http.MethodGet, "/api/status/", nil)
	assert.Equal(t, 1, s.CountCalls("", "/api/status/"))
}

// gunicorn refuses a request line over 4094 bytes before NetBox sees it.
func TestRequestLineOverGunicornsLimitIsRefused(t *testing.T) {
	s := newSim(t)
	c := client(t, s)
	const fixed = len("GET /api/ipam/ip-addresses/?q= HTTP/1.1")
	for _, tc := range []struct {
		name       string
		line       int
		wantStatus int
	}{
		{"at the limit", 4094, http.StatusOK},
		{"one byte over", 4095, http.StatusBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, body, _ := c.do(http.MethodGet, "/api/ipam/ip-addresses/?q="+strings.Repeat("a", tc.line-fixed), nil)
			assert.Equal(t, tc.wantStatus, status, string(body))
			if tc.wantStatus == http.StatusBadRequest {
				assert.Contains(t, string(body), "Request Line is too large (4095 &gt; 4094)")
			}
		})
	}
}
