package backendcache

import (
	"context"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/api/v1alpha1"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/metrics"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/poolstate"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/pkg/endpointpolicy"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/pkg/poolkind"
)

// Backends builds and caches one backend per pool. A backend is rebuilt only
// when the pool's spec (generation) or its Secret (resourceVersion) changes,
// so allocations reuse its connections and resolved sources. Secrets are read
// through the API reader, never cached in full: the manager caches only their
// metadata, which is enough to notice a change.
type Backends struct {
	// Client reads Secret metadata from the cache.
	Client client.Client
	// APIReader reads Secret data from the API server.
	APIReader client.Reader
	// ManagerNamespace holds the Secrets of cluster-scoped pools.
	ManagerNamespace string
	Options          poolkind.BackendOptions
	// AllowedEndpoints are the IPAM endpoints namespaced pools may reach;
	// nil allows every endpoint. Cluster-scoped pools are made by
	// administrators and are not held to it.
	AllowedEndpoints *endpointpolicy.Policy
	// LateRecords learns of the creates each pool's system may still
	// apply (BackendOptions.Uncertain).
	LateRecords *poolstate.LateRecords

	mu      sync.Mutex
	entries map[types.UID]backendEntry
}

type backendEntry struct {
	generation    int64
	secretVersion string
	backend       backends.Backend
}

// secretKey is where a pool's Secret lives.
func (b *Backends) secretKey(kind poolkind.Kind, pool poolkind.Pool) client.ObjectKey {
	ns := b.ManagerNamespace
	if kind.Namespaced {
		ns = pool.GetNamespace()
	}
	return client.ObjectKey{Namespace: ns, Name: kind.SecretName(pool)}
}

// Prober returns the pool's backend as the pool reconciler uses it.
func (b *Backends) Prober(ctx context.Context, kind poolkind.Kind, pool poolkind.Pool) (backends.Prober, error) {
	return b.For(ctx, kind, pool)
}

// Reserver returns the pool's backend as the claim reconciler uses it.
func (b *Backends) Reserver(ctx context.Context, kind poolkind.Kind, pool poolkind.Pool) (backends.Reserver, error) {
	return b.For(ctx, kind, pool)
}

// Auditor returns the pool's backend as the audit uses it.
func (b *Backends) Auditor(ctx context.Context, kind poolkind.Kind, pool poolkind.Pool) (backends.Auditor, error) {
	return b.For(ctx, kind, pool)
}

// For returns the pool's backend, whole; each reconciler takes the part it
// uses (Prober, Reserver, Auditor).
func (b *Backends) For(ctx context.Context, kind poolkind.Kind, pool poolkind.Pool) (backends.Backend, error) {
	// Before the Secret is read and before any connection: a tenant's pool
	// must not make the manager reach into the management cluster's network.
	if kind.Namespaced && b.AllowedEndpoints.Restricted() && !b.AllowedEndpoints.Allows(kind.Endpoint(pool)) {
		return nil, &poolkind.UnusablePoolError{Reason: v1alpha1.EndpointNotAllowedReason,
			Message: fmt.Sprintf("the pool's IPAM endpoint %s is not one that namespaced pools may use (the manager's --allowed-endpoints); "+
				"ask a cluster administrator to add it, or use a Global pool", endpointpolicy.Describe(kind.Endpoint(pool)))}
	}
	key := b.secretKey(kind, pool)
	meta, err := b.secretMetadata(ctx, key)
	if err != nil {
		if apierrors.IsNotFound(err) {
			return nil, &poolkind.UnusablePoolError{Reason: v1alpha1.CredentialsSecretNotFoundReason,
				Message: fmt.Sprintf("Secret %s not found; a %s reads its Secret from %s", key, kind.Kind, secretPlace(kind))}
		}
		return nil, fmt.Errorf("reading Secret %s: %w", key, err)
	}
	if meta.GetLabels()[v1alpha1.CredentialsLabel] != "true" {
		return nil, &poolkind.UnusablePoolError{Reason: v1alpha1.CredentialsNotAllowedReason,
			Message: fmt.Sprintf("Secret %s does not allow pools to use it: its owner must label it %s=true", key, v1alpha1.CredentialsLabel)}
	}

	b.mu.Lock()
	entry, ok := b.entries[pool.GetUID()]
	b.mu.Unlock()
	if ok && entry.generation == pool.GetGeneration() && entry.secretVersion == meta.ResourceVersion {
		return entry.backend, nil
	}

	secret := &corev1.Secret{}
	if err := b.APIReader.Get(ctx, key, secret); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, &poolkind.UnusablePoolError{Reason: v1alpha1.CredentialsSecretNotFoundReason, Message: fmt.Sprintf("Secret %s not found", key)}
		}
		return nil, fmt.Errorf("reading Secret %s: %w", key, err)
	}
	opts := b.Options
	if b.LateRecords != nil {
		opts.Uncertain = func() { b.LateRecords.Uncertain(kind, pool) }
	}
	backend, err := kind.NewBackend(pool, secret, opts)
	if err != nil {
		return nil, err
	}
	backend = metrics.Instrument(backend, kind.Backend)
	b.mu.Lock()
	if b.entries == nil {
		b.entries = map[types.UID]backendEntry{}
	}
	b.entries[pool.GetUID()] = backendEntry{generation: pool.GetGeneration(), secretVersion: secret.ResourceVersion, backend: backend}
	b.mu.Unlock()
	return backend, nil
}

// secretMetadata reads a Secret's metadata from the cache, which holds only
// the Secrets labelled as credentials, or else from the API server: a
// Secret the pool names but that lacks the label is CredentialsNotAllowed,
// not missing. Only a pool that cannot be used pays that read.
func (b *Backends) secretMetadata(ctx context.Context, key client.ObjectKey) (*metav1.PartialObjectMetadata, error) {
	meta := SecretMetadata()
	err := b.Client.Get(ctx, key, meta)
	if apierrors.IsNotFound(err) {
		meta = SecretMetadata()
		err = b.APIReader.Get(ctx, key, meta)
	}
	return meta, err
}

// Forget drops a deleted pool's backend, its limit and its sweeps.
func (b *Backends) Forget(kind poolkind.Kind, pool poolkind.Pool) {
	b.mu.Lock()
	delete(b.entries, pool.GetUID())
	b.mu.Unlock()
	b.LateRecords.Forget(pool.GetUID())
	if kind.ForgetBackend != nil {
		kind.ForgetBackend(pool)
	}
}

func secretPlace(kind poolkind.Kind) string {
	if kind.Namespaced {
		return "its own namespace"
	}
	return "the manager's namespace"
}
