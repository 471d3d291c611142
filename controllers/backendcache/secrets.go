package backendcache

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/index"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/pkg/poolkind"
)

// SecretMetadata is a Secret as the manager watches it: metadata only, so
// that no credentials are cached.
func SecretMetadata() *metav1.PartialObjectMetadata {
	secret := &metav1.PartialObjectMetadata{}
	secret.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	return secret
}

// PoolsOfSecret lists the pools of kind that read their credentials from
// secret: namespaced pools in its namespace, cluster-scoped ones when it is
// in the manager's namespace.
func PoolsOfSecret(ctx context.Context, c client.Reader, kind poolkind.Kind, managerNamespace string, secret client.Object) ([]client.Object, error) {
	if !kind.Namespaced && secret.GetNamespace() != managerNamespace {
		return nil, nil
	}
	list := kind.NewList()
	opts := []client.ListOption{client.MatchingFields{index.SecretNameField: secret.GetName()}}
	if kind.Namespaced {
		opts = append(opts, client.InNamespace(secret.GetNamespace()))
	}
	if err := c.List(ctx, list, opts...); err != nil {
		return nil, fmt.Errorf("listing the %ss of Secret %s/%s: %w", kind.Kind, secret.GetNamespace(), secret.GetName(), err)
	}
	var pools []client.Object
	_ = meta.EachListItem(list, func(o runtime.Object) error {
		pools = append(pools, o.(client.Object))
		return nil
	})
	return pools, nil
}
