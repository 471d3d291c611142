package claim

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/cache"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/source"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/cluster-api/util/predicates"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/backendcache"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/macaddress"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/metrics"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/reasons"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/reservation"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/retry"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/pkg/poolkind"
)

// +kubebuilder:rbac:groups=ipam.cluster.x-k8s.io,resources=ipaddressclaims,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=ipam.cluster.x-k8s.io,resources=ipaddressclaims/status,verbs=get;patch
// IPAddresses block their claim's and pool's deletion; with the
// OwnerReferencesPermissionEnforcement admission plugin that needs update on
// the owners' finalizers.
// +kubebuilder:rbac:groups=ipam.cluster.x-k8s.io,resources=ipaddressclaims/finalizers,verbs=update
// +kubebuilder:rbac:groups=ipam.cluster.x-k8s.io,resources=ipaddresses,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=clusters,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// SetupWithManager watches claims for our pool kinds, their IPAddresses,
// their Clusters (to resume when unpaused) and our pools (to resume when one
// becomes ready or unpaused, or frees space).
func (r *ClaimReconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager) error {
	if r.ExhaustedRetryInterval == 0 {
		r.ExhaustedRetryInterval = time.Minute
	}
	if r.MaxRetryInterval == 0 {
		r.MaxRetryInterval = retry.DefaultMaxRetryInterval
	}
	if r.FirstRetryInterval == 0 {
		r.FirstRetryInterval = retry.FirstRetryInterval
	}
	r.waits = retry.NewWaitBackoff(r.FirstRetryInterval, r.MaxRetryInterval)
	r.holds = newHolds(clock.RealClock{})
	r.released = cache.NewExpiring()
	r.written = cache.NewExpiring()
	r.wake = make(chan event.GenericEvent, wakeQueue)
	r.allocations = newBackgroundCalls[allocationAnswer](ctx, r.wake)
	r.releases = newBackgroundCalls[releaseAnswer](ctx, r.wake)
	// A release's answer is the only note that its claim was released: let
	// go before a reconcile takes it (thousands of deletions can keep a
	// claim queued longer than answerMemory), the claim would be released
	// again, a marker search and a read of the record the first release
	// deleted. It holds nothing, so it waits as long as a finished release
	// is remembered.
	r.releases.memory = releasedMemory
	log := ctrl.LoggerFrom(ctx)
	b := ctrl.NewControllerManagedBy(mgr).
		Named("ipaddressclaim").
		For(&ipamv1.IPAddressClaim{}, builder.WithPredicates(
			predicate.NewPredicateFuncs(func(o client.Object) bool {
				_, ours := r.Kinds.For(o.(*ipamv1.IPAddressClaim).Spec.PoolRef)
				return ours
			}),
			predicates.ResourceHasFilterLabel(mgr.GetScheme(), log, r.WatchFilterValue),
		)).
		WithOptions(controller.Options{
			MaxConcurrentReconciles: max(1, r.MaxConcurrentReconciles),
			RateLimiter:             retry.ErrorRateLimiter(r.MaxRetryInterval),
		}).
		// An IPAddress event goes to its claim; a deleted one may also have
		// freed the space a waiting claim needs.
		Owns(&ipamv1.IPAddress{}).
		Watches(&ipamv1.IPAddress{}, handler.EnqueueRequestsFromMapFunc(r.addressToWaitingClaims),
			builder.WithPredicates(predicate.Funcs{
				CreateFunc:  func(event.CreateEvent) bool { return false },
				UpdateFunc:  func(event.UpdateEvent) bool { return false },
				GenericFunc: func(event.GenericEvent) bool { return false },
			})).
		Watches(&clusterv1.Cluster{}, handler.EnqueueRequestsFromMapFunc(r.clusterToClaims),
			builder.WithPredicates(clusterPausedChanged())).
		// New credentials may be what a claim waits for.
		Watches(backendcache.SecretMetadata(), handler.EnqueueRequestsFromMapFunc(r.secretToWaitingClaims), builder.OnlyMetadata).
		// A background reservation or release has answered.
		WatchesRawSource(source.Channel(r.wake, &handler.EnqueueRequestForObject{}))
	for _, kind := range r.Kinds {
		b = b.Watches(kind.New(), handler.EnqueueRequestsFromMapFunc(r.poolToClaims(kind)),
			builder.WithPredicates(poolMayUnblockClaims()))
	}
	c, err := b.Build(r)
	if err != nil {
		return err
	}
	if r.MACAddresses != nil {
		// The MAC a claim waits for, or was bound with, may appear or
		// change: a metadata-only watch of the kind it is read from, started
		// when a claim first needs it (kindWatches), wakes the claims that
		// read it, on the changes that may change it (SourceChanged).
		r.MACAddresses.Watches = macaddress.NewKindWatches(log.WithName("mac-sources"), func(kind schema.GroupKind) error {
			mapping, err := mgr.GetRESTMapper().RESTMapping(kind)
			if err != nil {
				return fmt.Errorf("the API server does not serve it: %w", err)
			}
			obj := &metav1.PartialObjectMetadata{}
			obj.SetGroupVersionKind(mapping.GroupVersionKind)
			return c.Watch(source.Kind[client.Object](mgr.GetCache(), obj,
				r.MACAddresses.SourceEvents(kind, r.holds.release),
				predicate.Or(macaddress.SourceChanged(), r.MACAddresses.AwaitedSourceChanged(kind))))
		})
	}
	return nil
}

// Reconcile walks the contract: ignore foreign pools; find the Cluster and
// stop if it or the pool is paused; on deletion release; otherwise make sure
// the claim has its IPAddress.
func (r *ClaimReconciler) Reconcile(ctx context.Context, req ctrl.Request) (result ctrl.Result, reterr error) {
	claim := &ipamv1.IPAddressClaim{}
	if err := r.Client.Get(ctx, req.NamespacedName, claim); err != nil {
		if apierrors.IsNotFound(err) {
			metrics.Waiting.Forget(req.NamespacedName)
			r.waits.Forget(req.NamespacedName)
			r.holds.release(req.NamespacedName)
			r.allocations.forget(req.NamespacedName)
			r.releases.forget(req.NamespacedName)
			r.MACAddresses.Forget(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}

	// Claims for other providers' pools are not ours to touch, nor are
	// claims outside our watch filter (secondary watches enqueue them too).
	kind, ours := r.Kinds.For(claim.Spec.PoolRef)
	if !ours || !reservation.MatchesWatchFilter(claim, r.WatchFilterValue) {
		// A claim that left the watch filter (or whose pool reference
		// changed) is not counted as waiting here any more.
		metrics.Waiting.Forget(req.NamespacedName)
		return ctrl.Result{}, nil
	}
	clusterName := reservation.ClaimClusterName(claim)
	log := ctrl.LoggerFrom(ctx).WithValues(kind.Kind, claim.Spec.PoolRef.Name, "Cluster", clusterName)
	ctx = ctrl.LoggerInto(ctx, log)
	deleting := !claim.DeletionTimestamp.IsZero()
	if finalized, _ := r.released.Get(claim.UID); deleting && finalized == true {
		// Let go by an earlier reconcile, and read from a cache that has not
		// seen it: nothing is left to do, and nothing to write.
		return ctrl.Result{}, nil
	}
	if !deleting {
		behind, err := r.cacheBehind(ctx, claim)
		if err != nil || behind {
			return ctrl.Result{RequeueAfter: cacheLagRetry}, err
		}
	}

	cluster, err := reservation.GetCluster(ctx, r.Client, claim.Namespace, clusterName)
	if err != nil {
		return ctrl.Result{}, err
	}
	if cluster == nil && clusterName != "" && !deleting {
		// The Cluster watch brings the claim back when the Cluster appears;
		// the wait covers a missed event.
		log.Info("Cluster not found, waiting for it")
		r.Recorder.Eventf(claim, nil, corev1.EventTypeWarning, reasons.ClusterNotFoundReason, "Reconcile",
			"Cluster %s/%s not found", claim.Namespace, clusterName)
		return r.wait(claim), nil
	}

	pool, err := poolkind.GetPool(ctx, r.Client, kind, claim.Namespace, claim.Spec.PoolRef.Name)
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("getting %s %s: %w", kind.Kind, claim.Spec.PoolRef.Name, err)
	}

	s := &scope{claim: claim, kind: kind, pool: pool, reserver: sync.OnceValues(func() (backends.Reserver, error) {
		return r.Backends.Reserver(ctx, kind, pool)
	})}
	claimPatch := newClaimPatch(claim)
	s.writeMetadata = func(ctx context.Context) error { return claimPatch.applyMetadata(ctx, r.Client, claim) }
	notPaused := false
	defer func() {
		// The claim's conditions are set here, once, from what the phases
		// concluded, and written with the rest of what they changed.
		s.conclude()
		// A new claim's first reconcile writes its finalizer at once (see
		// finalizerFirst), and NotPaused goes with the first status written
		// after that.
		if notPaused && (controllerutil.ContainsFinalizer(claimPatch.before, reservation.ClaimFinalizer) || pool == nil) {
			markNotPaused(claimPatch.before, claim)
		}
		r.trackOutcome(req.NamespacedName, claim, kind)
		result, reterr = r.patchClaim(ctx, &claimPatch, claim, deleting, result, reterr)
	}()

	if paused, why := reservation.IsPaused(cluster, pool); paused {
		s.setCondition(metav1.Condition{Type: clusterv1.PausedCondition, Status: metav1.ConditionTrue,
			Reason: clusterv1.PausedReason, Message: why})
		log.V(4).Info("Paused, skipping", "why", why)
		return ctrl.Result{}, nil
	}
	notPaused = true

	if deleting {
		return r.reconcileDelete(ctx, s)
	}
	return r.reconcileNormal(ctx, s)
}

// markNotPaused sets Paused=False on a claim that is not paused, when it
// costs no write of its own: when the status is written anyway, or when the
// claim still says it is paused.
func markNotPaused(before, claim *ipamv1.IPAddressClaim) {
	if !equality.Semantic.DeepEqual(before.Status, claim.Status) || conditions.IsTrue(claim, clusterv1.PausedCondition) {
		conditions.Set(claim, metav1.Condition{Type: clusterv1.PausedCondition, Status: metav1.ConditionFalse,
			Reason: clusterv1.NotPausedReason})
	}
}

// trackOutcome counts the claim in the waiting-claims gauge, and forgets
// the wait backoff of a claim that is Ready. Only Ready does: the reconcile
// that starts a reservation ends no wait, so a claim refused again and
// again waits longer each time, up to the cap.
func (r *ClaimReconciler) trackOutcome(key types.NamespacedName, claim *ipamv1.IPAddressClaim, kind poolkind.Kind) {
	trackWaiting(claim, kind)
	if conditions.IsTrue(claim, ipamv1.IPAddressClaimReadyCondition) {
		r.waits.Forget(key)
		r.holds.release(key)
	}
}

// patchClaim writes what the reconcile changed on the claim, and remembers
// the two writes a lagging cache must not make it repeat: the first
// addressRef, and the release (the finalizer removed). A conflict means the
// claim was read from a cache that had not seen its last change; it is
// looked at again shortly, and is no error.
func (r *ClaimReconciler) patchClaim(ctx context.Context, p *claimPatch, claim *ipamv1.IPAddressClaim, deleting bool,
	result ctrl.Result, reterr error) (ctrl.Result, error) {
	err := p.apply(ctx, r.Client, claim)
	switch {
	case apierrors.IsConflict(err) && reterr == nil:
		// That change's event brings the claim back; this covers a missed one.
		ctrl.LoggerFrom(ctx).V(2).Info("The claim changed since it was read, looking again")
		return ctrl.Result{RequeueAfter: cacheLagRetry}, nil
	case err != nil:
		return result, kerrors.NewAggregate([]error{reterr, err})
	case p.before.Status.AddressRef.Name == "" && claim.Status.AddressRef.Name != "":
		r.written.Set(claim.UID, true, writtenMemory)
	case deleting && !controllerutil.ContainsFinalizer(claim, reservation.ClaimFinalizer) && controllerutil.ContainsFinalizer(p.before, reservation.ClaimFinalizer):
		r.released.Set(claim.UID, true, releasedMemory)
	}
	return result, reterr
}

// trackWaiting counts the claim as waiting while it has no address, on its
// pool, for the reason and since when it waits.
func trackWaiting(claim *ipamv1.IPAddressClaim, kind poolkind.Kind) {
	key := client.ObjectKeyFromObject(claim)
	ready := conditions.Get(claim, ipamv1.IPAddressClaimReadyCondition)
	if !claim.DeletionTimestamp.IsZero() || (ready != nil && ready.Status == metav1.ConditionTrue) {
		metrics.Waiting.Forget(key)
		return
	}
	reason := "Pending"
	switch {
	case conditions.IsTrue(claim, clusterv1.PausedCondition):
		// Not a wait anyone can end but by unpausing: counted, and left
		// out of the waiting alert.
		reason = clusterv1.PausedReason
	case ready != nil:
		reason = ready.Reason
	}
	poolNamespace := ""
	if kind.Namespaced {
		poolNamespace = claim.Namespace
	}
	// The wait began when Ready last turned False: at the claim's creation,
	// or when a bound claim lost its address. The condition survives a
	// restart, so the age does too.
	since := claim.CreationTimestamp.Time
	if ready != nil && ready.Status == metav1.ConditionFalse && ready.LastTransitionTime.After(since) {
		since = ready.LastTransitionTime.Time
	}
	metrics.Waiting.Set(key, kind.Kind, poolNamespace, claim.Spec.PoolRef.Name, reason, since)
}
