package netboxsim

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

// Fault kinds; FaultStatus answers 502/503/504 with an nginx page and 500
// with NetBox's JSON error.
const (
	FaultStatus       = httpfault.Status
	FaultDrop         = httpfault.Drop
	FaultLoseResponse = httpfault.LoseResponse
	FaultLatency      = httpfault.Latency
)

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
	f, faulty := s.faults.Take(r.Method, r.URL.Path)
	if faulty && f.Kind == FaultLatency && !s.sleep(f.Latency) {
		s.record(r, 0)
		CloseWithoutResponse(w)
		return
	}
	switch {
	case faulty && f.Kind == FaultStatus:
		_, _ = io.Copy(io.Discard, r.Body)
		s.record(r, f.Status)
		WriteFaultStatus(w, f.Status)
	case faulty && f.Kind == FaultDrop:
		// Drain the body so the client sees a clean close, not a reset.
		_, _ = io.Copy(io.Discard, r.Body)
		s.record(r, 0)
		CloseWithoutResponse(w)
	default:
		rec := httptest.NewRecorder()
		status := s.dispatch(rec, r, rt, id)
		s.record(r, status)
		if faulty && f.Kind == FaultLoseResponse {
			CloseWithoutResponse(w)
			return
		}
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes())
	}
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
	default:
		return writeResponse(w, errDetail(status, text))
	}
}
