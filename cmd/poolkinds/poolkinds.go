// Package poolkinds adapts each pool kind to its backend: from the pool's
// spec and credentials Secret to the backend's configuration. It is the only
// place that knows both the API and a concrete IPAM system, so that the
// controllers know neither HTTP nor any one system; cmd wires the kinds in.
package poolkinds

import (
	"fmt"
	"net/netip"
	"sync"

	"go4.org/netipx"
	corev1 "k8s.io/api/core/v1"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/api/v1alpha1"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/pkg/backendhttp"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/pkg/poolkind"
)

// twins are a backend's two pool kinds, the namespaced one and its
// cluster-scoped Global twin, which differ only in their types and scope.
func twins(base poolkind.Kind, kind string, newPool, newGlobal func() poolkind.Pool,
	newList, newGlobalList func() client.ObjectList) poolkind.Kinds {
	namespaced, global := base, base
	namespaced.Kind, namespaced.Namespaced, namespaced.New, namespaced.NewList = kind, true, newPool, newList
	global.Kind, global.Namespaced, global.New, global.NewList = "Global"+kind, false, newGlobal, newGlobalList
	return poolkind.Kinds{namespaced, global}
}

// All is every pool kind the manager serves. Their backends share one set
// of limits on the requests to each IPAM endpoint, and the HTTP layer's
// metrics (the limiters' waits, throttled answers, requests in flight) are
// registered with the manager's registry once.
func All() poolkind.Kinds {
	registerHTTPMetrics.Do(func() { ctrlmetrics.Registry.MustRegister(backendhttp.Collectors()...) })
	limits := backendhttp.NewLimits()
	return append(NetBox(limits), Infoblox(limits)...)
}

var registerHTTPMetrics sync.Once

// newBackend builds a pool's backend from its spec and Secret, its requests
// limited by limits.
type newBackend func(pool poolkind.Pool, secret *corev1.Secret, opts poolkind.BackendOptions, limits *backendhttp.Limits) (backends.Backend, error)

// limited sets kind's NewBackend, which builds the pool's backend with
// build and then sets the pool's share of its endpoint's limit (rateLimit,
// from the pool's spec), and its ForgetBackend, which drops that share.
func limited(kind poolkind.Kind, limits *backendhttp.Limits, rateLimit func(poolkind.Pool) *v1alpha1.RateLimit, build newBackend) poolkind.Kind {
	kind.NewBackend = func(pool poolkind.Pool, secret *corev1.Secret, opts poolkind.BackendOptions) (backends.Backend, error) {
		backend, err := build(pool, secret, opts, limits)
		if err != nil {
			return nil, err
		}
		limits.Set(string(pool.GetUID()), backend.Endpoint(), endpointLimit(rateLimit(pool)))
		return backend, nil
	}
	kind.ForgetBackend = func(pool poolkind.Pool) { limits.Remove(string(pool.GetUID())) }
	return kind
}

// endpointLimit is a pool's limit on the requests to its endpoint; unset
// fields (a pool the API server has not defaulted) take the defaults.
func endpointLimit(r *v1alpha1.RateLimit) backendhttp.Limit {
	l := backendhttp.DefaultLimit
	if r == nil {
		return l
	}
	for _, f := range []struct {
		from int32
		to   *int
	}{{r.RequestsPerSecond, &l.RequestsPerSecond}, {r.Burst, &l.Burst}, {r.MaxConcurrentRequests, &l.MaxConcurrent}} {
		if f.from > 0 {
			*f.to = int(f.from)
		}
	}
	return l
}

// insecureConnection describes what a plain-http or unverified connection
// exposes.
func insecureConnection(plainHTTP, skipVerify bool) string {
	switch {
	case plainHTTP:
		return "the connection uses plain http: the credentials and every answer cross the network unencrypted"
	case skipVerify:
		return "insecureSkipTLSVerify is set: any server on the way can pose as the IPAM system and receive the credentials"
	}
	return ""
}

func gatewayConfig(g v1alpha1.Gateway) (backends.Gateway, error) {
	if g.Address != "" {
		addr, err := netip.ParseAddr(g.Address)
		if err != nil {
			return backends.Gateway{}, fmt.Errorf("%w: gateway address %q: %v", backends.ErrInvalidConfig, g.Address, err)
		}
		return backends.Gateway{Address: addr}, nil
	}
	return backends.Gateway{None: g.Policy == v1alpha1.GatewayNone}, nil
}

func ptrValue[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// observeBatches is the manager's hook for a backend's batch sizes, or none
// when the options carry none (a backend built outside the manager).
func observeBatches(opts poolkind.BackendOptions, backend string) func(operation string, size int) {
	if opts.ObserveBatch == nil {
		return nil
	}
	return opts.ObserveBatch(backend)
}

// spansOf are the spans of sources, each as span reads it; known is false
// when one has none (invalid: named by ID alone, or not parsed).
func spansOf[S any](sources []S, span func(S) netipx.IPRange) (spans []netipx.IPRange, known bool) {
	for _, s := range sources {
		r := span(s)
		if !r.IsValid() {
			return nil, false
		}
		spans = append(spans, r)
	}
	return spans, true
}

// prefixSpan is the addresses of cidr; invalid when it does not parse.
func prefixSpan(cidr string) netipx.IPRange {
	p, err := netip.ParsePrefix(cidr)
	if err != nil {
		return netipx.IPRange{}
	}
	return netipx.RangeOfPrefix(p.Masked())
}

// rangeSpan is the addresses from first to last; invalid when either does
// not parse.
func rangeSpan(first, last string) netipx.IPRange {
	from, err1 := netip.ParseAddr(first)
	to, err2 := netip.ParseAddr(last)
	if err1 != nil || err2 != nil {
		return netipx.IPRange{}
	}
	return netipx.IPRangeFrom(from, to)
}
