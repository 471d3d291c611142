package controllers

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
)

// Field indexes on the manager's cache.
const (
	// poolRefField indexes claims and addresses by the pool they reference.
	poolRefField = "spec.poolRef"
	// clusterNameField indexes claims by their cluster.
	clusterNameField = "spec.clusterName"
	// secretNameField indexes pools by their credentials Secret.
	secretNameField = "spec.connection.credentialsSecretRef.name"
)

// poolRefKey is the index value of a pool reference.
func poolRefKey(ref ipamv1.IPPoolReference) string {
	return ref.APIGroup + "/" + ref.Kind + "/" + ref.Name
}

// SetupIndexes registers the field indexes the reconcilers list by.
func SetupIndexes(ctx context.Context, mgr manager.Manager, kinds PoolKinds) error {
	indexer := mgr.GetFieldIndexer()
	if err := indexer.IndexField(ctx, &ipamv1.IPAddressClaim{}, poolRefField, func(o client.Object) []string {
		return []string{poolRefKey(o.(*ipamv1.IPAddressClaim).Spec.PoolRef)}
	}); err != nil {
		return fmt.Errorf("indexing claims by pool: %w", err)
	}
	if err := indexer.IndexField(ctx, &ipamv1.IPAddressClaim{}, clusterNameField, func(o client.Object) []string {
		if name := claimClusterName(o.(*ipamv1.IPAddressClaim)); name != "" {
			return []string{name}
		}
		return nil
	}); err != nil {
		return fmt.Errorf("indexing claims by cluster: %w", err)
	}
	if err := indexer.IndexField(ctx, &ipamv1.IPAddress{}, poolRefField, func(o client.Object) []string {
		return []string{poolRefKey(o.(*ipamv1.IPAddress).Spec.PoolRef)}
	}); err != nil {
		return fmt.Errorf("indexing addresses by pool: %w", err)
	}
	if err := indexer.IndexField(ctx, &ipamv1.IPAddress{}, addressScopeField, addressScopeKeys); err != nil {
		return fmt.Errorf("indexing addresses by the address they hold: %w", err)
	}
	for _, kind := range kinds {
		if err := indexer.IndexField(ctx, kind.New(), secretNameField, func(o client.Object) []string {
			return []string{kind.SecretName(o.(Pool))}
		}); err != nil {
			return fmt.Errorf("indexing %s by Secret: %w", kind.Kind, err)
		}
	}
	return nil
}
