package reservation

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get,resourceNames=kube-system

// ClusterIdentity is the default identity of this management cluster in
// reservation markers: the UID of its kube-system namespace, which lives as
// long as the cluster and differs between clusters. Two management clusters
// that share one IPAM system are thereby kept apart even when nobody set
// --marker-identity.
func ClusterIdentity(ctx context.Context, c client.Reader) (string, error) {
	ns := &corev1.Namespace{}
	if err := c.Get(ctx, client.ObjectKey{Name: "kube-system"}, ns); err != nil {
		return "", fmt.Errorf("reading namespace kube-system for this management cluster's identity (or set --marker-identity): %w", err)
	}
	return string(ns.UID), nil
}
