package wapisim

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
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
// processes the call and returns the status it wrote. Every call is
// recorded before the client can see any answer.
func (s *Server) serveWithFaults(w http.ResponseWriter, r *http.Request, handle func(http.ResponseWriter) int) {
	f, faulty := s.faults.Take(r.Method, r.URL.Path)
	if faulty && f.Kind == FaultLatency && !s.sleep(f.Latency) {
		s.record(r, 0)
		CloseWithoutResponse(w)
		return
	}
	switch {
	case faulty && f.Kind == FaultStatus:
		_, _ = io.Copy(io.Discard, r.Body)
		rec := httptest.NewRecorder()
		WriteFaultStatus(rec, f.Status)
		s.record(r, f.Status)
		copyRecorded(w, rec)
	case faulty && f.Kind == FaultDrop:
		// Drain the body so the client sees a clean close, not a reset.
		_, _ = io.Copy(io.Discard, r.Body)
		s.record(r, 0)
		CloseWithoutResponse(w)
	default:
		rec := httptest.NewRecorder()
		status := handle(rec)
		s.record(r, status)
		if faulty && f.Kind == FaultLoseResponse {
			CloseWithoutResponse(w)
			return
		}
		copyRecorded(w, rec)
	}
}

func copyRecorded(w http.ResponseWriter, rec *httptest.ResponseRecorder) {
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.WriteHeader(rec.Code)
	_, _ = w.Write(rec.Body.Bytes())
}

// sleep waits d unless the server is closing (then it returns false). The
// client going away does not cut it short.
func (s *Server) sleep(d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-s.closing:
		return false
	}
}

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
