// Package netboxsim is an in-process HTTP server that answers the subset of
// the NetBox 4.x REST API used by the IPAM backend the way NetBox 4.7.3
// does: paths with trailing slashes, status codes, JSON shapes strict enough
// for go-netbox, and NetBox's error bodies. IP addresses are read, written
// and allocated (available-ips, under the parent's lock); prefixes are
// read, written and carved (available-prefixes, first fit, all or none,
// under one lock for every parent: prefixwrite.go). Tests seed it, inject
// faults and inspect what clients did.
package netboxsim

import (
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/httpfault"
)

const (
	netboxVersion = "4.7.3"
	apiVersion    = "4.3" // NetBox sends it in the API-Version header
	maxBodyBytes  = 10 << 20
)

// Server is a simulated NetBox. It is safe for concurrent use.
type Server struct {
	ts        *httptest.Server
	routes    []route
	closing   chan struct{} // closed by Close to cut sleeps short
	closeOnce sync.Once

	mu      sync.Mutex // guards everything below; held for a whole API request
	db      *store
	tokens  map[string]tokenInfo
	calls   httpfault.Log
	faults  FaultQueue
	latency time.Duration
	onAlloc func([]IPAddress)
	onCarve func([]Prefix)
	// allocCost is how long an allocation holds its parent's lock.
	allocCost allocationCost
	// maxPageSize is MAX_PAGE_SIZE; 0 is NetBox's default.
	maxPageSize int

	throttle httpfault.Throttle // has its own lock
	parents  parentLocks        // has its own lock
}

// SetMaxPageSize sets NetBox's MAX_PAGE_SIZE, the most objects a list
// answers whatever the limit asked (1000 by default, which an administrator
// may lower).
func (s *Server) SetMaxPageSize(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.maxPageSize = n
}

// Call is one request to a known endpoint that passed authentication
// (redirects, unknown URLs and rejected tokens are not recorded).
type Call = httpfault.Call

// New starts a plain-HTTP server on 127.0.0.1.
func New() *Server { return start(false) }

// NewTLS starts a server on 127.0.0.1 over TLS; see CACertPEM.
func NewTLS() *Server { return start(true) }

func start(useTLS bool) *Server {
	// A fresh system, maybe where an earlier one listened: whatever this
	// process remembers of that one's setup is not this one's.
	backends.ForgetConfirmedSetups()
	s := &Server{closing: make(chan struct{}), db: newStore(), tokens: map[string]tokenInfo{}}
	s.routes = s.buildRoutes()
	s.ts = httptest.NewUnstartedServer(http.HandlerFunc(s.serveHTTP))
	// Dropped connections and clients rejecting the certificate are expected
	// in fault tests; keep them out of the test log.
	s.ts.Config.ErrorLog = log.New(io.Discard, "", 0)
	if useTLS {
		s.ts.StartTLS()
	} else {
		s.ts.Start()
	}
	return s
}

// URL is the base URL without trailing slash, e.g. http://127.0.0.1:1234.
func (s *Server) URL() string { return s.ts.URL }

// CACertPEM returns the PEM of the TLS server's certificate (nil for HTTP).
func (s *Server) CACertPEM() []byte {
	cert := s.ts.Certificate()
	if cert == nil {
		return nil
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw})
}

// Close stops the server, cutting injected latencies short.
func (s *Server) Close() {
	s.closeOnce.Do(func() {
		close(s.closing)
		s.ts.Close()
	})
}

// OnAllocate registers a hook called after each successful available-ips
// allocation, with copies of the created IP addresses. It runs outside the
// server lock, before the response is written.
func (s *Server) OnAllocate(fn func(created []IPAddress)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.onAlloc = fn
}

// Calls returns the recorded calls in order.
func (s *Server) Calls() []Call { return s.calls.Calls() }

// ResetCalls forgets the recorded calls.
func (s *Server) ResetCalls() { s.calls.Reset() }

// CountCalls counts recorded calls with the method ("" = any) whose path
// starts with pathPrefix.
func (s *Server) CountCalls(method, pathPrefix string) int { return s.calls.Count(method, pathPrefix) }

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	if line := len(r.Method) + 1 + len(r.RequestURI) + 1 + len(r.Proto); line > gunicornMaxRequestLine {
		writeRequestLineTooLarge(w, line)
		return
	}
	// The rate limiter sits in front of everything, as a proxy's would.
	done, admitted := s.throttle.Admit(w, r, &s.calls, WriteFaultStatus)
	if !admitted {
		return
	}
	defer done()
	s.mu.Lock()
	latency := s.latency
	s.mu.Unlock()
	if !s.sleep(latency) {
		CloseWithoutResponse(w)
		return
	}

	rt, id, ok := s.match(r.URL.Path)
	if !ok {
		// Django's APPEND_SLASH: redirect when the slashed path exists.
		if _, _, found := s.match(r.URL.Path + "/"); found && !strings.HasSuffix(r.URL.Path, "/") {
			target := r.URL.Path + "/"
			if r.URL.RawQuery != "" {
				target += "?" + r.URL.RawQuery
			}
			http.Redirect(w, r, target, http.StatusMovedPermanently)
			return
		}
		writeNotFoundPage(w)
		return
	}
	if detail := s.authenticate(r); detail != "" {
		writeResponse(w, errDetail(http.StatusForbidden, detail))
		return
	}
	s.serveWithFaults(w, r, rt, id)
}

// dispatch runs the route's handler under the server lock and writes its
// response. It returns the status written.
func (s *Server) dispatch(w http.ResponseWriter, r *http.Request, rt *route, id string) int {
	h, ok := rt.methods[r.Method]
	if !ok {
		return writeResponse(w, errDetail(http.StatusMethodNotAllowed, fmt.Sprintf("Method \"%s\" not allowed.", r.Method)))
	}
	// Read the body before taking the lock so a slow client blocks nobody.
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	if err != nil {
		return writeResponse(w, errDetail(http.StatusBadRequest, "Request body could not be read: "+err.Error()))
	}
	if r.Method == http.MethodPost && (strings.HasSuffix(r.URL.Path, "/available-ips/") || strings.HasSuffix(r.URL.Path, "/available-prefixes/")) {
		unlock, ok := s.holdParent(lockKey(r.URL.Path), raw)
		if !ok {
			CloseWithoutResponse(w)
			return 0
		}
		defer unlock()
	}
	c := &reqCtx{s: s, r: r, raw: raw, id: id}
	s.mu.Lock()
	c.rend = renderer{base: baseURL(r), st: s.db}
	resp := h(c)
	s.mu.Unlock()
	for _, fn := range c.after {
		fn()
	}
	if c.etag != "" {
		w.Header().Set("ETag", c.etag)
	}
	return writeResponse(w, resp)
}

func baseURL(r *http.Request) string {
	if r.TLS != nil {
		return "https://" + r.Host
	}
	return "http://" + r.Host
}

// response is what a handler produces; body is rendered to JSON.
type response struct {
	status int
	body   any
}

func errDetail(status int, detail string) response {
	return response{status, map[string]string{"detail": detail}}
}

func writeResponse(w http.ResponseWriter, resp response) int {
	w.Header().Set("API-Version", apiVersion)
	if resp.status == http.StatusNoContent {
		w.WriteHeader(resp.status)
		return resp.status
	}
	b := marshal(resp.body)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(resp.status)
	_, _ = w.Write(b)
	return resp.status
}

// writeNotFoundPage answers unknown URLs like Django does: with an HTML page,
// before any authentication.
func writeNotFoundPage(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(http.StatusNotFound)
	_, _ = io.WriteString(w, "<!DOCTYPE html>\n<html lang=\"en\">\n<head><title>Page Not Found | NetBox</title></head>\n"+
		"<body>\n<h1>Page Not Found</h1>\n<p>The requested page does not exist.</p>\n</body>\n</html>\n")
}

// gunicornMaxRequestLine is gunicorn's default limit_request_line, which
// NetBox's deployments keep.
const gunicornMaxRequestLine = 4094

// writeRequestLineTooLarge answers as gunicorn does to a request line over
// its limit, before NetBox sees the request.
func writeRequestLineTooLarge(w http.ResponseWriter, line int) {
	w.Header().Set("Content-Type", "text/html")
	w.Header().Set("Connection", "close")
	w.WriteHeader(http.StatusBadRequest)
	_, _ = fmt.Fprintf(w, "<html>\n  <head>\n    <title>Bad Request</title>\n  </head>\n  <body>\n    <h1><p>Bad Request</p></h1>\n"+
		"    Request Line is too large (%d &gt; %d)\n  </body>\n</html>\n", line, gunicornMaxRequestLine)
}
