// Package backendhttp builds the HTTP client every backend uses: bounded
// attempts, retries with backoff on connection errors, 429 and 5xx, a limit
// on the requests to each endpoint shared by every client of the manager, a
// count of the attempts behind each logical request, and TLS that fails
// closed.
package backendhttp

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"net/http"
	"time"

	"github.com/hashicorp/go-cleanhttp"
	"github.com/hashicorp/go-retryablehttp"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/pkg/attempts"
)

// Options bound every request.
type Options struct {
	// Timeout of one attempt, its wait for the endpoint's limiter included.
	Timeout time.Duration
	// RetryMax is how many times a failed request is retried.
	RetryMax int
	// RetryWaitMin and RetryWaitMax bound the backoff between attempts.
	RetryWaitMin time.Duration
	RetryWaitMax time.Duration
	// Observe, if set, is told of every attempt: its method and the status
	// code, or 0 when no answer came.
	Observe func(method string, code int)
	// Limits, shared by the clients of a manager, bound the requests to
	// each endpoint. Without it the client sends as fast as it is asked,
	// but still holds back when the endpoint answers 429 or 503 with
	// Retry-After.
	Limits *Limits
}

// WithDefaults fills the unset options.
func (o Options) WithDefaults() Options {
	if o.Timeout == 0 {
		o.Timeout = 15 * time.Second
	}
	if o.RetryMax == 0 {
		o.RetryMax = 3
	}
	if o.RetryWaitMin == 0 {
		o.RetryWaitMin = 250 * time.Millisecond
	}
	if o.RetryWaitMax == 0 {
		o.RetryWaitMax = 4 * time.Second
	}
	return o
}

// ErrBadCABundle says a CA bundle holds no PEM certificate.
var ErrBadCABundle = errors.New("the CA bundle holds no PEM certificate")

// TLSConfig verifies the server against caBundle (the system roots when
// empty) unless insecure is set. A bundle that does not parse is an error,
// never a reason to skip verification.
func TLSConfig(caBundle []byte, insecure bool) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if len(caBundle) > 0 {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(caBundle) {
			return nil, ErrBadCABundle
		}
		cfg.RootCAs = pool
	}
	if insecure {
		cfg.InsecureSkipVerify = true //nolint:gosec // explicit opt-in in the pool spec
	}
	return cfg, nil
}

// NewTLSClient is NewClient verifying the server against caBundle (the
// system roots when empty) unless insecure is set, and presenting certs. A
// CA bundle that does not parse is an error (see TLSConfig), where a client
// library would turn verification off.
func NewTLSClient(opts Options, caBundle []byte, insecure bool, certs []tls.Certificate) (*http.Client, error) {
	tlsConfig, err := TLSConfig(caBundle, insecure)
	if err != nil {
		return nil, err
	}
	tlsConfig.Certificates = certs
	return NewClient(opts, tlsConfig), nil
}

// NewClient returns a client that retries connection errors, 429 and 5xx
// with backoff and bounds each attempt. Every attempt waits for its
// endpoint's limiter. After the last attempt it hands back the last response
// rather than a bare "giving up" error, so the caller sees the server's
// status and body.
func NewClient(opts Options, tlsConfig *tls.Config) *http.Client {
	opts = opts.WithDefaults()
	transport := cleanhttp.DefaultPooledTransport()
	transport.TLSClientConfig = tlsConfig
	var rt http.RoundTripper = transport
	if opts.Observe != nil {
		rt = observingTransport{next: transport, observe: opts.Observe}
	}
	limits := opts.Limits
	if limits == nil {
		limits = &Limits{}
	}
	rt = limitingTransport{next: rt, limits: limits, minWait: opts.RetryWaitMin}

	rc := retryablehttp.NewClient()
	rc.HTTPClient = &http.Client{Transport: rt, Timeout: opts.Timeout, CheckRedirect: noRedirects}
	rc.Logger = nil
	rc.RetryMax = opts.RetryMax
	rc.RetryWaitMin = opts.RetryWaitMin
	rc.RetryWaitMax = opts.RetryWaitMax
	rc.Backoff = cappedBackoff(opts.Timeout)
	rc.ErrorHandler = retryablehttp.PassthroughErrorHandler
	rc.CheckRetry = checkRetry
	rc.RequestLogHook = func(_ retryablehttp.Logger, req *http.Request, _ int) {
		attempts.Record(req.Context())
	}
	c := rc.StandardClient()
	c.CheckRedirect = noRedirects
	return c
}

// noRedirects hands a redirect back to the caller, which reports it: the
// IPAM APIs never redirect, and following one would take the pool's
// credentials and requests to an endpoint that no administrator allowed
// (--allowed-endpoints) and no pool names.
func noRedirects(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// cappedBackoff is go-retryablehttp's default backoff, which waits as long
// as a 429's or 503's Retry-After says, unless that is longer than one
// attempt's timeout: then the next attempt, held back by the endpoint's
// pause, fails at once (ErrThrottled) rather than after holding a worker
// for as long as the server likes.
func cappedBackoff(limit time.Duration) retryablehttp.Backoff {
	return func(minWait, maxWait time.Duration, attempt int, resp *http.Response) time.Duration {
		if wait := retryablehttp.DefaultBackoff(minWait, maxWait, attempt, resp); wait <= limit {
			return wait
		}
		return 0
	}
}

// noResendKey marks a context whose writes are not sent again once they
// may have reached the server (see WithoutResend).
type noResendKey struct{}

// WithoutResend returns a context whose requests are sent again only when
// they surely did not reach the server: a refused connection, or a 429.
// A write addressed to an object by a reference that the system gives to
// the next object at the same place (an Infoblox fixed address's _ref is
// made of its address and network view) must not be resent blindly after
// a lost answer: by then the reference may name another cluster's object.
// Its caller reads the object again, and checks it, before writing again.
func WithoutResend(ctx context.Context) context.Context {
	return context.WithValue(ctx, noResendKey{}, true)
}

// checkRetry is go-retryablehttp's default policy, less the resends that
// WithoutResend rules out.
func checkRetry(ctx context.Context, resp *http.Response, err error) (bool, error) {
	retry, checkErr := retryablehttp.DefaultRetryPolicy(ctx, resp, err)
	if !retry || ctx.Value(noResendKey{}) == nil {
		return retry, checkErr
	}
	var opErr *net.OpError
	switch {
	case err != nil:
		return errors.As(err, &opErr) && opErr.Op == "dial", checkErr
	case resp != nil:
		return resp.StatusCode == http.StatusTooManyRequests, checkErr
	}
	return false, checkErr
}

// observingTransport reports each attempt to observe.
type observingTransport struct {
	next    http.RoundTripper
	observe func(method string, code int)
}

func (t observingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	code := 0
	if err == nil {
		code = resp.StatusCode
	}
	t.observe(req.Method, code)
	return resp, err
}
