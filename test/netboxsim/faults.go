package netboxsim

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"
)

// FaultKind says how an injected fault disturbs a request.
type FaultKind int

const (
	// FaultStatus replies with Status without processing the request: an
	// nginx HTML page for 502/503/504, NetBox's JSON error for 500.
	FaultStatus FaultKind = iota
	// FaultDrop closes the connection without reply and without processing.
	FaultDrop
	// FaultLoseResponse processes the request fully (e.g. allocates), then
	// closes the connection without replying.
	FaultLoseResponse
	// FaultLatency sleeps Latency, then processes normally. The request is
	// processed even if the client gave up meanwhile, as NetBox would.
	FaultLatency
)

// Fault is consumed, in order of injection, by the first matching requests.
// Go's HTTP client silently retries idempotent requests (GET) whose reused
// connection dies, so a drop on a GET may go unnoticed by the caller.
type Fault struct {
	Kind         FaultKind
	Method       string // "" = any
	PathContains string
	Times        int // matching requests affected; default 1
	Status       int // FaultStatus; default 503
	Latency      time.Duration
}

// FaultQueue holds injected faults until requests consume them. The
// simulator uses one, and so does any proxy that injects the same faults.
type FaultQueue struct {
	mu     sync.Mutex
	faults []*Fault
}

// Add queues a fault, with its defaults applied.
func (q *FaultQueue) Add(f Fault) {
	if f.Times <= 0 {
		f.Times = 1
	}
	if f.Kind == FaultStatus && f.Status == 0 {
		f.Status = http.StatusServiceUnavailable
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.faults = append(q.faults, &f)
}

// Clear drops all pending faults.
func (q *FaultQueue) Clear() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.faults = nil
}

// Take consumes one use of the first fault matching the request.
func (q *FaultQueue) Take(method, path string) (Fault, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for i, f := range q.faults {
		if (f.Method == "" || strings.EqualFold(f.Method, method)) && strings.Contains(path, f.PathContains) {
			f.Times--
			if f.Times == 0 {
				q.faults = append(q.faults[:i:i], q.faults[i+1:]...)
			}
			return *f, true
		}
	}
	return Fault{}, false
}

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

// CloseWithoutResponse cuts the connection without an answer, as a
// crashed proxy or a network fault would.
func CloseWithoutResponse(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		panic("netboxsim: connection cannot be hijacked (HTTP/2?)")
	}
	conn, _, err := hj.Hijack()
	if err == nil {
		_ = conn.Close()
	}
}

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
