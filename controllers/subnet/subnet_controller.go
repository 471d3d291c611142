package subnet

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
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
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/internal/notfound"
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
		// So does its IPAddress's creation: the cache may see the claim's
		// binding before the IPAddress it names.
		Watches(&ipamv1.IPAddress{}, handler.EnqueueRequestsFromMapFunc(r.addressToSubnet),
			builder.WithPredicates(predicate.Funcs{
				UpdateFunc:  func(event.UpdateEvent) bool { return false },
				DeleteFunc:  func(event.DeleteEvent) bool { return false },
				GenericFunc: func(event.GenericEvent) bool { return false },
			})).
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

// addressToSubnet maps an IPAddress to the subnet whose claim it binds.
func (r *Reconciler) addressToSubnet(ctx context.Context, address client.Object) []reconcile.Request {
	owner := metav1.GetControllerOf(address)
	if owner == nil || owner.Kind != "IPAddressClaim" {
		return nil
	}
	claim := &ipamv1.IPAddressClaim{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: address.GetNamespace(), Name: owner.Name}, claim); err != nil {
		// Not in the cache yet: its own event brings the subnet back.
		return nil
	}
	if subnet := metav1.GetControllerOf(claim); subnet != nil && subnet.Kind == "ClusterSubnet" && subnet.APIVersion == v1alpha1.GroupVersion.String() {
		return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: claim.Namespace, Name: subnet.Name}}}
	}
	return nil
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

	s := &scope{subnet: subnet, cluster: cluster}
	if subnet.DeletionTimestamp.IsZero() {
		// The finalizer and the Cluster's ownership are written before
		// anything is made, and at once, so that the same reconcile goes on
		// to claim the child: a fleet's carves then arrive together.
		switch err := r.writeMetadata(ctx, s); {
		case apierrors.IsConflict(err):
			// Read from a cache behind the server: nothing was written.
			return ctrl.Result{RequeueAfter: soonInterval}, nil
		case apierrors.IsNotFound(err):
			return ctrl.Result{}, nil
		case err != nil:
			return ctrl.Result{}, err
		}
	}

	patchHelper, err := patch.NewHelper(subnet, r.Client)
	if err != nil {
		return ctrl.Result{}, err
	}
	defer func() {
		subnet.Status.ObservedGeneration = subnet.Generation
		if err := patchHelper.Patch(ctx, subnet, patch.WithOwnedConditions{Conditions: []string{v1alpha1.ReadyCondition}}); err != nil {
			reterr = kerrors.NewAggregate([]error{reterr, notfound.Ignore(err)})
		}
	}()

	if !subnet.DeletionTimestamp.IsZero() {
		return r.reconcileDelete(ctx, s)
	}
	return r.reconcileNormal(ctx, s)
}

// writeMetadata adds the subnet's finalizer, and its Cluster as an owner
// when the Cluster exists and is not going, in one write locked to the
// version the subnet was read at: a subnet deleted meanwhile must leave no
// claims that keep their records for ever, and one that held a block
// without its owner would outlive its Cluster. On failure the subnet is
// left as read.
func (r *Reconciler) writeMetadata(ctx context.Context, s *scope) error {
	before := s.subnet.DeepCopy()
	controllerutil.AddFinalizer(s.subnet, v1alpha1.ClusterSubnetFinalizer)
	if s.cluster != nil && s.cluster.DeletionTimestamp.IsZero() && !ownedBy(s.subnet, s.cluster) {
		// The owner's UID is read past the cache: a Cluster deleted and made
		// again under its name, which the cache has not seen yet, would own
		// the subnet by a UID nothing has, and the garbage collector would
		// delete the subnet and so release its child.
		live := &clusterv1.Cluster{}
		switch err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(s.cluster), live); {
		case err == nil && live.DeletionTimestamp.IsZero() && !ownedBy(s.subnet, live):
			s.subnet.SetOwnerReferences(append(s.subnet.GetOwnerReferences(), metav1.OwnerReference{
				APIVersion: clusterv1.GroupVersion.String(), Kind: "Cluster", Name: live.Name, UID: live.UID}))
		case err != nil && !apierrors.IsNotFound(err):
			return fmt.Errorf("reading the subnet's Cluster: %w", err)
		}
	}
	if equality.Semantic.DeepEqual(before.ObjectMeta, s.subnet.ObjectMeta) {
		return nil
	}
	if err := r.Client.Patch(ctx, s.subnet, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		before.DeepCopyInto(s.subnet)
		return fmt.Errorf("writing the subnet's finalizer and owner: %w", err)
	}
	return nil
}

// ownedBy says whether the Cluster owns the subnet.
func ownedBy(subnet *v1alpha1.ClusterSubnet, cluster *clusterv1.Cluster) bool {
	for _, ref := range subnet.GetOwnerReferences() {
		if ref.UID == cluster.UID {
			return true
		}
	}
	return false
}

// scope is one reconcile's subnet and what it found.
type scope struct {
	subnet  *v1alpha1.ClusterSubnet
	cluster *clusterv1.Cluster
	kind    poolkind.Kind
	parent  poolkind.Pool
	// retry, when set, is how soon a subnet waiting for something no
	// watch reports is looked at again.
	retry time.Duration
}

// wait is the result of a reconcile that waits: its watches bring it back,
// and a fallback in case one event was missed.
func (s *scope) wait() ctrl.Result {
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
