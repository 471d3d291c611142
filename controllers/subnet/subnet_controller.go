package subnet

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	"sigs.k8s.io/cluster-api/util/annotations"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/cluster-api/util/patch"
	"sigs.k8s.io/cluster-api/util/predicates"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/api/v1alpha1"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/reservation"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/pkg/poolkind"
)

// The subnet's claims and pools are its own, made and deleted by it; its
// Cluster owns it. The controller owner references on what it makes block
// its foreground deletion, which needs update on clustersubnets/finalizers.
// +kubebuilder:rbac:groups=ipam-bridge.github.io,resources=clustersubnets,verbs=get;list;watch;patch;update
// +kubebuilder:rbac:groups=ipam-bridge.github.io,resources=clustersubnets/status,verbs=get;patch;update
// +kubebuilder:rbac:groups=ipam-bridge.github.io,resources=clustersubnets/finalizers,verbs=update
// +kubebuilder:rbac:groups=ipam-bridge.github.io,resources=netboxippools;infobloxippools,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups=ipam.cluster.x-k8s.io,resources=ipaddressclaims,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=ipam.cluster.x-k8s.io,resources=ipaddresses,verbs=get;list;watch
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=clusters,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Names the subnet gives what it makes, from its own name or its Cluster's.
const (
	// GatewaySuffix makes the gateway's claim's and pool's names from the
	// ClusterSubnet's.
	GatewaySuffix = "-gateway"
	// NodesPoolSuffix makes the nodes pool's default name from the
	// Cluster's: the name a ClusterClass names as
	// "{{ .builtin.cluster.name }}-nodes".
	NodesPoolSuffix = "-nodes"
)

// waitInterval is how soon a subnet waiting for something its watches
// report is looked at again all the same.
const waitInterval = 5 * time.Minute

// soonInterval is how soon a subnet waiting for its cache to catch up is
// looked at again.
const soonInterval = time.Second

// nameTakenRetry is how soon a subnet whose name another object holds is
// looked at again: that object's deletion makes no event it watches.
const nameTakenRetry = 30 * time.Second

// Reconciler carves ClusterSubnets' subnets and makes their nodes pools.
type Reconciler struct {
	// Client writes; its cache serves the watches and the reads.
	Client client.Client
	// APIReader reads past the cache what the deletion waits for: a claim
	// or pool made a moment ago that the cache has not seen yet must not
	// be taken for gone.
	APIReader client.Reader
	Recorder  events.EventRecorder
	// WatchFilterValue limits reconciliation to ClusterSubnets labelled
	// cluster.x-k8s.io/watch-filter=<value>; what they make carries it.
	WatchFilterValue string
	// Kinds are the provider's pool kinds; those with a ChildPool may
	// parent a subnet.
	Kinds poolkind.Kinds
	// MaxConcurrentReconciles: a fleet's subnets are claimed at once, so
	// that their carves share the parent's batches.
	MaxConcurrentReconciles int
}

// SetupWithManager watches ClusterSubnets, what they make, their parent
// pools' creation and their Clusters.
func (r *Reconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager) error {
	b := ctrl.NewControllerManagedBy(mgr).
		Named("clustersubnet").
		WithOptions(controller.Options{MaxConcurrentReconciles: max(1, r.MaxConcurrentReconciles)}).
		For(&v1alpha1.ClusterSubnet{}, builder.WithPredicates(
			predicates.ResourceHasFilterLabel(mgr.GetScheme(), ctrl.LoggerFrom(ctx), r.WatchFilterValue))).
		// A claim's binding, and its going, bring its subnet back.
		Owns(&ipamv1.IPAddressClaim{}).
		// A Cluster created after its subnet takes it over; one paused or
		// unpaused (clusterctl move) stops or starts it.
		Watches(&clusterv1.Cluster{}, handler.EnqueueRequestsFromMapFunc(r.clusterToSubnets),
			builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{})))
	for _, kind := range r.Kinds {
		if kind.ChildPool == nil {
			continue
		}
		// A pool the subnet made (its readiness, its going), and a parent
		// pool made after the subnet named it.
		b = b.Watches(kind.New(), handler.EnqueueRequestsFromMapFunc(r.poolToSubnets(kind)),
			builder.WithPredicates(predicate.Funcs{GenericFunc: func(event.GenericEvent) bool { return false }}))
	}
	return b.Complete(r)
}

// clusterToSubnets maps a Cluster to the subnets that name it.
func (r *Reconciler) clusterToSubnets(ctx context.Context, cluster client.Object) []reconcile.Request {
	return r.subnetsIn(ctx, cluster.GetNamespace(), func(s *v1alpha1.ClusterSubnet) bool {
		return s.Spec.ClusterName == cluster.GetName()
	})
}

// poolToSubnets maps a pool of kind to the subnet that made it, and to the
// subnets that name it as their parent.
func (r *Reconciler) poolToSubnets(kind poolkind.Kind) handler.MapFunc {
	return func(ctx context.Context, pool client.Object) []reconcile.Request {
		if owner := metav1.GetControllerOf(pool); owner != nil && owner.Kind == "ClusterSubnet" {
			return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: pool.GetNamespace(), Name: owner.Name}}}
		}
		return r.subnetsIn(ctx, pool.GetNamespace(), func(s *v1alpha1.ClusterSubnet) bool {
			return s.Spec.ParentPoolRef.Kind == kind.Kind && s.Spec.ParentPoolRef.Name == pool.GetName()
		})
	}
}

func (r *Reconciler) subnetsIn(ctx context.Context, namespace string, match func(*v1alpha1.ClusterSubnet) bool) []reconcile.Request {
	subnets := &v1alpha1.ClusterSubnetList{}
	if err := r.Client.List(ctx, subnets, client.InNamespace(namespace)); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing the ClusterSubnets of a namespace")
		return nil
	}
	var out []reconcile.Request
	for i := range subnets.Items {
		if match(&subnets.Items[i]) {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&subnets.Items[i])})
		}
	}
	return out
}

// Reconcile carves the subnet, holds its gateway and makes its nodes pool,
// or releases them in the other order once it is deleted.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, reterr error) {
	subnet := &v1alpha1.ClusterSubnet{}
	if err := r.Client.Get(ctx, req.NamespacedName, subnet); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !reservation.MatchesWatchFilter(subnet, r.WatchFilterValue) {
		return ctrl.Result{}, nil
	}
	cluster := &clusterv1.Cluster{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: subnet.Namespace, Name: subnet.Spec.ClusterName}, cluster); err != nil {
		if !apierrors.IsNotFound(err) {
			return ctrl.Result{}, fmt.Errorf("getting the subnet's Cluster: %w", err)
		}
		cluster = nil
	}
	// clusterctl move pauses the Cluster: nothing is made or released
	// while its objects are copied, as its claims are not.
	if paused, _ := reservation.IsPaused(cluster, nil); paused || annotations.HasPaused(subnet) {
		return ctrl.Result{}, nil
	}

	patchHelper, err := patch.NewHelper(subnet, r.Client)
	if err != nil {
		return ctrl.Result{}, err
	}
	defer func() {
		subnet.Status.ObservedGeneration = subnet.Generation
		if err := patchHelper.Patch(ctx, subnet, patch.WithOwnedConditions{Conditions: []string{v1alpha1.ReadyCondition}}); err != nil {
			reterr = kerrors.NewAggregate([]error{reterr, client.IgnoreNotFound(err)})
		}
	}()

	s := &scope{subnet: subnet, cluster: cluster}
	if !subnet.DeletionTimestamp.IsZero() {
		return r.reconcileDelete(ctx, s)
	}
	// The finalizer is written before anything is made: a subnet deleted
	// meanwhile would leave claims that keep their records for ever.
	if !controllerutil.ContainsFinalizer(subnet, v1alpha1.ClusterSubnetFinalizer) {
		controllerutil.AddFinalizer(subnet, v1alpha1.ClusterSubnetFinalizer)
		return ctrl.Result{}, nil
	}
	return r.reconcileNormal(ctx, s)
}

// scope is one reconcile's subnet and what it found.
type scope struct {
	subnet  *v1alpha1.ClusterSubnet
	cluster *clusterv1.Cluster
	kind    poolkind.Kind
	parent  poolkind.Pool
	// soon asks to be looked at again shortly: what the subnet waits for
	// makes no event it watches.
	soon bool
	// retry, when set, is how soon a subnet waiting for something no
	// watch reports is looked at again.
	retry time.Duration
}

// wait is the result of a reconcile that waits: its watches bring it back,
// and a fallback in case one event was missed.
func (s *scope) wait() ctrl.Result {
	if s.soon {
		return ctrl.Result{RequeueAfter: soonInterval}
	}
	if s.retry > 0 {
		return ctrl.Result{RequeueAfter: s.retry}
	}
	return ctrl.Result{RequeueAfter: waitInterval}
}

// ready sets the subnet's Ready condition.
func (s *scope) ready(status metav1.ConditionStatus, reason, format string, args ...any) {
	conditions.Set(s.subnet, metav1.Condition{Type: v1alpha1.ReadyCondition, Status: status, Reason: reason,
		Message: fmt.Sprintf(format, args...)})
}

// event records an event on the subnet.
func (r *Reconciler) event(s *scope, related client.Object, kind, reason, format string, args ...any) {
	r.Recorder.Eventf(s.subnet, related, kind, reason, "ReconcileSubnet", format, args...)
}

func (r *Reconciler) warn(s *scope, reason, format string, args ...any) {
	r.event(s, nil, corev1.EventTypeWarning, reason, format, args...)
}
