package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/httpfault"
)

// faultKind is what the proxy does to one request.
type faultKind int

const (
	faultNone faultKind = iota
	// fault5xx answers 502 or 503 without forwarding.
	fault5xx
	// faultResetBefore cuts the connection without forwarding.
	faultResetBefore
	// faultResetAfter forwards, lets the IPAM system process the request,
	// then cuts the connection instead of answering: the answer is lost.
	faultResetAfter
	// faultSlow forwards at once and holds the answer back for a while (or,
	// with slowRequest, waits and then forwards: the IPAM system processes
	// the request even if the client gave up meanwhile, as
	// httpfault.Latency does).
	faultSlow
	numFaultKinds
)

// faultProxy sits between the manager and the IPAM system. While enabled,
// each request suffers a fault with probability rate, its kind drawn from
// a seeded RNG; it counts requests and faults by kind either way.
type faultProxy struct {
	ts          *httptest.Server
	upstream    string
	client      *http.Client
	writeStatus func(http.ResponseWriter, int) int
	closing     chan struct{}

	rate    float64
	slowMax time.Duration
	// slowRequest delays the request before forwarding it instead of
	// delaying the answer: the IPAM system then processes it late, possibly
	// after the manager that sent it was killed and its successor acted.
	slowRequest bool

	logMu sync.Mutex
	log   io.Writer

	mu  sync.Mutex
	rng *rand.Rand

	enabled  atomic.Bool
	requests atomic.Int64
	faults   [numFaultKinds]atomic.Int64
	// outageUntil (Unix nanoseconds) ends the current outage: until then
	// every request fails, with a 5xx or a reset before forwarding.
	outageUntil    atomic.Int64
	outages        atomic.Int64
	outageRequests atomic.Int64
}

// newFaultProxy starts a proxy on 127.0.0.1 in front of upstream (a base
// URL). With useTLS it serves HTTPS with httptest's certificate (see
// caPEM); writeStatus renders an injected 5xx the way the real front end
// would.
func newFaultProxy(upstream string, useTLS bool, seed uint64, rate float64, slowMax time.Duration,
	writeStatus func(http.ResponseWriter, int) int) *faultProxy {
	p := &faultProxy{
		upstream:    strings.TrimRight(upstream, "/"),
		writeStatus: writeStatus,
		closing:     make(chan struct{}),
		rate:        rate,
		slowMax:     slowMax,
		rng:         rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15)),
		client: &http.Client{
			Transport: &http.Transport{
				Proxy:               nil,
				MaxIdleConns:        256,
				MaxIdleConnsPerHost: 256,
				IdleConnTimeout:     30 * time.Second,
			},
			Timeout: 2 * time.Minute,
			// The manager must see the IPAM system's redirects itself.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
	}
	p.ts = httptest.NewUnstartedServer(http.HandlerFunc(p.serve))
	// Cut connections are the point; keep them out of the output.
	p.ts.Config.ErrorLog = log.New(io.Discard, "", 0)
	if useTLS {
		// HTTP/1.1 only, so that connections can be hijacked and cut.
		p.ts.TLS = &tls.Config{NextProtos: []string{"http/1.1"}}
		p.ts.StartTLS()
	} else {
		p.ts.Start()
	}
	return p
}

func (p *faultProxy) URL() string { return p.ts.URL }

// logf records one request in the proxy's log, when it has one.
func (p *faultProxy) logf(format string, args ...any) {
	if p.log == nil {
		return
	}
	p.logMu.Lock()
	defer p.logMu.Unlock()
	fmt.Fprintf(p.log, "%s %s\n", time.Now().Format("15:04:05.000000"), fmt.Sprintf(format, args...))
}

// caPEM is the PEM of the proxy's (self-signed) certificate, for ca.crt.
func (p *faultProxy) caPEM() []byte {
	if p.ts.Certificate() == nil {
		return nil
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: p.ts.Certificate().Raw})
}

func (p *faultProxy) Close() {
	close(p.closing)
	p.ts.Close()
}

func (p *faultProxy) setEnabled(on bool) { p.enabled.Store(on) }

// outage makes every request fail for d, as an IPAM system that restarts
// or a network that drops out would: long enough for the clients' retries
// to give up, so that pools blip and claims must recover afterwards.
func (p *faultProxy) outage(d time.Duration) {
	p.outages.Add(1)
	p.outageUntil.Store(time.Now().Add(d).UnixNano())
}

// draw picks the fault for one request, and the delay and status it needs.
func (p *faultProxy) draw() (faultKind, time.Duration, int) {
	if !p.enabled.Load() {
		return faultNone, 0, 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if time.Now().UnixNano() < p.outageUntil.Load() {
		p.outageRequests.Add(1)
		if p.rng.IntN(2) == 0 {
			return faultResetBefore, 0, 0
		}
		return fault5xx, 0, http.StatusServiceUnavailable
	}
	if p.rng.Float64() >= p.rate {
		return faultNone, 0, 0
	}
	kind := faultKind(1 + p.rng.IntN(int(numFaultKinds)-1))
	delay := time.Duration(float64(p.slowMax) * (0.1 + 0.9*p.rng.Float64()))
	status := http.StatusBadGateway
	if p.rng.IntN(2) == 0 {
		status = http.StatusServiceUnavailable
	}
	return kind, delay, status
}

type counts struct {
	requests       int64
	faults         [numFaultKinds]int64
	outages        int64
	outageRequests int64
}

func (p *faultProxy) counts() counts {
	c := counts{requests: p.requests.Load(), outages: p.outages.Load(), outageRequests: p.outageRequests.Load()}
	for k := range c.faults {
		c.faults[k] = p.faults[k].Load()
	}
	return c
}

func (p *faultProxy) serve(w http.ResponseWriter, r *http.Request) {
	p.requests.Add(1)
	kind, delay, status := p.draw()
	p.faults[kind].Add(1)
	// Buffered, so the forwarded request carries a Content-Length (Django
	// under gunicorn reads a chunked body as empty).
	body, err := io.ReadAll(r.Body)
	if err != nil {
		httpfault.CloseWithoutResponse(w)
		return
	}
	switch kind {
	case fault5xx:
		p.logf("%s %s %s -> injected %d", kind, r.Method, r.URL.RequestURI(), status)
		p.writeStatus(w, status)
		return
	case faultResetBefore:
		p.logf("%s %s %s -> not forwarded", kind, r.Method, r.URL.RequestURI())
		httpfault.CloseWithoutResponse(w)
		return
	case faultSlow:
		if p.slowRequest && !httpfault.Sleep(delay, p.closing) {
			httpfault.CloseWithoutResponse(w)
			return
		}
	}
	// The IPAM system finishes a request whose client went away.
	out, err := http.NewRequestWithContext(context.WithoutCancel(r.Context()), r.Method, p.upstream+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		p.writeStatus(w, http.StatusBadGateway)
		return
	}
	out.Header = r.Header.Clone()
	out.Header.Del("Connection")
	resp, err := p.client.Do(out)
	if err != nil {
		p.writeStatus(w, http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(resp.Body)
	p.logf("%s %s %s -> %d", kind, r.Method, r.URL.RequestURI(), resp.StatusCode)
	if err != nil || kind == faultResetAfter {
		httpfault.CloseWithoutResponse(w)
		return
	}
	if kind == faultSlow && !p.slowRequest && !httpfault.Sleep(delay, p.closing) {
		httpfault.CloseWithoutResponse(w)
		return
	}
	for k, v := range resp.Header {
		if k == "Content-Length" || k == "Connection" || k == "Transfer-Encoding" {
			continue
		}
		w.Header()[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(answer)
}

func (k faultKind) String() string {
	return [...]string{"none", "5xx", "reset-before", "reset-after", "slow"}[k]
}
