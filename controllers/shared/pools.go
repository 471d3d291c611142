package shared

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/api/v1alpha1"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/pkg/backendhttp"
)

// Pool is implemented by every pool kind.
type Pool interface {
	client.Object
	GetConditions() []metav1.Condition
	SetConditions([]metav1.Condition)
	GetPoolStatus() *v1alpha1.PoolStatus
	GetOrphans() v1alpha1.Orphans
	GetRelease() v1alpha1.ReleaseSettings
}

// BackendOptions are the manager-wide settings every backend receives.
type BackendOptions struct {
	// RequestTimeout bounds one request to the backend.
	RequestTimeout time.Duration
	// Limits bound the requests to each IPAM endpoint, shared by every pool
	// on it.
	Limits *backendhttp.Limits
	// MaxBatchSize caps how many claims allocated or released at once
	// share one request (0: backends.DefaultMaxBatchSize; 1: no batching).
	MaxBatchSize int
	// Observe returns the hook that counts a backend's HTTP requests, by
	// method and status, in the manager's metrics (Setup sets it).
	Observe func(backend string) func(method string, code int)
	// ObserveBatch returns the hook that records the size of a backend's
	// batches, by operation, in the manager's metrics (Setup sets it).
	ObserveBatch func(backend string) func(operation string, size int)
	// Uncertain is told of every create the pool's system may still apply
	// (see backends.Options.Uncertain); Backends sets it per pool.
	Uncertain func()
}

// PoolKind describes one pool kind: how to make its objects, where its
// credentials are, and how to turn it into a backend.
type PoolKind struct {
	Kind       string
	Namespaced bool
	// Backend names the IPAM system, for metrics.
	Backend string
	New     func() Pool
	NewList func() client.ObjectList
	// SecretName names the pool's credentials Secret.
	SecretName func(Pool) string
	// RateLimit is the pool's limit on the requests to its endpoint; nil
	// when unset.
	RateLimit func(Pool) *v1alpha1.RateLimit
	// Endpoint is the URL of the pool's IPAM system, as its spec gives it:
	// what an administrator's list of allowed endpoints is held against.
	Endpoint func(Pool) string
	// InsecureConnection says how the pool's connection exposes its
	// credentials or answers, or "" when it is https with verification.
	InsecureConnection func(Pool) string
	// NewBackend builds the pool's backend from its spec and Secret. It makes
	// no request; errors say what is wrong with the spec or the Secret.
	NewBackend func(pool Pool, secret *corev1.Secret, opts BackendOptions) (backends.Backend, error)
}

// GroupKind of the pool kind.
func (k PoolKind) GroupKind() schema.GroupKind {
	return schema.GroupKind{Group: v1alpha1.GroupVersion.Group, Kind: k.Kind}
}

// PoolKinds is the set of pool kinds the manager serves.
type PoolKinds []PoolKind

// For returns the kind a pool reference names, if it is one of ours.
func (ks PoolKinds) For(ref ipamv1.IPPoolReference) (PoolKind, bool) {
	if ref.APIGroup != v1alpha1.GroupVersion.Group {
		return PoolKind{}, false
	}
	for _, k := range ks {
		if k.Kind == ref.Kind {
			return k, true
		}
	}
	return PoolKind{}, false
}

// GetPool fetches the pool a claim references; nil when it does not exist.
func GetPool(ctx context.Context, c client.Reader, kind PoolKind, namespace, name string) (Pool, error) {
	pool := kind.New()
	key := client.ObjectKey{Name: name}
	if kind.Namespaced {
		key.Namespace = namespace
	}
	if err := c.Get(ctx, key, pool); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	return pool, nil
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
