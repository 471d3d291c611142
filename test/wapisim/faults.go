package wapisim

import (
	"bytes"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/httpfault"
)

// Fault kinds and types, shared with the other simulators.
type (
	FaultKind  = httpfault.Kind
	Fault      = httpfault.Fault
	FaultQueue = httpfault.Queue
)

// Fault kinds. FaultStatus answers with the appliance's httpd error page
// (HTML) without processing the request.
const (
	FaultStatus       = httpfault.Status
	FaultDrop         = httpfault.Drop
	FaultLoseResponse = httpfault.LoseResponse
	FaultLatency      = httpfault.Latency
)

// SetThrottle answers 429 with Retry-After to the requests beyond l, as a
// rate-limiting proxy in front of the grid does; the zero limit accepts
// everything.
func (s *Server) SetThrottle(l httpfault.ThrottleLimit) { s.throttle.Set(l) }

// ThrottleArrivals lists the requests that reached the server since the
// last SetThrottle.
func (s *Server) ThrottleArrivals() []httpfault.Arrival { return s.throttle.Arrivals() }

// InjectFault queues a fault. Faults apply to authenticated /wapi/ calls.
func (s *Server) InjectFault(f Fault) { s.faults.Add(f) }

// ClearFaults drops all pending faults.
func (s *Server) ClearFaults() { s.faults.Clear() }

// SetLatency adds d to every request, before anything else happens.
func (s *Server) SetLatency(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.latency = d
}

// serveWithFaults applies the first matching fault around handle, which
// processes the call and returns the status it wrote.
func (s *Server) serveWithFaults(w http.ResponseWriter, r *http.Request, handle func(http.ResponseWriter) int) {
	httpfault.Serve(w, r, &s.faults, &s.calls, s.closing, WriteFaultStatus, handle)
}

// sleep waits d unless the server is closing (then it returns false).
func (s *Server) sleep(d time.Duration) bool { return httpfault.Sleep(d, s.closing) }

// CloseWithoutResponse cuts the connection without an answer.
func CloseWithoutResponse(w http.ResponseWriter) { httpfault.CloseWithoutResponse(w) }

// WriteFaultStatus answers with status as the appliance's Apache httpd does
// when the WAPI backend fails or is restarting: an HTML error page (best
// guess for the exact wording; the page format is Apache's, as for NIOS's
// 401 and 403). It returns status.
func WriteFaultStatus(w http.ResponseWriter, status int) int {
	text := http.StatusText(status)
	var msg string
	switch status {
	case http.StatusBadGateway:
		msg = "The proxy server received an invalid\nresponse from an upstream server."
	case http.StatusServiceUnavailable:
		msg = "The server is temporarily unable to service your\nrequest due to maintenance downtime or capacity\n" +
			"problems. Please try again later."
	case http.StatusGatewayTimeout:
		msg = "The gateway did not receive a timely response\nfrom the upstream server or application."
	default:
		msg = fmt.Sprintf("The server answered %d %s.", status, text)
	}
	return writeApachePage(w, status, text, msg)
}

// WriteTo matches, for Fault.Match, a write of method (DELETE, PUT) to an
// object of objectType ("" for any): by reference, or as an operation of a
// request object, as the provider guards its writes.
func WriteTo(method, objectType string) func(string, string, []byte) bool {
	return func(m, path string, body []byte) bool {
		if strings.HasSuffix(path, "/"+typeRequest) {
			return m == http.MethodPost && bytes.Contains(body, []byte(`"method":"`+method+`"`)) &&
				(objectType == "" || bytes.Contains(body, []byte(`"object":"`+objectType)))
		}
		return m == method && (objectType == "" || strings.Contains(path, "/"+objectType))
	}
}
