package controllers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/cache"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
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

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/api/v1alpha1"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends"
)

const (
	// ClaimFinalizer keeps a claim until its address is released.
	ClaimFinalizer = "ipam-bridge.github.io/release-address"
	// ProtectAddressFinalizer keeps an IPAddress from being deleted by anyone
	// but the claim reconciler.
	ProtectAddressFinalizer = "ipam-bridge.github.io/protect-address"
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

// ClaimReconciler fulfils IPAddressClaims that reference one of our pool
// kinds: it owns the whole Cluster API IPAM contract and asks the pool's
// backend only to allocate, look up and release.
type ClaimReconciler struct {
	Client client.Client
	// APIReader reads past the cache where a decision must not rest on a
	// stale view.
	APIReader client.Reader
	// InFlight keeps allocations and pool deletions apart.
	InFlight *InFlight
	// Alarms tells a pool at once that its credentials were refused, or
	// that its IPAM system answered what the pool may not give.
	Alarms *PoolAlarms
	// Tombstones learns of the grace periods releases start, for the audit.
	Tombstones *Tombstones
	Recorder   events.EventRecorder
	Kinds      PoolKinds
	Backends   *Backends
	// MachineNames names the Machine of each new claim, for the pools'
	// patterns.
	MachineNames *MachineNames
	// MACAddresses finds the MAC of the machine's interface, for pools
	// whose fixed addresses carry it (macaddress.go); nil for none.
	MACAddresses *MACAddresses

	// Identity distinguishes this management cluster's reservations when
	// several share one IPAM system.
	Identity string
	// WatchFilterValue limits the reconciler to objects with a matching
	// cluster.x-k8s.io/watch-filter label.
	WatchFilterValue string
	// MaxConcurrentReconciles is the number of claims reconciled at once.
	MaxConcurrentReconciles int
	// ExhaustedRetryInterval is how often a claim on a full pool tries again
	// when no release in this cluster frees space sooner.
	ExhaustedRetryInterval time.Duration
	// MaxRetryInterval caps the wait of a claim that is not bound, and the
	// backoff of a failed reconcile.
	MaxRetryInterval time.Duration
	// FirstRetryInterval is the first wait of a claim that waits; 1s when
	// zero.
	FirstRetryInterval time.Duration

	waits *waitBackoff
	// holds keep a refused claim from asking again before its wait is
	// over (see holds).
	holds *holds
	// allocations and releases run off the claim workers; their answers
	// come back through wake.
	allocations *backgroundCalls[allocationAnswer]
	releases    *backgroundCalls[releaseAnswer]
	wake        chan event.GenericEvent
	// released remembers the claims whose release is done, by UID, until
	// their finalizer removal has surely reached the cache; true once the
	// finalizer is removed too.
	released *cache.Expiring
	// written remembers the claims whose IPAddress this manager just
	// created, by UID, until the cache has surely seen it; true once their
	// bound status is written too.
	written *cache.Expiring
}

const (
	// releasedMemory is how long a finished release is remembered.
	releasedMemory = 10 * time.Minute
	// writtenMemory is how long a created IPAddress is remembered.
	writtenMemory = time.Minute
	// cacheLagRetry is when a claim whose IPAddress the cache has not seen
	// yet is looked at again, should the IPAddress's event be missed.
	cacheLagRetry = 5 * time.Second
	// wakeQueue is how many answers wait to be enqueued; a full queue only
	// slows the answering calls down.
	wakeQueue = 1024
)

// SetupWithManager watches claims for our pool kinds, their IPAddresses,
// their Clusters (to resume when unpaused) and our pools (to resume when one
// becomes ready or unpaused, or frees space).
func (r *ClaimReconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager) error {
	if r.ExhaustedRetryInterval == 0 {
		r.ExhaustedRetryInterval = time.Minute
	}
	if r.MaxRetryInterval == 0 {
		r.MaxRetryInterval = DefaultMaxRetryInterval
	}
	if r.FirstRetryInterval == 0 {
		r.FirstRetryInterval = firstRetryInterval
	}
	r.waits = newWaitBackoff(r.FirstRetryInterval, r.MaxRetryInterval)
	r.holds = newHolds(clock.RealClock{})
	r.released = cache.NewExpiring()
	r.written = cache.NewExpiring()
	r.wake = make(chan event.GenericEvent, wakeQueue)
	r.allocations = newBackgroundCalls[allocationAnswer](ctx, r.wake)
	r.releases = newBackgroundCalls[releaseAnswer](ctx, r.wake)
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
			RateLimiter:             errorRateLimiter(r.MaxRetryInterval),
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
		Watches(secretMetadata(), handler.EnqueueRequestsFromMapFunc(r.secretToWaitingClaims), builder.OnlyMetadata).
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
		// read it, on the changes that may change it (macSourceChanged).
		r.MACAddresses.watches = newKindWatches(log.WithName("mac-sources"), func(kind schema.GroupKind) error {
			mapping, err := mgr.GetRESTMapper().RESTMapping(kind)
			if err != nil {
				return fmt.Errorf("the API server does not serve it: %w", err)
			}
			obj := &metav1.PartialObjectMetadata{}
			obj.SetGroupVersionKind(mapping.GroupVersionKind)
			return c.Watch(source.Kind[client.Object](mgr.GetCache(), obj,
				r.MACAddresses.sourceEvents(kind), predicate.Or(macSourceChanged(), r.MACAddresses.awaitedSourceChanged(kind))))
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
			waiting.forget(req.NamespacedName)
			r.waits.forget(req.NamespacedName)
			r.holds.release(req.NamespacedName)
			r.allocations.forget(req.NamespacedName)
			r.releases.forget(req.NamespacedName)
			r.MACAddresses.forget(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}

	// Claims for other providers' pools are not ours to touch, nor are
	// claims outside our watch filter (secondary watches enqueue them too).
	kind, ours := r.Kinds.For(claim.Spec.PoolRef)
	if !ours || !matchesWatchFilter(claim, r.WatchFilterValue) {
		return ctrl.Result{}, nil
	}
	clusterName := claimClusterName(claim)
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

	cluster, err := getCluster(ctx, r.Client, claim.Namespace, clusterName)
	if err != nil {
		return ctrl.Result{}, err
	}
	if cluster == nil && clusterName != "" && !deleting {
		// The Cluster watch brings the claim back when the Cluster appears;
		// the wait covers a missed event.
		log.Info("Cluster not found, waiting for it")
		r.Recorder.Eventf(claim, nil, corev1.EventTypeWarning, ClusterNotFoundReason, "Reconcile",
			"Cluster %s/%s not found", claim.Namespace, clusterName)
		return r.wait(claim), nil
	}

	pool, err := getPool(ctx, r.Client, kind, claim.Namespace, claim.Spec.PoolRef.Name)
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("getting %s %s: %w", kind.Kind, claim.Spec.PoolRef.Name, err)
	}

	claimPatch := newClaimPatch(claim)
	notPaused := false
	defer func() {
		if notPaused {
			markNotPaused(claimPatch.before, claim)
		}
		r.trackOutcome(req.NamespacedName, claim, kind)
		result, reterr = r.patchClaim(ctx, &claimPatch, claim, deleting, result, reterr)
	}()

	if paused, why := isPaused(cluster, pool); paused {
		conditions.Set(claim, metav1.Condition{Type: clusterv1.PausedCondition, Status: metav1.ConditionTrue,
			Reason: clusterv1.PausedReason, Message: why})
		log.V(4).Info("Paused, skipping", "why", why)
		return ctrl.Result{}, nil
	}
	// A new claim's first reconcile persists only its finalizer, in one
	// write, and the one that starts its reservation nothing: NotPaused goes
	// with the allocation's status that follows (see markNotPaused).
	notPaused = controllerutil.ContainsFinalizer(claim, ClaimFinalizer) || pool == nil

	if deleting {
		return r.reconcileDelete(ctx, claim, kind, pool)
	}
	return r.reconcileNormal(ctx, claim, kind, pool)
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
func (r *ClaimReconciler) trackOutcome(key types.NamespacedName, claim *ipamv1.IPAddressClaim, kind PoolKind) {
	trackWaiting(claim, kind)
	if conditions.IsTrue(claim, ipamv1.IPAddressClaimReadyCondition) {
		r.waits.forget(key)
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
	case deleting && !controllerutil.ContainsFinalizer(claim, ClaimFinalizer) && controllerutil.ContainsFinalizer(p.before, ClaimFinalizer):
		r.released.Set(claim.UID, true, releasedMemory)
	}
	return result, reterr
}

// reconcileNormal makes sure the claim has its IPAddress. Every outcome that
// leaves the claim waiting either ends with an event the reconciler watches
// (pool, Cluster, IPAddress) or is retried with a capped backoff, so that no
// claim waits for an event that may never come.
func (r *ClaimReconciler) reconcileNormal(ctx context.Context, claim *ipamv1.IPAddressClaim, kind PoolKind, pool Pool) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx)

	if pool == nil {
		setClaimReady(claim, metav1.ConditionFalse, ipamv1.IPAddressClaimReadyPoolNotReadyReason,
			fmt.Sprintf("%s %s not found", kind.Kind, claim.Spec.PoolRef.Name))
		return r.wait(claim), nil
	}

	// The finalizer is persisted before anything is reserved, so a claim
	// can never be deleted without its address being released. The
	// Machine's name, which the records will carry, goes in the same write.
	// A pool being deleted waits for every claim with the finalizer: a new
	// claim of it gets none, so that it cannot hold the pool.
	if !controllerutil.ContainsFinalizer(claim, ClaimFinalizer) {
		if !pool.GetDeletionTimestamp().IsZero() {
			return r.poolBeingDeleted(claim, kind, pool), nil
		}
		if err := r.MachineNames.Ensure(ctx, claim); err != nil {
			return ctrl.Result{}, err
		}
		controllerutil.AddFinalizer(claim, ClaimFinalizer)
		return ctrl.Result{}, nil
	}

	// The IPAddress comes first: a bound claim stays bound whatever the
	// pool's state, and its resync costs no backend call.
	address := &ipamv1.IPAddress{}
	err := r.Client.Get(ctx, client.ObjectKeyFromObject(claim), address)
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return ctrl.Result{}, fmt.Errorf("getting IPAddress: %w", err)
	case isPredecessorsAddress(address, claim):
		// A claim of the same name that is gone left its IPAddress; it is
		// garbage, and never this claim's.
		log.Info("Removing the IPAddress of a deleted claim of the same name", "owner", metav1.GetControllerOf(address).UID)
		setClaimReady(claim, metav1.ConditionFalse, AddressConflictReason,
			fmt.Sprintf("IPAddress %s belonged to a deleted claim of the same name and is being removed", address.Name))
		if err := r.removeAddressFinalizer(ctx, address); err != nil {
			return ctrl.Result{}, err
		}
		if err := r.Client.Delete(ctx, address, client.Preconditions{UID: &address.UID}); client.IgnoreNotFound(err) != nil {
			return ctrl.Result{}, fmt.Errorf("deleting the IPAddress of a deleted claim: %w", err)
		}
		return r.wait(claim), nil
	case !addressBelongsTo(address, claim):
		setClaimReady(claim, metav1.ConditionFalse, AddressConflictReason,
			fmt.Sprintf("IPAddress %s exists but belongs to claim %q of pool %s %s", address.Name,
				address.Spec.ClaimRef.Name, address.Spec.PoolRef.Kind, address.Spec.PoolRef.Name))
		return r.wait(claim), nil
	case !address.DeletionTimestamp.IsZero():
		// Someone deleted the IPAddress while its claim lives. Let it go;
		// the marker finds the same address again. The delete event brings
		// the claim back, and the wait covers an event that is missed.
		log.Info("IPAddress is being deleted while its claim exists, recreating it")
		setClaimReady(claim, metav1.ConditionFalse, AddressDeletedReason,
			fmt.Sprintf("IPAddress %s is being deleted; it is written again with the same address", address.Name))
		keepReservation(claim, address)
		if err := r.persistReservation(ctx, claim); err != nil {
			return ctrl.Result{}, err
		}
		r.written.Delete(claim.UID)
		if err := r.removeAddressFinalizer(ctx, address); err != nil {
			return ctrl.Result{}, err
		}
		return r.wait(claim), nil
	default:
		if err := r.settleLateAnswer(ctx, claim, address); err != nil {
			return ctrl.Result{}, err
		}
		if err := r.writeDeferredMAC(ctx, claim, kind, pool, address); err != nil {
			return ctrl.Result{}, err
		}
		if err := r.checkBoundMAC(ctx, claim, pool); err != nil {
			return ctrl.Result{}, err
		}
		claim.Status.AddressRef = ipamv1.IPAddressReference{Name: address.Name}
		setClaimReady(claim, metav1.ConditionTrue, AddressAllocatedReason, "")
		return ctrl.Result{}, nil
	}

	// A claim that lost its IPAddress (status.addressRef is set) rebuilds it
	// from its marker, which needs the connection but not the pool's counts
	// or readiness; a new claim waits for a ready pool.
	rebuilding := claim.Status.AddressRef.Name != ""
	if !rebuilding && !pool.GetDeletionTimestamp().IsZero() {
		return r.poolBeingDeleted(claim, kind, pool), nil
	}
	if !rebuilding && !conditions.IsTrue(pool, v1alpha1.ReadyCondition) {
		msg := fmt.Sprintf("%s %s is not ready", kind.Kind, pool.GetName())
		if m := conditions.GetMessage(pool, v1alpha1.ReadyCondition); m != "" {
			msg += ": " + m
		}
		setClaimReady(claim, metav1.ConditionFalse, ipamv1.IPAddressClaimReadyPoolNotReadyReason, msg)
		return r.wait(claim), nil
	}
	return r.allocate(ctx, claim, kind, pool)
}

// wait is the result of a reconcile that leaves the claim waiting for
// something no event is guaranteed to announce: it comes back after a capped
// backoff.
func (r *ClaimReconciler) wait(claim *ipamv1.IPAddressClaim) ctrl.Result {
	return ctrl.Result{RequeueAfter: r.waits.next(client.ObjectKeyFromObject(claim))}
}

// holdBack is wait for a claim whose reservation was refused or failed: it
// also holds the claim back for that wait (see holds).
func (r *ClaimReconciler) holdBack(claim *ipamv1.IPAddressClaim) ctrl.Result {
	retry := r.wait(claim)
	r.holds.hold(claim, retry.RequeueAfter)
	return retry
}

// allocate reserves the claim's address in the backend and writes the
// IPAddress. The reservation runs in the background (see backgroundCalls):
// this reconcile starts it and returns, and the one its answer brings
// writes the IPAddress. A crash between the two is harmless: the next
// attempt finds the reservation by its marker.
func (r *ClaimReconciler) allocate(ctx context.Context, claim *ipamv1.IPAddressClaim, kind PoolKind, pool Pool) (ctrl.Result, error) {
	call, state := r.allocations.take(claim)
	switch state {
	case callRunning:
		if call != nil && call.Slow() && claim.Status.AddressRef.Name == "" {
			waitingForAnswer(claim, ReservationPendingReason, kind, pool, "reservation")
		}
		return ctrl.Result{}, nil
	case callDone:
		if call.err == nil || !r.answeredBeforeAChange(ctx, kind, pool, call.value) {
			// The call held the pool's in-flight count until now: the
			// pool was not let go meanwhile.
			defer call.Finish()
			return r.bind(ctx, claim, kind, pool, call.value.backend, call.value.alloc, call.err)
		}
		// Refused with credentials or a pool spec that changed since (an
		// answer left untaken while the pool was not ready, say): the
		// change may be what the claim waited for, so it asks again now
		// rather than wait, or alarm the pool, on that old refusal.
		call.Finish()
		ctrl.LoggerFrom(ctx).V(2).Info("The reservation was refused before the pool's credentials or spec changed, asking again",
			"refusal", call.err.Error())
	}
	// Refused moments ago: asked now, the IPAM system would most likely
	// refuse again (see holds).
	if wait := r.holds.remaining(claim); wait > 0 {
		return ctrl.Result{RequeueAfter: wait}, nil
	}
	// The pool is being validated again because a claim got an address it
	// may not give: asking now would get the same answer (see Revalidate).
	if r.Alarms.Revalidating(pool) {
		return r.wait(claim), nil
	}
	// The pool reconciler lets a deleted pool go only when no allocation
	// from it is under way, and refuses new ones first (see InFlight).
	done, open := r.InFlight.start(pool.GetUID())
	if !open || !pool.GetDeletionTimestamp().IsZero() {
		done()
		return r.poolBeingDeleted(claim, kind, pool), nil
	}
	if err := r.MachineNames.Ensure(ctx, claim); err != nil {
		done()
		return ctrl.Result{}, err
	}
	// A pool whose fixed addresses carry the machine's MAC may have the
	// claim wait for it (macaddress.go).
	mac, later, err := r.macForAllocation(ctx, claim, pool)
	if err != nil || later != nil {
		done()
		return ptr.Deref(later, ctrl.Result{}), err
	}
	backend, err := r.Backends.For(ctx, kind, pool)
	if err != nil {
		done()
		return r.allocationFailed(claim, err)
	}
	source := backend
	bc, backend := r.backendClaim(claim), r.requestedAddress(claim, pool, backend)
	bc.MAC = mac
	if !r.allocations.start(ctx, claim, done, func(ctx context.Context) (allocationAnswer, error) {
		alloc, err := backend.Allocate(ctx, bc)
		return allocationAnswer{backend: backend, alloc: alloc, source: source}, err
	}) {
		done()
		return ctrl.Result{RequeueAfter: busyRetry}, nil
	}
	return ctrl.Result{}, nil
}

// waitingForAnswer says on the claim that its reservation or release has
// waited slowAnswer for the IPAM system, which is slow or throttling: the
// answer still brings the claim back. Not an event: nothing is wrong yet.
func waitingForAnswer(claim *ipamv1.IPAddressClaim, reason string, kind PoolKind, pool Pool, what string) {
	setClaimReady(claim, metav1.ConditionFalse, reason, fmt.Sprintf(
		"the IPAM system of %s %s has not answered the claim's %s for %s: it is slow or throttling (see the pool's conditions and the metrics capi_ipam_bridge_backend_*); the claim goes on once it answers",
		kind.Kind, pool.GetName(), what, slowAnswer))
}

// allocationAnswer is a background reservation's answer.
type allocationAnswer struct {
	backend backends.Backend
	alloc   backends.Allocation
	// source is the pool's backend the reservation went through, as
	// built from the pool's spec and Secret at the time.
	source backends.Backend
}

// answeredBeforeAChange says whether the answer came through a backend
// that the pool's spec or Secret has replaced since.
func (r *ClaimReconciler) answeredBeforeAChange(ctx context.Context, kind PoolKind, pool Pool, answer allocationAnswer) bool {
	if answer.source == nil {
		return false
	}
	current, err := r.Backends.For(ctx, kind, pool)
	return err == nil && current != answer.source
}

// bind writes the IPAddress of the address the backend reserved for the
// claim, unless another live IPAddress holds it, and reports a failed
// reservation.
func (r *ClaimReconciler) bind(ctx context.Context, claim *ipamv1.IPAddressClaim, kind PoolKind, pool Pool,
	backend backends.Backend, alloc backends.Allocation, err error) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	if err != nil {
		switch {
		case IsRefusal(err):
			r.Alarms.Refused(kind, pool, backend, claim, err)
		case errors.Is(err, backends.ErrUnusableAnswer):
			r.Recorder.Eventf(pool, claim, corev1.EventTypeWarning, UnusableAddressAnsweredReason, "Allocate",
				"Claim %s/%s: %v", claim.Namespace, claim.Name, err)
			r.Alarms.Revalidate(kind, pool)
		}
		return r.allocationFailed(claim, err)
	}

	holder, err := r.heldInCluster(ctx, claim, alloc)
	if err != nil {
		// Its retry would reserve again first: the wait spaces that too.
		r.holdBack(claim)
		return ctrl.Result{}, err
	}
	if holder != nil {
		return r.handOver(ctx, claim, kind, pool, backend, alloc, holder)
	}

	address, err := r.newIPAddress(claim, pool, alloc)
	if err != nil {
		return ctrl.Result{}, err
	}
	recordReservation(address, alloc, r.backendClaim(claim).Marker)
	if err := r.Client.Create(ctx, address); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return r.lostToAnotherWriter(ctx, claim, backend, alloc)
		}
		setClaimReady(claim, metav1.ConditionFalse, ipamv1.IPAddressClaimReadyAllocationFailedReason,
			fmt.Sprintf("creating IPAddress for %s: %v", alloc.Address, err))
		r.holdBack(claim)
		return ctrl.Result{}, fmt.Errorf("creating IPAddress: %w", err)
	}
	r.written.Set(claim.UID, false, writtenMemory)
	describeRecordMAC(claim, pool, alloc.MAC)
	log.Info("Allocated address", "address", alloc.Address.String(), "reference", alloc.Reference)
	claimBindSeconds.WithLabelValues(kind.Kind).Observe(time.Since(claim.CreationTimestamp.Time).Seconds())
	r.Recorder.Eventf(claim, pool, corev1.EventTypeNormal, AddressAllocatedReason, "Allocate",
		"Allocated %s from %s %s (%s)", alloc.Address, kind.Kind, pool.GetName(), alloc.Reference)

	forgetReservation(claim)
	claim.Status.AddressRef = ipamv1.IPAddressReference{Name: address.Name}
	setClaimReady(claim, metav1.ConditionTrue, AddressAllocatedReason, "")
	return ctrl.Result{}, nil
}

// lostToAnotherWriter handles an IPAddress that another writer created
// between this reconcile's read and its create: a second manager running
// without leader election, say, that reserved its own record for the claim
// at the same time. If that IPAddress holds another address, this
// reservation is released at once rather than left for the audit; either
// way the IPAddress's event brings the claim back to be bound to it.
func (r *ClaimReconciler) lostToAnotherWriter(ctx context.Context, claim *ipamv1.IPAddressClaim, backend backends.Reserver, alloc backends.Allocation) (ctrl.Result, error) {
	existing := &ipamv1.IPAddress{}
	if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(claim), existing); err != nil {
		return ctrl.Result{}, fmt.Errorf("reading the IPAddress another writer created: %w", err)
	}
	if !addressBelongsTo(existing, claim) {
		// Not this claim's: nothing of ours to undo.
		return ctrl.Result{RequeueAfter: cacheLagRetry}, nil
	}
	return ctrl.Result{RequeueAfter: cacheLagRetry}, r.releaseSecondReservation(ctx, claim, backend, alloc, existing)
}

// settleLateAnswer handles a reservation that answered after the claim was
// bound by another writer, which the claim's IPAddress, seen first, shows:
// see lostToAnotherWriter.
func (r *ClaimReconciler) settleLateAnswer(ctx context.Context, claim *ipamv1.IPAddressClaim, address *ipamv1.IPAddress) error {
	call, state := r.allocations.take(claim)
	if state != callDone {
		return nil
	}
	defer call.Finish()
	if call.err != nil {
		return nil
	}
	return r.releaseSecondReservation(ctx, claim, call.value.backend, call.value.alloc, address)
}

// releaseSecondReservation releases a reservation made for the claim while
// another writer bound it to the address of existing, unless it is that
// same reservation.
func (r *ClaimReconciler) releaseSecondReservation(ctx context.Context, claim *ipamv1.IPAddressClaim, backend backends.Reserver,
	alloc backends.Allocation, existing *ipamv1.IPAddress) error {
	if existing.Spec.Address == alloc.Address.Addr().String() {
		return nil
	}
	rec := backends.Record{Address: alloc.Address, Marker: r.backendClaim(claim).Marker, Reference: alloc.Reference}
	if err := backend.Delete(ctx, rec); err != nil {
		return fmt.Errorf("releasing %s (%s), reserved while another writer bound the claim to %s: %w",
			alloc.Address, alloc.Reference, existing.Spec.Address, err)
	}
	ctrl.LoggerFrom(ctx).Info("Another writer bound the claim first; released this reservation", "released", alloc.Address.String(),
		"reference", alloc.Reference, "bound", existing.Spec.Address)
	return nil
}

// poolBeingDeleted leaves a claim of a pool being deleted waiting. A claim
// with the release finalizer may hold a reservation in the pool (a record
// made before a manager died, say), so the pool waits in turn until the
// claim is deleted and its release, which goes through the pool, is done.
func (r *ClaimReconciler) poolBeingDeleted(claim *ipamv1.IPAddressClaim, kind PoolKind, pool Pool) ctrl.Result {
	msg := fmt.Sprintf("%s %s is being deleted and gives no address out", kind.Kind, pool.GetName())
	if controllerutil.ContainsFinalizer(claim, ClaimFinalizer) {
		msg += "; its deletion waits for this claim to be deleted"
	}
	setClaimReady(claim, metav1.ConditionFalse, ipamv1.IPAddressClaimReadyPoolNotReadyReason, msg)
	return r.wait(claim)
}

// allocationFailed reports a refused or failed reservation, and holds the
// claim back until its wait is over (see holds), wherever the refusal came
// from: this reconcile, or the background reservation whose answer brought
// the claim back. The reconcile that starts the next reservation returns
// success, which resets controller-runtime's error backoff; the claim's own
// wait, which only Ready resets, spaces the attempts.
func (r *ClaimReconciler) allocationFailed(claim *ipamv1.IPAddressClaim, err error) (ctrl.Result, error) {
	reason := claimReason(err)
	msg := err.Error()
	var retry ctrl.Result
	switch reason {
	case ipamv1.IPAddressClaimReadyPoolExhaustedReason, PlannedRecordConflictReason:
		// A release in this cluster wakes the claim sooner (see
		// addressToWaitingClaims); this covers space freed, or a plan
		// given back, in the backend.
		retry = ctrl.Result{RequeueAfter: r.ExhaustedRetryInterval}
		r.holds.hold(claim, retry.RequeueAfter)
	case MACAddressInUseReason:
		// Held back by a hold of its own, which a change of the MAC's
		// source ends (macaddress.go).
		retry = r.wait(claim)
		if more := r.MACAddresses.refused(claim, retry.RequeueAfter); more != "" {
			msg += "; " + more
		}
	default:
		retry = r.holdBack(claim)
	}
	setClaimReady(claim, metav1.ConditionFalse, reason, msg)
	r.Recorder.Eventf(claim, nil, corev1.EventTypeWarning, reason, "Allocate", "%s", msg)
	switch reason {
	case ipamv1.IPAddressClaimReadyPoolExhaustedReason, PlannedRecordConflictReason, RequestedAddressUnavailableReason,
		ReservationOutsidePoolReason, MACAddressInUseReason:
		// Expected outcomes, waiting on someone else (the holder of the
		// address or the MAC, a corrected request, pool or record), not
		// failed reconciles: the condition and the event say why.
		return retry, nil
	case UnusableAddressAnsweredReason:
		// Not a failed reconcile either: the system would answer the same
		// address again until the pool's validation, under way, says why.
		return retry, nil
	}
	// A failure, for controller-runtime to log and count; its retry finds
	// the claim held back.
	return ctrl.Result{}, err
}

// reconcileDelete releases the address, deletes the IPAddress and lets the
// claim go.
func (r *ClaimReconciler) reconcileDelete(ctx context.Context, claim *ipamv1.IPAddressClaim, kind PoolKind, pool Pool) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	if !controllerutil.ContainsFinalizer(claim, ClaimFinalizer) {
		return ctrl.Result{}, nil
	}
	// An allocation under way may still reserve an address: the release
	// waits for it, so that it finds and releases that record too.
	switch call, state := r.allocations.take(claim); state {
	case callRunning:
		return ctrl.Result{}, nil
	case callDone:
		call.Finish()
	}
	address := &ipamv1.IPAddress{}
	if err := r.Client.Get(ctx, client.ObjectKeyFromObject(claim), address); err != nil {
		if !apierrors.IsNotFound(err) {
			return ctrl.Result{}, fmt.Errorf("getting IPAddress: %w", err)
		}
		address = nil
	}
	if address != nil && !addressBelongsTo(address, claim) && !strippedOfItsClaim(address, claim) {
		address = nil
	}

	if pool == nil {
		// The pool's finalizer should prevent this; without the pool there is
		// no backend to release in.
		log.Info("Pool is gone, the address cannot be released in the backend")
		r.Recorder.Eventf(claim, nil, corev1.EventTypeWarning, PoolNotFoundReason, "Release",
			"%s %s not found: the address was not released in the IPAM system", kind.Kind, claim.Spec.PoolRef.Name)
	} else if _, done := r.released.Get(claim.UID); !done {
		// The release runs in the background; the reconcile its answer
		// brings goes on from here.
		released, err := r.release(ctx, claim, kind, pool, address)
		if err != nil {
			return ctrl.Result{}, err
		}
		if !released {
			// Its answer brings the claim back; a release refused for the
			// limit of calls under way is woken too, or looks again.
			return ctrl.Result{RequeueAfter: busyRetry}, nil
		}
		// The reconcile that the IPAddress's deletion brings may still see
		// the claim with its finalizer in the cache: it must not release
		// (search, delete, report) a second time.
		r.released.Set(claim.UID, false, releasedMemory)
	}

	if address != nil {
		if err := r.removeAddressFinalizer(ctx, address); err != nil {
			return ctrl.Result{}, err
		}
		if err := r.Client.Delete(ctx, address); client.IgnoreNotFound(err) != nil {
			return ctrl.Result{}, fmt.Errorf("deleting IPAddress: %w", err)
		}
	}
	controllerutil.RemoveFinalizer(claim, ClaimFinalizer)
	return ctrl.Result{}, nil
}

// release releases the claim's address in the backend, in the background:
// it returns true once the release is done (or left, and reported), false
// while it is under way.
func (r *ClaimReconciler) release(ctx context.Context, claim *ipamv1.IPAddressClaim, kind PoolKind, pool Pool, address *ipamv1.IPAddress) (bool, error) {
	log := ctrl.LoggerFrom(ctx)
	var (
		backend backends.Backend
		last    backends.Reservation
		err     error
	)
	switch call, state := r.releases.take(claim); state {
	case callRunning:
		if call != nil && call.Slow() {
			waitingForAnswer(claim, ReleasePendingReason, kind, pool, "release")
		}
		return false, nil
	case callDone:
		call.Finish()
		backend, last, err = call.value.backend, call.value.last, call.err
	default:
		last = recordedReservation(claim, address)
		if backend, err = r.Backends.For(ctx, kind, pool); err == nil {
			r.startRelease(ctx, claim, pool, backend, last)
			return false, nil
		}
	}
	if backend != nil && IsRefusal(err) {
		r.Alarms.Refused(kind, pool, backend, claim, err)
	}
	// A record left in the IPAM system is never silent: a condition, an
	// event on the claim and on the pool (which outlives it), and a metric.
	leave := func(reason string) error {
		log.Info("Leaving the backend record in place", "reason", err.Error())
		recordsLeft.WithLabelValues(kind.Kind, reason).Inc()
		setClaimReady(claim, metav1.ConditionFalse, reason, err.Error())
		r.Recorder.Eventf(claim, pool, corev1.EventTypeWarning, reason, "Release", "%v", err)
		r.Recorder.Eventf(pool, claim, corev1.EventTypeWarning, reason, "Release",
			"Claim %s/%s: %v", claim.Namespace, claim.Name, err)
		return nil
	}
	switch {
	case errors.Is(err, backends.ErrNotOwned):
		// Someone took the record over in the IPAM system: respect that.
		return true, leave(ReleaseSkippedReason)
	case errors.Is(err, backends.ErrUnreachable):
		// The record lives where the pool no longer reaches.
		return true, leave(ReleaseLeftReason)
	case err != nil:
		setClaimReady(claim, metav1.ConditionFalse, ReleaseFailedReason, err.Error())
		r.Recorder.Eventf(claim, pool, corev1.EventTypeWarning, ReleaseFailedReason, "Release", "%v", err)
		return false, fmt.Errorf("releasing address: %w", err)
	}
	if last.Address.IsValid() {
		log.Info("Released address", "address", last.Address.String())
		r.Recorder.Eventf(claim, pool, corev1.EventTypeNormal, AddressReleasedReason, "Release",
			"Released %s to %s %s", last.Address, kind.Kind, pool.GetName())
	}
	return true, nil
}

// releaseAnswer is a background release's answer.
type releaseAnswer struct {
	backend backends.Backend
	last    backends.Reservation
}

// startRelease releases the claim's record in the background, or keeps it
// as a tombstone for the pool's grace period, which the audit deletes once
// the period is over.
func (r *ClaimReconciler) startRelease(ctx context.Context, claim *ipamv1.IPAddressClaim, pool Pool, backend backends.Backend, last backends.Reservation) {
	grace := time.Duration(0)
	if d := pool.GetRelease().GracePeriod; d != nil {
		grace = d.Duration
	}
	bc, poolUID := r.backendClaim(claim), pool.GetUID()
	// Refused for the limit of calls under way, the claim is woken when
	// one ends (see reconcileDelete).
	_ = r.releases.start(ctx, claim, nil, func(ctx context.Context) (releaseAnswer, error) {
		answer := releaseAnswer{backend: backend, last: last}
		if grace <= 0 {
			return answer, backend.Release(ctx, bc, last)
		}
		now := time.Now()
		if err := backend.Retire(ctx, bc, last, now); err != nil {
			return answer, err
		}
		r.Tombstones.Add(poolUID, now.Add(grace))
		return answer, nil
	})
}

// backendClaim describes the claim to the backend, its marker naming the
// management cluster by identity.
func backendClaim(identity string, claim *ipamv1.IPAddressClaim) backends.Claim {
	return backends.Claim{
		Marker:      backends.Marker(identity, claim.Namespace, claim.Name),
		Namespace:   claim.Namespace,
		Name:        claim.Name,
		ClusterName: claimClusterName(claim),
		MachineName: machineName(claim),
	}
}

// newIPAddress builds the claim's IPAddress: same name, owned by the claim
// (controller) and by the pool (so the pool cannot go first), protected by a
// finalizer, labelled with the cluster for clusterctl move.
func (r *ClaimReconciler) newIPAddress(claim *ipamv1.IPAddressClaim, pool Pool, alloc backends.Allocation) (*ipamv1.IPAddress, error) {
	address := &ipamv1.IPAddress{
		ObjectMeta: metav1.ObjectMeta{
			Name:       claim.Name,
			Namespace:  claim.Namespace,
			Finalizers: []string{ProtectAddressFinalizer},
		},
		Spec: ipamv1.IPAddressSpec{
			ClaimRef: ipamv1.IPAddressClaimReference{Name: claim.Name},
			PoolRef:  claim.Spec.PoolRef,
			Address:  alloc.Address.Addr().String(),
			Prefix:   ptr.To(int32(alloc.Address.Bits())),
		},
	}
	if alloc.Gateway.IsValid() {
		address.Spec.Gateway = alloc.Gateway.String()
	}
	if name := claimClusterName(claim); name != "" {
		address.Labels = map[string]string{clusterv1.ClusterNameLabel: name}
	}
	scheme := r.Client.Scheme()
	if err := controllerutil.SetControllerReference(claim, address, scheme); err != nil {
		return nil, fmt.Errorf("setting the claim as owner: %w", err)
	}
	if err := controllerutil.SetOwnerReference(pool, address, scheme, controllerutil.WithBlockOwnerDeletion(true)); err != nil {
		return nil, fmt.Errorf("setting the pool as owner: %w", err)
	}
	return address, nil
}

// cacheBehind says whether the cache has not yet seen what this manager
// wrote moments ago for the claim: its IPAddress, or the status that bound
// it. A reconcile on such a stale view would search the IPAM system and
// write the IPAddress or the status a second time; the events of those
// writes bring the claim back instead.
func (r *ClaimReconciler) cacheBehind(ctx context.Context, claim *ipamv1.IPAddressClaim) (bool, error) {
	written, ok := r.written.Get(claim.UID)
	if !ok {
		return false, nil
	}
	if statusWritten, _ := written.(bool); statusWritten && claim.Status.AddressRef.Name == "" {
		return true, nil
	}
	address := &ipamv1.IPAddress{}
	err := r.Client.Get(ctx, client.ObjectKeyFromObject(claim), address)
	if apierrors.IsNotFound(err) {
		return true, nil
	}
	return false, client.IgnoreNotFound(err)
}

// persistReservation writes what keepReservation copied onto the claim at
// once: it must be on the claim before the IPAddress is let go.
func (r *ClaimReconciler) persistReservation(ctx context.Context, claim *ipamv1.IPAddressClaim) error {
	kept := map[string]string{}
	for _, k := range reservationAnnotations {
		if v, ok := claim.Annotations[k]; ok {
			kept[k] = v
		}
	}
	if len(kept) == 0 {
		return nil
	}
	body, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": kept}})
	if err != nil {
		return err
	}
	obj := claim.DeepCopy()
	if err := r.Client.Patch(ctx, obj, client.RawPatch(types.MergePatchType, body)); err != nil {
		return fmt.Errorf("keeping the reservation on the claim: %w", err)
	}
	return nil
}

func (r *ClaimReconciler) removeAddressFinalizer(ctx context.Context, address *ipamv1.IPAddress) error {
	if !controllerutil.ContainsFinalizer(address, ProtectAddressFinalizer) {
		return nil
	}
	base := address.DeepCopy()
	controllerutil.RemoveFinalizer(address, ProtectAddressFinalizer)
	if err := r.Client.Patch(ctx, address, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("removing the finalizer of IPAddress %s: %w", address.Name, err)
	}
	return nil
}

func freeCount(p Pool) int64 {
	if a := p.GetPoolStatus().Addresses; a != nil {
		return a.Free
	}
	return 0
}

// trackWaiting counts the claim as waiting while it has no address.
func trackWaiting(claim *ipamv1.IPAddressClaim, kind PoolKind) {
	key := client.ObjectKeyFromObject(claim)
	ready := conditions.Get(claim, ipamv1.IPAddressClaimReadyCondition)
	if !claim.DeletionTimestamp.IsZero() || (ready != nil && ready.Status == metav1.ConditionTrue) {
		waiting.forget(key)
		return
	}
	reason := "Pending"
	if ready != nil {
		reason = ready.Reason
	}
	waiting.set(key, kind.Kind, reason)
}
