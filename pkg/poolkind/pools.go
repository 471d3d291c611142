package poolkind

import (
	"context"
	"net/netip"
	"slices"
	"time"

	"go4.org/netipx"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/api/v1alpha1"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends"
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
	// (see backends.Options.Uncertain); backendcache.Backends sets it per pool.
	Uncertain func()
}

// Kind describes one pool kind: how to make its objects, where its
// credentials are, and how to turn it into a backend.
type Kind struct {
	Kind       string
	Namespaced bool
	// Backend names the IPAM system, for metrics.
	Backend string
	New     func() Pool
	NewList func() client.ObjectList
	// SecretName names the pool's credentials Secret.
	SecretName func(Pool) string
	// Endpoint is the URL of the pool's IPAM system, as its spec gives it:
	// what an administrator's list of allowed endpoints is held against.
	Endpoint func(Pool) string
	// InsecureConnection says how the pool's connection exposes its
	// credentials or answers, or "" when it is https with verification.
	InsecureConnection func(Pool) string
	// WantsMAC says whether the pool's records carry the MAC of the claim's
	// machine, which a claim then reads before it reserves; nil for a kind
	// whose records never do.
	WantsMAC func(Pool) bool
	// Spans lists the addresses the pool's sources hand out, as its spec
	// names them; known is false where a source is named otherwise (by an
	// ID only the IPAM system resolves). Nil for a kind that cannot say.
	Spans func(Pool) (spans []netipx.IPRange, known bool)
	// NewBackend builds the pool's backend from its spec and Secret, and
	// sets the pool's share of the limits on the requests to its endpoint.
	// It makes no request; errors say what is wrong with the spec or the
	// Secret.
	NewBackend func(pool Pool, secret *corev1.Secret, opts BackendOptions) (backends.Backend, error)
	// ForgetBackend drops what NewBackend set up for a deleted pool beside
	// its backend: its share of its endpoint's limits.
	ForgetBackend func(pool Pool)
	// Records names the type of the records the pool reserves and its
	// audit lists (for example NetBox's ip-addresses or prefixes, the
	// grid's fixed addresses, host records or networks): two pools whose
	// records differ never see each other's.
	Records func(Pool) string
	// CanParent says why the pool cannot be the parent of a cluster's
	// subnet (it hands out addresses, or names its sources so that a child
	// pool could not name the child), nil when it can.
	CanParent func(Pool) error
	// ChildPool makes the spec of a pool of this kind whose only source is
	// child, a prefix carved by parent (a pool of this kind with
	// childPrefixes), that hands out addresses with gateway and records
	// them as parent records its children; name and namespace are the
	// caller's. Its error says why parent cannot be the parent of such a
	// pool. Nil for a kind that cannot make them (a cluster-scoped one).
	ChildPool func(parent Pool, child netip.Prefix, gateway v1alpha1.Gateway) (Pool, error)
}

// GroupKind of the pool kind.
func (k Kind) GroupKind() schema.GroupKind {
	return schema.GroupKind{Group: v1alpha1.GroupVersion.Group, Kind: k.Kind}
}

// WantsMachineMAC says whether pool's records carry the MAC of the claim's
// machine (see WantsMAC).
func (k Kind) WantsMachineMAC(pool Pool) bool {
	return pool != nil && k.WantsMAC != nil && k.WantsMAC(pool)
}

// Outside says whether addr certainly lies outside every source of pool, as
// its spec names them: false where the spec leaves a source to the IPAM
// system, or names none.
func (k Kind) Outside(pool Pool, addr netip.Addr) bool {
	if k.Spans == nil {
		return false
	}
	spans, known := k.Spans(pool)
	if !known || len(spans) == 0 {
		return false
	}
	return !slices.ContainsFunc(spans, func(s netipx.IPRange) bool { return s.Contains(addr) })
}

// Kinds is the set of pool kinds the manager serves.
type Kinds []Kind

// For returns the kind a pool reference names, if it is one of ours.
func (ks Kinds) For(ref ipamv1.IPPoolReference) (Kind, bool) {
	if ref.APIGroup != v1alpha1.GroupVersion.Group {
		return Kind{}, false
	}
	for _, k := range ks {
		if k.Kind == ref.Kind {
			return k, true
		}
	}
	return Kind{}, false
}

// GetPool fetches the pool a claim references; nil when it does not exist.
func GetPool(ctx context.Context, c client.Reader, kind Kind, namespace, name string) (Pool, error) {
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

// UnusablePoolError says why a pool cannot be used before any request is
// sent: its credentials Secret, or an endpoint it may not reach.
type UnusablePoolError struct {
	Reason  string
	Message string
}

func (e *UnusablePoolError) Error() string { return e.Message }
