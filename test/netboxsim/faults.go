package netboxsim

import (
	"fmt"
	"net/http"
	"time"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/httpfault"
)

// Fault kinds and types, shared with the other simulators.
type (
	FaultKind  = httpfault.Kind
	Fault      = httpfault.Fault
	FaultQueue = httpfault.Queue
)

// Fault kinds; FaultStatus answers 502/503/504 with an nginx page and 500
// with NetBox's JSON error.
const (
	FaultStatus       = httpfault.Status
	FaultDrop         = httpfault.Drop
	FaultLoseResponse = httpfault.LoseResponse
	FaultLatency      = httpfault.Latency
)

// SetThrottle answers 429 with Retry-After to the requests beyond l, as
// NetBox behind a rate-limiting proxy (or with REST framework throttling)
// does; the zero limit accepts everything.
func (s *Server) SetThrottle(l httpfault.ThrottleLimit) { s.throttle.Set(l) }

// ThrottleArrivals lists the requests that reached the server since the
// last SetThrottle.
func (s *Server) ThrottleArrivals() []httpfault.Arrival { return s.throttle.Arrivals() }

// InjectFault queues a fault.
func (s *Server) InjectFault(f Fault) { s.faults.Add(f) }

// ClearFaults drops all pending faults.
func (s *Server) ClearFaults() { s.faults.Clear() }

// SetLatency adds d to every request, before anything else happens.
func (s *Server) SetLatency(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.latency = d
}

func (s *Server) serveWithFaults(w http.ResponseWriter, r *http.Request, rt *route, id string) {
	httpfault.Serve(w, r, &s.faults, &s.calls, s.closing, WriteFaultStatus,
		func(w http.ResponseWriter) int { return s.dispatch(w, r, rt, id) })
}

// sleep waits d unless the server is closing (then it returns false).
func (s *Server) sleep(d time.Duration) bool { return httpfault.Sleep(d, s.closing) }

// CloseWithoutResponse cuts the connection without an answer.
func CloseWithoutResponse(w http.ResponseWriter) { httpfault.CloseWithoutResponse(w) }

// WriteFaultStatus answers with status as the layer that failed would: an
// nginx page for 502, 503 and 504, NetBox's JSON error body otherwise. It
// returns status.
func WriteFaultStatus(w http.ResponseWriter, status int) int {
	text := http.StatusText(status)
	switch status {
	case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(status)
		_, _ = fmt.Fprintf(w, "<html>\r\n<head><title>%d %s</title></head>\r\n<body>\r\n<center><h1>%d %s</h1></center>\r\n"+
			"<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n", status, text, status, text)
		return status
	case http.StatusInternalServerError:
		return writeResponse(w, pythonCrash("OperationalError", "server closed the connection unexpectedly"))
	case http.StatusTooManyRequests:
		if wait := w.Header().Get("Retry-After"); wait != "" {
			// REST framework's throttling, which says how long to wait.
			return writeResponse(w, errDetail(status, fmt.Sprintf("Request was throttled. Expected available in %s seconds.", wait)))
		}
		return writeResponse(w, errDetail(status, text))
	default:
		return writeResponse(w, errDetail(status, text))
	}
}
