package wapisim

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/httpfault"
)

const maxBodyBytes = 10 << 20

// Server is a simulated Infoblox grid master answering WAPI. It is safe for
// concurrent use.
type Server struct {
	ts        *httptest.Server
	ca        *authority // nil for plain HTTP
	closing   chan struct{}
	closeOnce sync.Once

	mu       sync.Mutex // guards everything below; held for a whole WAPI request
	db       *store
	users    map[string]user
	sessions map[string]string // ibapauth cookie value -> user name
	calls    httpfault.Log
	faults   FaultQueue
	latency  time.Duration
	onAlloc  func(Object)
	pageTTL  time.Duration    // how long a next_page_id stays valid
	clock    func() time.Time // time.Now unless SetClock

	throttle httpfault.Throttle // has its own lock
}

// Call is one request to /wapi/ that passed authentication (or was dropped
// by an injected fault before any processing).
type Call = httpfault.Call

// Option configures a Server.
type Option func(*Server)

// WithUser registers a user at start; see AddUser.
func WithUser(name, password string, p Permissions) Option {
	return func(s *Server) { s.users[name] = user{password: password, perms: p} }
}

// New starts a plain-HTTP server on 127.0.0.1.
func New(opts ...Option) *Server { return start(false, opts) }

// NewTLS starts a server on 127.0.0.1 over HTTPS, with a certificate signed
// by a CA generated for this server (see CACertPEM). It asks clients for a
// certificate and accepts those the same CA signed (see IssueClientCert).
func NewTLS(opts ...Option) *Server { return start(true, opts) }

func start(useTLS bool, opts []Option) *Server {
	// A fresh system, maybe where an earlier one listened: whatever this
	// process remembers of that one's setup is not this one's.
	backends.ForgetConfirmedSetups()
	s := &Server{
		closing:  make(chan struct{}),
		db:       newStore(),
		users:    map[string]user{},
		sessions: map[string]string{},
		pageTTL:  defaultPageTTL,
		clock:    time.Now,
	}
	for _, o := range opts {
		o(s)
	}
	s.ts = httptest.NewUnstartedServer(http.HandlerFunc(s.serveHTTP))
	// Dropped connections and clients rejecting the certificate are expected
	// in fault tests; keep them out of the test log.
	s.ts.Config.ErrorLog = log.New(io.Discard, "", 0)
	if useTLS {
		s.ca = newAuthority()
		pool := x509.NewCertPool()
		pool.AddCert(s.ca.cert)
		s.ts.TLS = &tls.Config{
			Certificates: []tls.Certificate{s.ca.serverCert()},
			ClientAuth:   tls.VerifyClientCertIfGiven,
			ClientCAs:    pool,
			// The go client enables renegotiation; HTTP/1.1 keeps
			// hijacking (used by faults) possible.
			NextProtos: []string{"http/1.1"},
		}
		s.ts.StartTLS()
	} else {
		s.ts.Start()
	}
	return s
}

// URL is the base URL without trailing slash, e.g. http://127.0.0.1:1234.
func (s *Server) URL() string { return s.ts.URL }

// Host is the server's IP address, for ibclient.HostConfig.Host.
func (s *Server) Host() string {
	h, _, _ := net.SplitHostPort(s.ts.Listener.Addr().String())
	return h
}

// Port is the server's port, for ibclient.HostConfig.Port.
func (s *Server) Port() string {
	_, p, _ := net.SplitHostPort(s.ts.Listener.Addr().String())
	return p
}

// Close stops the server, cutting injected latencies short.
func (s *Server) Close() {
	s.closeOnce.Do(func() {
		close(s.closing)
		s.ts.Close()
	})
}

// OnAllocate registers a hook called once per object created with a
// next-available address (func:nextavailableip or _object_function), with a
// copy of the object. It runs after the object is stored and before the
// response is written, outside the server lock so that it may call the
// seeding API (e.g. SetEA, DeleteObject) to act mid-flight.
func (s *Server) OnAllocate(fn func(Object)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.onAlloc = fn
}

// SetPageTTL sets how long a next_page_id of a paged search stays valid
// (default 10 minutes, a best guess).
func (s *Server) SetPageTTL(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pageTTL = d
}

// SetClock replaces the clock that page-id expiry reads, so that tests can
// let page ids expire without waiting.
func (s *Server) SetClock(now func() time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.clock = now
}

// now reads the clock; the caller holds s.mu.
func (s *Server) now() time.Time { return s.clock() }

// Calls returns the recorded calls in order.
func (s *Server) Calls() []Call { return s.calls.Calls() }

// ResetCalls forgets the recorded calls.
func (s *Server) ResetCalls() { s.calls.Reset() }

// CountCalls counts recorded calls with the method ("" = any) whose path
// starts with pathPrefix, e.g. "/wapi/v2.12/fixedaddress".
func (s *Server) CountCalls(method, pathPrefix string) int { return s.calls.Count(method, pathPrefix) }

// CountObjectCalls counts recorded calls with the method ("" = any) on an
// object type, whatever the WAPI version: searches and creates
// ("/wapi/v2.12/fixedaddress") as well as calls by reference
// ("/wapi/v2.5/fixedaddress/ZG5z...:10.0.0.5/default").
func (s *Server) CountObjectCalls(method, objtype string) int {
	n := 0
	for _, c := range s.calls.Calls() {
		if method != "" && !strings.EqualFold(c.Method, method) {
			continue
		}
		if _, rest, ok := splitWAPIPath(c.Path); ok {
			if t, _, _ := strings.Cut(rest, "/"); t == objtype {
				n++
			}
		}
	}
	return n
}

// splitWAPIPath splits "/wapi/v2.12/<rest>" into "2.12" and "<rest>".
func splitWAPIPath(p string) (version, rest string, ok bool) {
	after, found := strings.CutPrefix(p, "/wapi/v")
	if !found {
		return "", "", false
	}
	version, rest, ok = strings.Cut(after, "/")
	return version, rest, ok && rest != ""
}

// supportedVersion accepts the WAPI versions of NIOS up to 9.0 (WAPI 2.13):
// 1.0 … 1.7.x and 2.0 … 2.13.x, with an optional third component.
func supportedVersion(v string) bool {
	parts := strings.Split(v, ".")
	if len(parts) < 2 || len(parts) > 3 {
		return false
	}
	n := make([]int, len(parts))
	for i, p := range parts {
		x, err := strconv.Atoi(p)
		if err != nil || x < 0 || strconv.Itoa(x) != p {
			return false
		}
		n[i] = x
	}
	switch n[0] {
	case 1:
		return n[1] <= 7
	case 2:
		return n[1] <= 13
	}
	return false
}

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
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
	version, rest, ok := splitWAPIPath(r.URL.Path)
	if v, found := strings.CutPrefix(r.URL.Path, "/wapi/v"); found && strings.HasSuffix(v, "/") &&
		!strings.Contains(strings.TrimSuffix(v, "/"), "/") && r.URL.Query().Has("_schema") {
		// GET /wapi/v2.12/?_schema: the grid's schema.
		version, rest, ok = strings.TrimSuffix(v, "/"), "", true
	}
	if !ok {
		// The appliance's httpd answers paths outside /wapi/ itself.
		writeApachePage(w, http.StatusNotFound, "Not Found",
			fmt.Sprintf("The requested URL %s was not found on this server.", r.URL.Path))
		return
	}
	// httpd authenticates before WAPI looks at the version or object type.
	u, cookie, ok := s.authenticate(r)
	if !ok {
		writeApachePage(w, http.StatusUnauthorized, "Authorization Required", unauthorizedText)
		return
	}
	s.serveWithFaults(w, r, func(w http.ResponseWriter) int {
		if cookie != "" {
			http.SetCookie(w, &http.Cookie{Name: cookieName, Value: cookie, Path: "/", HttpOnly: true, Secure: r.TLS != nil})
		}
		if !supportedVersion(version) {
			// terraform-provider-infoblox#467: "400('400 Bad Request')
			// Contents: Version 2.12.3 not supported" (plain text).
			w.Header().Set("Content-Type", "text/plain")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = fmt.Fprintf(w, "Version %s not supported", version)
			return http.StatusBadRequest
		}
		return s.dispatch(w, r, u, rest)
	})
}

// request is what a handler sees.
type request struct {
	s       *Server
	r       *http.Request
	user    user
	typ     string // object type
	ref     string // "" for type-level calls
	query   url.Values
	body    []byte
	allocs  []*object    // objects created with a next-available address
	pending []netip.Addr // addresses allocated so far in this request
}

// response is what a handler produces; body is rendered to JSON.
type response struct {
	status int
	body   any
}

func errResponse(e wapiError) response { return response{e.status, e} }

// dispatch routes a WAPI call, runs it under the server lock and writes the
// response. It returns the status written.
func (s *Server) dispatch(w http.ResponseWriter, r *http.Request, u user, rest string) int {
	// Read the body before taking the lock so a slow client blocks nobody.
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	if err != nil {
		return writeResponse(w, errResponse(errProto("Cannot read request body: %v", err)))
	}
	c := &request{s: s, r: r, user: u, query: r.URL.Query(), body: raw}
	c.typ, c.ref = rest, ""
	if t, _, isRef := strings.Cut(rest, "/"); isRef {
		c.typ, c.ref = t, rest
	}
	if r.Method == http.MethodGet && c.ref == "" && c.query.Has("_schema") && (rest == "" || knownType(c.typ)) {
		version, _, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/wapi/v"), "/")
		return writeResponse(w, schemaResponse(version, c.typ, c.query))
	}
	if c.ref == "" && c.typ == "logout" && r.Method == http.MethodPost {
		// Connector.Logout: NIOS drops the session cookie.
		s.mu.Lock()
		if ck, err := r.Cookie(cookieName); err == nil {
			delete(s.sessions, ck.Value)
		}
		s.mu.Unlock()
		return writeResponse(w, response{http.StatusOK, map[string]any{}})
	}
	if c.ref == "" && c.typ == typeRequest {
		return s.serveRequestObject(w, r, u, raw)
	}
	if !knownType(c.typ) {
		return writeResponse(w, errResponse(errUnknownObjectType(c.typ)))
	}
	if !u.may(r.Method, c.typ, c.ref) {
		return writeForbidden(w, r)
	}
	s.mu.Lock()
	resp := c.handle(r.Method)
	var created []Object
	hook := s.onAlloc
	if resp.status < 300 && hook != nil {
		for _, o := range c.allocs {
			created = append(created, s.db.export(o))
		}
	}
	s.mu.Unlock()
	for _, o := range created {
		hook(o)
	}
	return writeResponse(w, resp)
}

// may says whether the user may call method on the object type: reads are
// open to every user, writes need Write, and defining extensible
// attributes needs Superuser.
func (u user) may(method, typ, ref string) bool {
	switch {
	case method == http.MethodGet:
		return true
	case !u.perms.Write && !u.perms.Superuser:
		return false
	case method == http.MethodPost && ref == "" && typ == typeEADef:
		return u.perms.Superuser
	}
	return true
}

// handle runs one WAPI call; the caller holds s.mu.
func (c *request) handle(method string) response {
	switch {
	case method != http.MethodPost && c.query.Has("_function"):
		// Infoblox-API-Python#17: a GET of a function.
		return errResponse(errProto("Function %s illegal with this method", c.query.Get("_function")))
	case method == http.MethodGet && c.ref == "":
		return c.search()
	case method == http.MethodGet:
		return c.get()
	case method == http.MethodPost && c.ref == "":
		return c.create()
	case method == http.MethodPost && c.query.Has("_function"):
		return c.function()
	case method == http.MethodPut && c.ref != "":
		return c.update()
	case method == http.MethodDelete && c.ref != "":
		return c.delete()
	}
	// Best guess: WAPI answers an unsupported method/target pair as a
	// protocol error.
	return errResponse(errProto("Method %s not allowed for this request", method))
}

// writeResponse writes a JSON answer the way NIOS formats it: errors as the
// pretty-printed { "Error": ..., "code": ..., "text": ... } object, results
// as JSON (a string for refs, a list for searches). It returns the status.
func writeResponse(w http.ResponseWriter, resp response) int {
	var b []byte
	if e, ok := resp.body.(wapiError); ok {
		b = []byte(fmt.Sprintf("{ \"Error\": %s, \n  \"code\": %s, \n  \"text\": %s\n}",
			jsonString(e.class), jsonString(e.code), jsonString(e.text)))
	} else {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "    ")
		if err := enc.Encode(resp.body); err != nil {
			panic(err) // the simulator only renders plain data
		}
		b = bytes.TrimRight(buf.Bytes(), "\n")
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(resp.status)
	_, _ = w.Write(b)
	return resp.status
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

const unauthorizedText = "This server could not verify that you\nare authorized to access the document\nrequested.  " +
	"Either you supplied the wrong\ncredentials (e.g., bad password), or your\nbrowser doesn't understand how " +
	"to supply\nthe credentials required."

// writeApachePage answers as the appliance's Apache httpd does, with an
// HTML page (401 text as captured from a NIOS trial appliance, 403 as in
// kubernetes-sigs/external-dns#3234).
func writeApachePage(w http.ResponseWriter, status int, title, text string) int {
	if status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Basic realm="InfoBlox ONE Platform"`)
	}
	w.Header().Set("Content-Type", "text/html; charset=iso-8859-1")
	w.WriteHeader(status)
	_, _ = fmt.Fprintf(w, "<!DOCTYPE HTML PUBLIC \"-//IETF//DTD HTML 2.0//EN\">\n<html><head>\n<title>%d %s</title>\n"+
		"</head><body>\n<h1>%s</h1>\n<p>%s</p>\n</body></html>\n", status, title, title, text)
	return status
}

// writeForbidden answers a write the user may not make: NIOS's httpd 403
// page (kubernetes-sigs/external-dns#3234 shows it for a WAPI user lacking
// permissions).
func writeForbidden(w http.ResponseWriter, r *http.Request) int {
	return writeApachePage(w, http.StatusForbidden, "Forbidden",
		fmt.Sprintf("You don't have permission to access %s\non this server.", r.URL.Path))
}
