package wapisim

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var allocBody = map[string]any{"ipv4addr": "func:nextavailableip:10.20.0.0/24", "match_client": "RESERVED"}

func allocSetup(t *testing.T) (*Server, *apiClient) {
	s := newSim(t)
	s.AddNetwork("default", "10.20.0.0/24", nil)
	return s, client(t, s, writerUser)
}

func TestFaultStatus(t *testing.T) {
	for _, status := range []int{502, 503, 504, 500} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			s, c := allocSetup(t)
			s.InjectFault(Fault{Kind: FaultStatus, Status: status, PathContains: "fixedaddress"})

			got, body, resp := c.do(http.MethodPost, "fixedaddress", allocBody)
			require.Equal(t, status, got)
			assert.Equal(t, "text/html; charset=iso-8859-1", resp.Header.Get("Content-Type"))
			assert.Contains(t, body, fmt.Sprintf("<title>%d %s</title>", status, http.StatusText(status)))
			assert.Empty(t, s.Objects("fixedaddress"), "a failed request must not allocate")

			got, _, _ = c.do(http.MethodPost, "fixedaddress", allocBody)
			assert.Equal(t, http.StatusCreated, got, "the fault is consumed")
		})
	}
}

func TestFaultMatchingAndTimes(t *testing.T) {
	s, c := allocSetup(t)
	s.InjectFault(Fault{Kind: FaultStatus, Status: 503, Method: "POST", PathContains: "fixedaddress", Times: 2})
	s.InjectFault(Fault{Kind: FaultStatus, Status: 502})

	status, _, _ := c.do(http.MethodGet, "fixedaddress", nil)
	assert.Equal(t, 502, status, "GET skips the POST-only fault and takes the catch-all")
	for range 2 {
		status, _, _ = c.do(http.MethodPost, "fixedaddress", allocBody)
		assert.Equal(t, 503, status)
	}
	status, _, _ = c.do(http.MethodPost, "fixedaddress", allocBody)
	assert.Equal(t, 201, status, "Times is honoured")

	s.InjectFault(Fault{Kind: FaultStatus})
	s.ClearFaults()
	status, _, _ = c.do(http.MethodGet, "fixedaddress", nil)
	assert.Equal(t, 200, status)
}

func TestFaultDrop(t *testing.T) {
	s, c := allocSetup(t)
	s.InjectFault(Fault{Kind: FaultDrop, Method: "POST"})

	_, err := c.try(http.MethodPost, "fixedaddress", allocBody)
	require.Error(t, err, "the connection is closed without a response")
	assert.Empty(t, s.Objects("fixedaddress"), "a dropped request is not processed")
	require.Len(t, s.Calls(), 1)
	assert.Equal(t, Call{Method: "POST", Path: "/wapi/v2.12/fixedaddress", Status: 0}, s.Calls()[0].Untimed())

	status, _, _ := c.do(http.MethodPost, "fixedaddress", allocBody)
	assert.Equal(t, http.StatusCreated, status)
}

func TestFaultLoseResponse(t *testing.T) {
	s, c := allocSetup(t)
	hooked := make(chan Object, 1)
	s.OnAllocate(func(o Object) { hooked <- o })
	s.InjectFault(Fault{Kind: FaultLoseResponse, PathContains: "fixedaddress"})

	_, err := c.try(http.MethodPost, "fixedaddress", allocBody)
	require.Error(t, err, "the client never sees the response")
	fas := s.Objects("fixedaddress")
	require.Len(t, fas, 1, "the allocation happened anyway")
	assert.Equal(t, "10.20.0.1", fas[0].Addresses[0].String())
	assert.Equal(t, fas[0].Ref, (<-hooked).Ref)
	assert.Equal(t, http.StatusCreated, s.Calls()[0].Status, "the call records what the server produced")

	// A retry allocates a second address: the orphan is the caller's problem.
	status, body, _ := c.do(http.MethodPost, "fixedaddress?_return_fields=ipv4addr", allocBody)
	require.Equal(t, http.StatusCreated, status)
	assert.Contains(t, body, `"ipv4addr": "10.20.0.2"`)
}

func TestLatency(t *testing.T) {
	s, c := allocSetup(t)
	s.InjectFault(Fault{Kind: FaultLatency, Latency: 150 * time.Millisecond, PathContains: "fixedaddress"})
	start := time.Now()
	status, _, _ := c.do(http.MethodPost, "fixedaddress", allocBody)
	assert.Equal(t, http.StatusCreated, status, "processed normally after the delay")
	assert.GreaterOrEqual(t, time.Since(start), 150*time.Millisecond)

	start = time.Now()
	c.do(http.MethodGet, "networkview", nil)
	assert.Less(t, time.Since(start), 150*time.Millisecond, "the latency fault was consumed")

	s.SetLatency(100 * time.Millisecond)
	start = time.Now()
	status, _, _ = client(t, s, "").do(http.MethodGet, "networkview", nil)
	assert.Equal(t, http.StatusUnauthorized, status)
	assert.GreaterOrEqual(t, time.Since(start), 100*time.Millisecond, "latency applies to every request")

	t.Run("client timeout does not stop processing", func(t *testing.T) {
		s.SetLatency(0)
		s.InjectFault(Fault{Kind: FaultLatency, Latency: 300 * time.Millisecond, Method: "POST"})
		impatient := client(t, s, writerUser)
		impatient.hc.Timeout = 50 * time.Millisecond
		_, err := impatient.try(http.MethodPost, "fixedaddress", allocBody)
		require.Error(t, err)
		require.Eventually(t, func() bool { return len(s.Objects("fixedaddress")) == 2 }, 2*time.Second, 20*time.Millisecond)
	})

	t.Run("close cuts sleeps short", func(t *testing.T) {
		slow := newSim(t)
		slow.SetLatency(time.Hour)
		done := make(chan struct{})
		go func() {
			defer close(done)
			_, _ = client(t, slow, adminUser).try(http.MethodGet, "networkview", nil)
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
	s, c := allocSetup(t)
	c.do(http.MethodGet, "/wapi/v2.5/networkview?name=default", nil)
	c.do(http.MethodPost, "fixedaddress", allocBody)
	ref := c.post("fixedaddress", allocBody)
	c.do(http.MethodGet, ref, nil)
	c.do(http.MethodDelete, ref, nil)
	c.do(http.MethodDelete, ref, nil)

	calls := s.Calls()
	require.Len(t, calls, 6)
	assert.Equal(t, Call{Method: "GET", Path: "/wapi/v2.5/networkview", Query: "name=default", Status: 200}, calls[0].Untimed())
	assert.Equal(t, 404, calls[5].Status)
	assert.Equal(t, 2, s.CountCalls("POST", "/wapi/v2.12/fixedaddress"))
	assert.Equal(t, 5, s.CountCalls("", "/wapi/v2.12/"))
	assert.Equal(t, 2, s.CountObjectCalls("POST", "fixedaddress"))
	assert.Equal(t, 2, s.CountObjectCalls("delete", "fixedaddress"), "calls by reference count for their type")
	assert.Equal(t, 5, s.CountObjectCalls("", "fixedaddress"))
	assert.Equal(t, 1, s.CountObjectCalls("GET", "networkview"), "whatever the version")

	s.ResetCalls()
	assert.Empty(t, s.Calls())
}

func TestGoClientRetriesFailedRequests(t *testing.T) {
	// infoblox-go-client v2.12.0 repeats a failed request once, so a single
	// 503 is invisible to its callers but costs a second call.
	s := newSim(t)
	s.AddNetwork("default", "10.21.0.0/24", nil)
	_, om := objectManager(t, s, writerUser)
	s.InjectFault(Fault{Kind: FaultStatus, Status: 503, Method: "POST"})
	fa, err := om.AllocateIP("default", "10.21.0.0/24", "", false, "", "", "", nil, "RESERVED", "", "", nil, "",
		false, nil, false)
	require.NoError(t, err)
	assert.Equal(t, "10.21.0.1", fa.IPv4Address)
	assert.Equal(t, 2, s.CountObjectCalls("POST", "fixedaddress"))

	s.InjectFault(Fault{Kind: FaultStatus, Status: 503, Method: "POST", Times: 2})
	_, err = om.AllocateIP("default", "10.21.0.0/24", "", false, "", "", "", nil, "RESERVED", "", "", nil, "",
		false, nil, false)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "503")
}
