package endpoint

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// A fleet opts in once: the opt-in's annotations on a ClusterClass's own
// metadata apply to every Cluster made from it that carries none of its
// own; a Cluster that carries any uses its own, whole, so that a change of
// the class never moves where a Cluster that chose for itself keeps its
// endpoint. The class, not a label or a namespace: it already describes
// the fleet's shape, it defines the variable the endpoint is written into,
// and it moves and is versioned with its Clusters. A Cluster cannot opt
// out of its class's opt-in but by opting in to another pool; a class with
// Clusters that must not get a VIP should not carry it.

// classOf is the key of the Cluster's ClusterClass, if it has a topology.
func classOf(cluster *clusterv1.Cluster) (client.ObjectKey, bool) {
	ref := cluster.Spec.Topology.ClassRef
	if ref.Name == "" {
		return client.ObjectKey{}, false
	}
	key := client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}
	if key.Namespace == "" {
		key.Namespace = cluster.Namespace
	}
	return key, true
}

// classMetadata is an empty ClusterClass metadata object, as the cache
// keeps ClusterClasses: the opt-in is all this reconciler reads of them.
func classMetadata() *metav1.PartialObjectMetadata {
	class := &metav1.PartialObjectMetadata{}
	class.SetGroupVersionKind(clusterv1.GroupVersion.WithKind("ClusterClass"))
	return class
}

// optInOnly is the opt-in's annotations among annotations; nil when none.
func optInOnly(annotations map[string]string) map[string]string {
	var out map[string]string
	for _, a := range optInAnnotations {
		if v, ok := annotations[a]; ok {
			if out == nil {
				out = map[string]string{}
			}
			out[a] = v
		}
	}
	return out
}

// optInOf is the Cluster's opt-in: its own annotations of the opt-in if it
// carries any, else its ClusterClass's; nil when neither opts in.
func (r *Reconciler) optInOf(ctx context.Context, cluster *clusterv1.Cluster) (map[string]string, error) {
	if own := optInOnly(cluster.Annotations); own != nil {
		return own, nil
	}
	key, ok := classOf(cluster)
	if !ok || !r.classes {
		return nil, nil
	}
	class := classMetadata()
	if err := r.Client.Get(ctx, key, class); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("getting ClusterClass %s: %w", key, err)
	}
	return optInOnly(class.GetAnnotations()), nil
}

// classToClusters maps a ClusterClass whose annotations changed to the
// Clusters made from it.
func (r *Reconciler) classToClusters(ctx context.Context, class client.Object) []reconcile.Request {
	clusters := &clusterv1.ClusterList{}
	if err := r.Client.List(ctx, clusters); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing the Clusters of a ClusterClass")
		return nil
	}
	var out []reconcile.Request
	for i := range clusters.Items {
		if key, ok := classOf(&clusters.Items[i]); ok && key == client.ObjectKeyFromObject(class) {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&clusters.Items[i])})
		}
	}
	return out
}
