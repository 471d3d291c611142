package index

import (
	"context"
	"fmt"

	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/reservation"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/pkg/poolkind"

	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
)

// Field indexes on the manager's cache.
const (
	// PoolRefField indexes claims and addresses by the pool they reference.
	PoolRefField = "spec.poolRef"
	// ClusterNameField indexes claims by their cluster.
	ClusterNameField = "spec.clusterName"
	// SecretNameField indexes pools by their credentials Secret.
	SecretNameField = "spec.connection.credentialsSecretRef.name"
	// WaitingPoolRefField indexes the claims that wait for an address (not
	// Ready, not being deleted) by the pool they reference: those an
	// address freed in the pool may let go on. A release of thousands of
	// claims then wakes nobody, instead of listing every claim of the pool
	// at each deleted IPAddress.
	WaitingPoolRefField = "waiting.spec.poolRef"
)

// WaitingPoolRefKeys is the WaitingPoolRefField of a claim.
func WaitingPoolRefKeys(o client.Object) []string {
	claim := o.(*ipamv1.IPAddressClaim)
	if !claim.DeletionTimestamp.IsZero() || conditions.IsTrue(claim, ipamv1.IPAddressClaimReadyCondition) {
		return nil
	}
	return []string{PoolRefKey(claim.Spec.PoolRef)}
}

// PoolRefKey is the index value of a pool reference.
func PoolRefKey(ref ipamv1.IPPoolReference) string {
	return ref.APIGroup + "/" + ref.Kind + "/" + ref.Name
}

// Setup registers the field indexes the reconcilers list by.
func Setup(ctx context.Context, mgr manager.Manager, kinds poolkind.Kinds) error {
	indexer := mgr.GetFieldIndexer()
	if err := indexer.IndexField(ctx, &ipamv1.IPAddressClaim{}, PoolRefField, func(o client.Object) []string {
		return []string{PoolRefKey(o.(*ipamv1.IPAddressClaim).Spec.PoolRef)}
	}); err != nil {
		return fmt.Errorf("indexing claims by pool: %w", err)
	}
	if err := indexer.IndexField(ctx, &ipamv1.IPAddressClaim{}, WaitingPoolRefField, WaitingPoolRefKeys); err != nil {
		return fmt.Errorf("indexing waiting claims by pool: %w", err)
	}
	if err := indexer.IndexField(ctx, &ipamv1.IPAddressClaim{}, ClusterNameField, func(o client.Object) []string {
		if name := reservation.ClaimClusterName(o.(*ipamv1.IPAddressClaim)); name != "" {
			return []string{name}
		}
		return nil
	}); err != nil {
		return fmt.Errorf("indexing claims by cluster: %w", err)
	}
	if err := indexer.IndexField(ctx, &ipamv1.IPAddress{}, PoolRefField, func(o client.Object) []string {
		return []string{PoolRefKey(o.(*ipamv1.IPAddress).Spec.PoolRef)}
	}); err != nil {
		return fmt.Errorf("indexing addresses by pool: %w", err)
	}
	if err := indexClusterWide(ctx, mgr.GetCache(), &ipamv1.IPAddress{}, AddressScopeField, addressScopeKeys); err != nil {
		return fmt.Errorf("indexing addresses by the address they hold: %w", err)
	}
	for _, kind := range kinds {
		if err := indexer.IndexField(ctx, kind.New(), SecretNameField, func(o client.Object) []string {
			return []string{kind.SecretName(o.(poolkind.Pool))}
		}); err != nil {
			return fmt.Errorf("indexing %s by Secret: %w", kind.Kind, err)
		}
	}
	return nil
}

// Controller-runtime's names of a field index and of its values across
// namespaces (sigs.k8s.io/controller-runtime/pkg/cache/internal): a List
// with MatchingFields and no namespace looks values up in the index
// fieldIndexPrefix+field under allNamespacesPrefix+value.
// TestClusterWideIndexAnswersListsAcrossNamespaces pins them.
const (
	fieldIndexPrefix    = "field:"
	allNamespacesPrefix = "__all_namespaces/"
)

// indexClusterWide is IndexField for a field the provider lists only
// across namespaces, never within one: the guard looks for any IPAddress
// that holds an address. IndexField keys every object twice, under its
// namespace and across namespaces; for a field whose value is each
// object's own (the address an IPAddress holds) the namespaced key, which
// nothing reads, is half of the index's memory: at 10,000 IPAddresses some
// 3 MiB. A List of such a field within a namespace finds nothing.
func indexClusterWide(ctx context.Context, c cache.Cache, obj client.Object, field string, extract client.IndexerFunc) error {
	informer, err := c.GetInformer(ctx, obj)
	if err != nil {
		return err
	}
	return informer.AddIndexers(toolscache.Indexers{fieldIndexPrefix + field: func(raw any) ([]string, error) {
		o, ok := raw.(client.Object)
		if !ok {
			return nil, fmt.Errorf("object of type %T is not an Object", raw)
		}
		values := extract(o)
		keys := make([]string, len(values))
		for i, v := range values {
			keys[i] = allNamespacesPrefix + v
		}
		return keys, nil
	}})
}
