package pool

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
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
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/backendcache"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/index"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/internal/notfound"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/metrics"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/poolstate"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/reasons"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/reservation"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/retry"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/pkg/poolkind"
)

// +kubebuilder:rbac:groups=ipam-bridge.github.io,resources=netboxippools;globalnetboxippools;infobloxippools;globalinfobloxippools,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=ipam-bridge.github.io,resources=netboxippools/status;globalnetboxippools/status;infobloxippools/status;globalinfobloxippools/status,verbs=get;patch
// +kubebuilder:rbac:groups=ipam-bridge.github.io,resources=netboxippools/finalizers;globalnetboxippools/finalizers;infobloxippools/finalizers;globalinfobloxippools/finalizers,verbs=update
// RBAC cannot grant by label: list and watch are needed on every Secret for
// the cache's label-selected informer (cachetransform.CacheOptions), get for
// reading a pool's Secret past the cache (Backends.For).
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch

// PoolReconciler validates pools of one kind against their backend, keeps
// their Ready condition and address counts current, and keeps a pool while
// IPAddresses allocated from it exist.
type PoolReconciler struct {
	Client   client.Client
	Recorder events.EventRecorder
	Kind     poolkind.Kind
	Backends *backendcache.Backends

	WatchFilterValue        string
	MaxConcurrentReconciles int
	// SyncPeriod is how often a ready pool is validated again and its
	// counts refreshed.
	SyncPeriod time.Duration
	// MaxRetryInterval caps the backoff of a pool whose backend failed.
	MaxRetryInterval time.Duration
	// RefreshInterval is the least time between two count refreshes of a
	// pool: a burst of allocations costs one refresh per interval and one
	// after it settles, not one per IPAddress.
	RefreshInterval time.Duration
	// InFlight counts the allocations under way, so that a deleted pool is
	// let go only when none can still write an IPAddress for it.
	InFlight *poolstate.InFlight
	// Alarms are what the claims met: requests refused for the pool's
	// credentials, answers the pool may not give.
	Alarms *poolstate.Alarms

	mu sync.Mutex
	// validated remembers when each pool was last validated, so that the
	// refresh after an allocation or release costs only the count requests.
	validated map[types.UID]validation
	// counted remembers when each pool's counts were last refreshed.
	counted map[types.UID]time.Time
	// outages remember since when a ready pool's backend has been failing:
	// one failed request must not stop every allocation from the pool.
	outages map[types.UID]outage
	retries *retry.WaitBackoff
}

type outage struct {
	since    time.Time
	attempts int
}

// DefaultRefreshInterval is the least time between two count refreshes.
const DefaultRefreshInterval = 10 * time.Second

// A ready pool turns not ready only when its backend has failed for at least
// outageGrace and outageAttempts attempts in a row.
const (
	outageGrace    = 30 * time.Second
	outageAttempts = 3
)

type validation struct {
	generation int64
	at         time.Time
}

// SetupWithManager watches the pools, their Secrets (metadata only) and the
// IPAddresses allocated from them.
func (r *PoolReconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager) error {
	if r.SyncPeriod == 0 {
		r.SyncPeriod = 5 * time.Minute
	}
	if r.MaxRetryInterval == 0 {
		r.MaxRetryInterval = retry.DefaultMaxRetryInterval
	}
	if r.RefreshInterval == 0 {
		r.RefreshInterval = DefaultRefreshInterval
	}
	r.retries = retry.NewWaitBackoff(retry.FirstRetryInterval, r.MaxRetryInterval)
	return ctrl.NewControllerManagedBy(mgr).
		Named(r.Kind.Kind).
		// Not on the pool's own status updates: each reconcile asks the
		// backend for counts, and a status write would trigger another.
		For(r.Kind.New(), builder.WithPredicates(
			predicates.ResourceHasFilterLabel(mgr.GetScheme(), ctrl.LoggerFrom(ctx), r.WatchFilterValue),
			predicate.Or(predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{},
				predicate.LabelChangedPredicate{}))).
		WithOptions(controller.Options{
			MaxConcurrentReconciles: max(1, r.MaxConcurrentReconciles),
			RateLimiter:             retry.ErrorRateLimiter(r.MaxRetryInterval),
		}).
		Watches(backendcache.SecretMetadata(), handler.EnqueueRequestsFromMapFunc(r.secretToPools), builder.OnlyMetadata).
		// A claim's request refused for the pool's credentials.
		WatchesRawSource(r.Alarms.Source(r.Kind)).
		Watches(&ipamv1.IPAddress{}, handler.EnqueueRequestsFromMapFunc(index.AddressToPool(r.Kind)),
			builder.WithPredicates(predicate.Funcs{
				UpdateFunc:  func(event.UpdateEvent) bool { return false },
				GenericFunc: func(event.GenericEvent) bool { return false },
			})).
		// A deleted pool waits for its claims' releases too.
		Watches(&ipamv1.IPAddressClaim{}, handler.EnqueueRequestsFromMapFunc(index.ClaimToPool(r.Kind)),
			builder.WithPredicates(predicate.Funcs{
				CreateFunc:  func(event.CreateEvent) bool { return false },
				UpdateFunc:  func(event.UpdateEvent) bool { return false },
				GenericFunc: func(event.GenericEvent) bool { return false },
			})).
		Complete(r)
}

// Reconcile validates the pool and refreshes its counts.
func (r *PoolReconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, reterr error) {
	pool := r.Kind.New()
	if err := r.Client.Get(ctx, req.NamespacedName, pool); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !reservation.MatchesWatchFilter(pool, r.WatchFilterValue) {
		return ctrl.Result{}, nil
	}

	patchHelper, err := patch.NewHelper(pool, r.Client)
	if err != nil {
		return ctrl.Result{}, err
	}
	defer func() {
		if pool.GetDeletionTimestamp().IsZero() {
			metrics.SetPoolReady(r.Kind.Kind, pool)
		}
		if err := patchHelper.Patch(ctx, pool, patch.WithOwnedConditions{Conditions: []string{
			v1alpha1.ReadyCondition, v1alpha1.AddressesCountedCondition, v1alpha1.ConnectionSecureCondition, clusterv1.PausedCondition,
		}}); err != nil {
			if notfound.Ignore(err) == nil {
				// Deleted while it was reconciled, before its finalizer was
				// written: no reconcile of its deletion will forget it.
				r.forget(pool)
				return
			}
			reterr = kerrors.NewAggregate([]error{reterr, err})
		}
	}()

	if !pool.GetDeletionTimestamp().IsZero() {
		return r.reconcileDelete(ctx, pool)
	}
	// Validating is read-only, so it need not wait for the finalizer to be
	// persisted: both are written by the patch at the end.
	controllerutil.AddFinalizer(pool, v1alpha1.PoolFinalizer)
	if annotations.HasPaused(pool) {
		conditions.Set(pool, metav1.Condition{Type: clusterv1.PausedCondition, Status: metav1.ConditionTrue,
			Reason: clusterv1.PausedReason, Message: fmt.Sprintf("the pool has the %s annotation", clusterv1.PausedAnnotation)})
		return ctrl.Result{}, nil
	}
	conditions.Set(pool, metav1.Condition{Type: clusterv1.PausedCondition, Status: metav1.ConditionFalse, Reason: clusterv1.NotPausedReason})
	r.reconcileConnectionSecurity(pool)
	return r.reconcileNormal(ctx, pool)
}

func (r *PoolReconciler) reconcileNormal(ctx context.Context, pool poolkind.Pool) (ctrl.Result, error) {
	status := pool.GetPoolStatus()
	wasReady := conditions.IsTrue(pool, v1alpha1.ReadyCondition)

	backend, err := r.Backends.Prober(ctx, r.Kind, pool)
	if err != nil {
		return r.failed(ctx, pool, err)
	}
	// Credentials a claim's request was refused with stay refused until they
	// or the pool change: validating again would pass with a token that may
	// read but not write, and the pool would flap between ready and not.
	if err := r.Alarms.Current(pool, backend, r.SyncPeriod); err != nil {
		return r.notReady(ctx, pool, err)
	}
	var usage backends.Usage
	askedAt, revalidate := r.Alarms.RevalidationDue(pool)
	if revalidate || r.needsValidation(pool, wasReady) {
		usage, err = backend.Validate(ctx)
		if revalidate {
			r.Alarms.Revalidated(pool, askedAt)
		}
		if err != nil {
			return r.failed(ctx, pool, err)
		}
		r.markValidated(pool)
	} else if wait := r.untilRefresh(pool); wait > 0 {
		// Counted a moment ago: come back once the interval is over, so
		// that the last change of a burst is counted too.
		return ctrl.Result{RequeueAfter: wait}, nil
	} else if usage, err = backend.Usage(ctx); err != nil {
		return r.failed(ctx, pool, err)
	}
	r.markCounted(pool)
	r.recovered(pool)

	status.Addresses = &v1alpha1.AddressCounts{Total: usage.Total, Used: usage.Used, Free: usage.Free()}
	metrics.SetPoolAddresses(r.Kind.Kind, pool, usage.Total, usage.Used, usage.Free())
	status.ObservedGeneration = pool.GetGeneration()
	conditions.Set(pool, metav1.Condition{Type: v1alpha1.ReadyCondition, Status: metav1.ConditionTrue, Reason: v1alpha1.ReadyReason})
	conditions.Set(pool, metav1.Condition{Type: v1alpha1.AddressesCountedCondition, Status: metav1.ConditionTrue, Reason: v1alpha1.CountedReason})
	if !wasReady {
		r.Recorder.Eventf(pool, nil, corev1.EventTypeNormal, v1alpha1.ReadyReason, "Validate",
			"Pool is ready: %d addresses, %d used", usage.Total, usage.Used)
	}
	return ctrl.Result{RequeueAfter: r.SyncPeriod}, nil
}

// reconcileConnectionSecurity warns, on the pool and once in an event, when
// its connection exposes the credentials.
func (r *PoolReconciler) reconcileConnectionSecurity(pool poolkind.Pool) {
	warning := r.Kind.InsecureConnection(pool)
	if warning == "" {
		conditions.Set(pool, metav1.Condition{Type: v1alpha1.ConnectionSecureCondition, Status: metav1.ConditionTrue, Reason: v1alpha1.SecureReason})
		return
	}
	if prev := conditions.Get(pool, v1alpha1.ConnectionSecureCondition); prev == nil || prev.Message != warning {
		r.Recorder.Eventf(pool, nil, corev1.EventTypeWarning, v1alpha1.InsecureConnectionReason, "Validate", "%s", warning)
	}
	conditions.Set(pool, metav1.Condition{Type: v1alpha1.ConnectionSecureCondition, Status: metav1.ConditionFalse,
		Reason: v1alpha1.InsecureConnectionReason, Message: warning})
}

// failed handles a failure to build, validate or count the pool. A ready
// pool whose backend fails keeps serving allocations, with its last counts
// marked stale, until the failures persist; anything else makes it not ready.
// A system that throttles is alive and answering: however long it asks for
// quiet, the pool stays ready, and the claims' own requests wait for it.
func (r *PoolReconciler) failed(ctx context.Context, pool poolkind.Pool, err error) (ctrl.Result, error) {
	reason := reasons.PoolReason(err)
	if !transient(reason) || !conditions.IsTrue(pool, v1alpha1.ReadyCondition) ||
		(reason == v1alpha1.BackendUnavailableReason && r.outagePersists(pool)) {
		return r.notReady(ctx, pool, err)
	}
	// Set once, when the counts turn stale: a pool's status is not written
	// again for every failed retry.
	if !conditions.IsFalse(pool, v1alpha1.AddressesCountedCondition) {
		conditions.Set(pool, metav1.Condition{Type: v1alpha1.AddressesCountedCondition, Status: metav1.ConditionFalse,
			Reason: v1alpha1.CountFailedReason, Message: fmt.Sprintf("status.addresses may be stale: %v", err)})
	}
	ctrl.LoggerFrom(ctx).Info("Backend failed, the pool stays ready and retries", "error", err.Error())
	return ctrl.Result{RequeueAfter: r.retries.Next(client.ObjectKeyFromObject(pool))}, nil
}

// outagePersists records a failed attempt and says whether the backend has
// now failed long and often enough to make the pool not ready.
func (r *PoolReconciler) outagePersists(pool poolkind.Pool) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.outages == nil {
		r.outages = map[types.UID]outage{}
	}
	o, ok := r.outages[pool.GetUID()]
	if !ok {
		o.since = time.Now()
	}
	o.attempts++
	r.outages[pool.GetUID()] = o
	return o.attempts >= outageAttempts && time.Since(o.since) >= outageGrace
}

// recovered forgets an outage once the backend answered.
func (r *PoolReconciler) recovered(pool poolkind.Pool) {
	r.mu.Lock()
	delete(r.outages, pool.GetUID())
	r.mu.Unlock()
	r.retries.Forget(client.ObjectKeyFromObject(pool))
}

// notReady records why the pool cannot be used. Backend outages and refused
// credentials are retried with backoff; configuration errors wait for a
// change of the pool or Secret, and are validated again every sync period.
func (r *PoolReconciler) notReady(ctx context.Context, pool poolkind.Pool, err error) (ctrl.Result, error) {
	reason := reasons.PoolReason(err)
	// A copy: conditions.Get points into the status that Set changes.
	var prev metav1.Condition
	if c := conditions.Get(pool, v1alpha1.ReadyCondition); c != nil {
		prev = *c
	}
	conditions.Set(pool, metav1.Condition{Type: v1alpha1.ReadyCondition, Status: metav1.ConditionFalse, Reason: reason, Message: err.Error()})
	pool.GetPoolStatus().ObservedGeneration = pool.GetGeneration()
	if prev.Reason != reason || prev.Message != err.Error() {
		r.Recorder.Eventf(pool, nil, corev1.EventTypeWarning, reason, "Validate", "%v", err)
	}
	r.forgetValidation(pool)
	ctrl.LoggerFrom(ctx).Info("Pool is not ready", "reason", reason, "message", err.Error())
	if transient(reason) || credentialsRefused(reason) {
		return ctrl.Result{RequeueAfter: r.retries.Next(client.ObjectKeyFromObject(pool))}, nil
	}
	return ctrl.Result{RequeueAfter: min(r.SyncPeriod, r.MaxRetryInterval)}, nil
}

// credentialsRefused says whether the pool's credentials were refused. New
// credentials take effect by the Secret's event, but a reconcile that read
// the Secret just before the change reached the cache can refuse the pool
// after that event's own reconcile (a chaos run saw it during a rotation):
// the pool is looked at again with backoff, not only at the next sync. A
// refusal a claim reported costs no request to look at again (see
// PoolAlarms.current).
func credentialsRefused(reason string) bool {
	return reason == v1alpha1.AuthenticationFailedReason || reason == v1alpha1.PermissionDeniedReason
}

// transient says whether a pool failure clears by itself, so that it is
// retried with backoff rather than at the next sync.
func transient(reason string) bool {
	return reason == v1alpha1.BackendUnavailableReason || reason == v1alpha1.BackendThrottledReason
}

// reconcileDelete keeps the pool while IPAddresses from it exist, an
// allocation from it is under way, or a claim of it may hold a reservation.
// The last checks read the API server, so a cache that has not yet seen a
// new IPAddress or claim cannot let the pool go.
func (r *PoolReconciler) reconcileDelete(ctx context.Context, pool poolkind.Pool) (ctrl.Result, error) {
	waitFor := func(msg string) (ctrl.Result, error) {
		// Said once, as the wait begins; the condition follows it.
		if !conditions.IsFalse(pool, v1alpha1.ReadyCondition) || conditions.GetReason(pool, v1alpha1.ReadyCondition) != v1alpha1.DeletingReason {
			r.Recorder.Eventf(pool, nil, corev1.EventTypeNormal, v1alpha1.DeletingReason, "Delete", "The pool is being deleted and is %s", msg)
		}
		conditions.Set(pool, metav1.Condition{Type: v1alpha1.ReadyCondition, Status: metav1.ConditionFalse,
			Reason: v1alpha1.DeletingReason, Message: msg})
		// Each IPAddress or claim deletion brings the pool back; the wait
		// covers the end of an allocation, which makes no event.
		return ctrl.Result{RequeueAfter: r.retries.Next(client.ObjectKeyFromObject(pool))}, nil
	}
	if n := r.InFlight.Close(pool.GetUID()); n > 0 {
		return waitFor(fmt.Sprintf("waiting for %d allocations from the pool to finish", n))
	}
	ref := ipamv1.IPPoolReference{APIGroup: v1alpha1.GroupVersion.Group, Kind: r.Kind.Kind, Name: pool.GetName()}
	addresses := &ipamv1.IPAddressList{}
	if err := r.Client.List(ctx, addresses, client.InNamespace(pool.GetNamespace()),
		client.MatchingFields{index.PoolRefField: index.PoolRefKey(ref)}); err != nil {
		return ctrl.Result{}, fmt.Errorf("listing IPAddresses of the pool: %w", err)
	}
	n := len(addresses.Items)
	if n == 0 {
		live := &ipamv1.IPAddressList{}
		if err := r.Backends.APIReader.List(ctx, live, client.InNamespace(pool.GetNamespace())); err != nil {
			return ctrl.Result{}, fmt.Errorf("listing IPAddresses of the pool: %w", err)
		}
		for i := range live.Items {
			if live.Items[i].Spec.PoolRef == ref {
				n++
			}
		}
	}
	if n > 0 {
		return waitFor(fmt.Sprintf("waiting for %d IPAddresses allocated from the pool to be released", n))
	}
	// Every claim that carries the release finalizer may hold a
	// reservation in the pool, whatever this manager remembers: its
	// IPAddress may have gone first (a namespace deletion deletes every
	// kind at once), or a manager may have died after the IPAM system made
	// its record and before its IPAddress was written. It is released
	// through this pool, which must outlive it.
	claims := &ipamv1.IPAddressClaimList{}
	if err := r.Client.List(ctx, claims, client.InNamespace(pool.GetNamespace()),
		client.MatchingFields{index.PoolRefField: index.PoolRefKey(ref)}); err != nil {
		return ctrl.Result{}, fmt.Errorf("listing the claims of the pool: %w", err)
	}
	holding := claimsHolding(claims.Items, ref)
	if len(holding) == 0 {
		live := &ipamv1.IPAddressClaimList{}
		if err := r.Backends.APIReader.List(ctx, live, client.InNamespace(pool.GetNamespace())); err != nil {
			return ctrl.Result{}, fmt.Errorf("listing the claims of the pool: %w", err)
		}
		holding = claimsHolding(live.Items, ref)
	}
	if len(holding) > 0 {
		return waitFor(fmt.Sprintf("waiting for %d claims of the pool to be deleted and release what they hold: %s",
			len(holding), namesOf(holding)))
	}
	r.forget(pool)
	controllerutil.RemoveFinalizer(pool, v1alpha1.PoolFinalizer)
	return ctrl.Result{}, nil
}

// forget drops what the manager keeps of a pool that goes: its backend,
// alarms, validation, counts and metric series.
func (r *PoolReconciler) forget(pool poolkind.Pool) {
	r.Backends.Forget(r.Kind, pool)
	r.Alarms.Forget(pool)
	r.forgetValidation(pool)
	r.mu.Lock()
	delete(r.counted, pool.GetUID())
	r.mu.Unlock()
	r.recovered(pool)
	metrics.ForgetPoolAddresses(r.Kind.Kind, pool)
}

// untilRefresh is how long the pool's counts are still fresh.
func (r *PoolReconciler) untilRefresh(pool poolkind.Pool) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	at, ok := r.counted[pool.GetUID()]
	if !ok {
		return 0
	}
	return max(0, r.RefreshInterval-time.Since(at))
}

func (r *PoolReconciler) markCounted(pool poolkind.Pool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.counted == nil {
		r.counted = map[types.UID]time.Time{}
	}
	r.counted[pool.GetUID()] = time.Now()
}

func (r *PoolReconciler) needsValidation(pool poolkind.Pool, ready bool) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	v, ok := r.validated[pool.GetUID()]
	return !ready || !ok || v.generation != pool.GetGeneration() || time.Since(v.at) >= r.SyncPeriod
}

func (r *PoolReconciler) markValidated(pool poolkind.Pool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.validated == nil {
		r.validated = map[types.UID]validation{}
	}
	r.validated[pool.GetUID()] = validation{generation: pool.GetGeneration(), at: time.Now()}
}

func (r *PoolReconciler) forgetValidation(pool poolkind.Pool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.validated, pool.GetUID())
}

// secretToPools maps a Secret to the pools that read it.
func (r *PoolReconciler) secretToPools(ctx context.Context, o client.Object) []reconcile.Request {
	pools, err := backendcache.PoolsOfSecret(ctx, r.Client, r.Kind, r.Backends.ManagerNamespace, o)
	if err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Validating the pools of a changed Secret")
		return nil
	}
	var requests []reconcile.Request
	for _, pool := range pools {
		requests = append(requests, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(pool)})
	}
	// A changed Secret yields a new backend (see Backends.For), whose first
	// use validates the pool afresh.
	return requests
}

// claimsHolding returns the claims of the pool ref names that may hold a
// reservation in it: every claim with the release finalizer, being deleted
// or not. The finalizer is persisted before anything is reserved, so a
// claim without it holds nothing; one with it may hold a record its
// IPAddress, annotations and this manager's memory know nothing of.
func claimsHolding(claims []ipamv1.IPAddressClaim, ref ipamv1.IPPoolReference) []types.NamespacedName {
	var out []types.NamespacedName
	for i := range claims {
		c := &claims[i]
		if c.Spec.PoolRef == ref && controllerutil.ContainsFinalizer(c, reservation.ClaimFinalizer) {
			out = append(out, client.ObjectKeyFromObject(c))
		}
	}
	return out
}

// maxNamesShown bounds the claims a pool's condition names.
const maxNamesShown = 5

// namesOf names the first few claims, and how many more there are.
func namesOf(keys []types.NamespacedName) string {
	slices.SortFunc(keys, func(a, b types.NamespacedName) int { return strings.Compare(a.String(), b.String()) })
	names := make([]string, 0, maxNamesShown)
	for _, k := range keys[:min(len(keys), maxNamesShown)] {
		names = append(names, k.String())
	}
	s := strings.Join(names, ", ")
	if more := len(keys) - len(names); more > 0 {
		s += fmt.Sprintf(" and %d more", more)
	}
	return s
}
