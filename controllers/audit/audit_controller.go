package audit

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

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
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/macaddress"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/metrics"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/poolstate"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/reasons"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/reservation"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/retry"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/pkg/poolkind"
)

// SharedStraysAge is how old a listing of strays, made for another pool of
// the same system, credentials and namespace, a pool's audit takes for
// its own: every pool of a namespace lists the same records for its
// strays. An audit asked for by annotation lists anew.
const SharedStraysAge = 30 * time.Second

// DefaultAuditInterval is how often each pool is audited.
const DefaultAuditInterval = 10 * time.Minute

// AuditReconciler compares, for each pool of one kind, the records of the
// pool's sources that carry this management cluster's marker with the
// claims: it reports orphans (and releases them if the pool says so),
// deletes duplicates of bound claims, restores records deleted outside the
// provider, and deletes tombstones whose grace period is over. An audit
// costs the pages of one listing per pool and nothing per claim, except
// for the claims it finds something about.
type AuditReconciler struct {
	Client client.Client
	// APIReader confirms a finding past the cache, so that a claim the cache
	// has not seen yet, or an allocation in flight, is never misjudged.
	APIReader client.Reader
	Recorder  events.EventRecorder
	Kind      poolkind.Kind
	// Kinds are every pool kind served: a record in another pool's sources
	// is that pool's to judge.
	Kinds    poolkind.Kinds
	Backends *backendcache.Backends
	// Identity is the marker prefix of this management cluster's records.
	Identity         string
	WatchFilterValue string
	// Interval between two audits of a pool; jittered by up to a tenth.
	Interval time.Duration
	// Tombstones are the grace periods that releases started.
	Tombstones *poolstate.Tombstones
	// LateRecords plans the sweeps for records that creates may still
	// make after their claims were bound elsewhere.
	LateRecords *poolstate.LateRecords

	mu sync.Mutex
	// firstSeen remembers, per pool, when an audit first saw a record
	// orphaned or duplicated: it is deleted only after the pool's minAge. A
	// restart starts the clock again, which only delays.
	firstSeen map[types.UID]map[string]time.Time
	// audited are the pools audited since the process started.
	audited map[types.UID]bool
}

// startedWith says whether the pool was audited since the process started.
func (r *AuditReconciler) startedWith(pool poolkind.Pool) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.audited[pool.GetUID()]
}

// SetupWithManager audits pools when they are created, become ready, are
// asked for an audit by annotation, and on the interval.
func (r *AuditReconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager) error {
	if r.Interval == 0 {
		r.Interval = DefaultAuditInterval
	}
	r.firstSeen = map[types.UID]map[string]time.Time{}
	r.audited = map[types.UID]bool{}
	b := ctrl.NewControllerManagedBy(mgr).
		Named(strings.ToLower(r.Kind.Kind)+"-audit").
		For(r.Kind.New(), builder.WithPredicates(
			predicates.ResourceHasFilterLabel(mgr.GetScheme(), ctrl.LoggerFrom(ctx), r.WatchFilterValue),
			auditMayBeDue())).
		WithOptions(controller.Options{MaxConcurrentReconciles: 1}).
		// A deleted IPAddress may have left a tombstone to expire.
		Watches(&ipamv1.IPAddress{}, handler.EnqueueRequestsFromMapFunc(index.AddressToPool(r.Kind)),
			builder.WithPredicates(predicate.Funcs{
				CreateFunc:  func(event.CreateEvent) bool { return false },
				UpdateFunc:  func(event.UpdateEvent) bool { return false },
				GenericFunc: func(event.GenericEvent) bool { return false },
			}))
	if r.LateRecords != nil {
		// A create that may still be applied plans sweeps.
		b = b.WatchesRawSource(r.LateRecords.Source(r.Kind))
	}
	return b.Complete(r)
}

// auditMayBeDue passes pool creations, changes of the audit annotation or
// the spec, and a pool turning ready.
func auditMayBeDue() predicate.Funcs {
	return predicate.Funcs{
		CreateFunc: func(event.CreateEvent) bool { return true },
		UpdateFunc: func(e event.UpdateEvent) bool {
			oldPool, newPool := e.ObjectOld.(poolkind.Pool), e.ObjectNew.(poolkind.Pool)
			return oldPool.GetAnnotations()[v1alpha1.AuditAnnotation] != newPool.GetAnnotations()[v1alpha1.AuditAnnotation] ||
				oldPool.GetGeneration() != newPool.GetGeneration() ||
				conditions.IsTrue(oldPool, v1alpha1.ReadyCondition) != conditions.IsTrue(newPool, v1alpha1.ReadyCondition)
		},
		DeleteFunc:  func(event.DeleteEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
}

// Reconcile audits the pool when an audit is due, and comes back when the
// next one is.
func (r *AuditReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	pool := r.Kind.New()
	if err := r.Client.Get(ctx, req.NamespacedName, pool); err != nil {
		if apierrors.IsNotFound(err) {
			// An audit that ended after the pool's deletion began may have
			// set its series again: this reconcile comes after it.
			metrics.ForgetAuditMetrics(r.Kind.Kind, req.Namespace, req.Name)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !pool.GetDeletionTimestamp().IsZero() {
		metrics.ForgetAuditMetrics(r.Kind.Kind, req.Namespace, req.Name)
		return ctrl.Result{}, nil
	}
	if !reservation.MatchesWatchFilter(pool, r.WatchFilterValue) || annotations.HasPaused(pool) {
		return ctrl.Result{}, nil
	}
	if !conditions.IsTrue(pool, v1alpha1.ReadyCondition) {
		// The pool's turning ready brings it back; the interval covers an
		// event that is missed.
		return ctrl.Result{RequeueAfter: r.Interval}, nil
	}
	if wait := r.untilDue(pool); wait > 0 {
		return ctrl.Result{RequeueAfter: wait}, nil
	}
	return r.audit(ctx, pool)
}

// untilDue is the time until the pool's next audit: after the interval,
// at once when asked by annotation, or when a tombstone expires.
func (r *AuditReconciler) untilDue(pool poolkind.Pool) time.Duration {
	last := pool.GetPoolStatus().Audit
	if last == nil || pool.GetAnnotations()[v1alpha1.AuditAnnotation] != last.Request || last.ObservedGeneration != pool.GetGeneration() {
		return 0
	}
	if !r.startedWith(pool) && pool.GetRelease().GracePeriod != nil {
		// A release before a restart may have left a tombstone that no
		// status names yet.
		return 0
	}
	due := last.LastRun.Add(r.Interval + jitter(pool.GetUID(), r.Interval/10))
	if t := last.NextTombstoneExpiry; t != nil && t.Before(&metav1.Time{Time: due}) {
		due = t.Time
	}
	if t, ok := r.Tombstones.Next(pool.GetUID()); ok && t.Before(due) {
		due = t
	}
	if t, ok := r.LateRecords.Next(pool); ok && t.Before(due) {
		due = t
	}
	return time.Until(due)
}

// jitter spreads the audits of many pools: a fixed share of max per pool,
// so that a pool's period stays regular.
func jitter(uid types.UID, max time.Duration) time.Duration {
	if max <= 0 {
		return 0
	}
	var seed uint64
	for _, c := range []byte(uid) {
		seed = seed*31 + uint64(c)
	}
	return time.Duration(rand.New(rand.NewPCG(seed, 0)).Int64N(int64(max)))
}

// audit lists the pool's marked records, judges each, acts where the pool's
// policy allows, and records what it found.
func (r *AuditReconciler) audit(ctx context.Context, pool poolkind.Pool) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	backend, err := r.Backends.Auditor(ctx, r.Kind, pool)
	var records []backends.Record
	if err == nil {
		records, err = backend.Records(ctx, r.Identity+"/")
	}
	if err != nil {
		metrics.AuditRuns.WithLabelValues(r.Kind.Kind, metrics.AuditFailed).Inc()
		metrics.SetAuditFailing(r.Kind.Kind, pool, true)
		if setErr := r.setAuditFailed(ctx, pool, err); setErr != nil {
			return ctrl.Result{}, setErr
		}
		log.Info("Audit failed, retrying at the next interval", "error", err.Error())
		return ctrl.Result{RequeueAfter: min(r.Interval, retry.DefaultMaxRetryInterval)}, nil
	}
	now := time.Now()
	a := &auditRun{AuditReconciler: r, pool: pool, backend: backend, now: now, movedSeen: map[types.NamespacedName]string{},
		sweep: r.LateRecords.Sweeping(pool, now), straysMaxAge: straysMaxAge(pool)}
	if err := a.judge(ctx, records); err != nil {
		return ctrl.Result{}, err
	}
	if err := a.findStrays(ctx); err != nil {
		return ctrl.Result{}, err
	}
	if err := a.findDrift(ctx, records); err != nil {
		return ctrl.Result{}, err
	}
	r.Tombstones.ForgetUntil(pool.GetUID(), a.now)
	r.LateRecords.Swept(pool, a.now)
	r.mu.Lock()
	r.audited[pool.GetUID()] = true
	r.mu.Unlock()
	metrics.AuditRuns.WithLabelValues(r.Kind.Kind, metrics.AuditSucceeded).Inc()
	metrics.SetAuditFailing(r.Kind.Kind, pool, false)
	if err := a.report(ctx); err != nil {
		return ctrl.Result{}, err
	}
	next := r.Interval + jitter(pool.GetUID(), r.Interval/10)
	if a.pendingAt.After(a.now) {
		next = min(next, a.pendingAt.Sub(a.now))
	}
	if t, ok := r.LateRecords.Next(pool); ok {
		next = min(next, max(time.Until(t), time.Second))
	}
	return ctrl.Result{RequeueAfter: next}, nil
}

// straysMaxAge is how old a listing of strays the pool's audit takes: one
// shared with the namespace's other pools, unless the audit was asked for
// by annotation, after an edit most likely: what it reports must be now.
func straysMaxAge(pool poolkind.Pool) time.Duration {
	request, asked := pool.GetAnnotations()[v1alpha1.AuditAnnotation]
	// A pool whose audits all failed has no last run to compare with.
	if last := pool.GetPoolStatus().Audit; asked && (last == nil || request != last.Request) {
		return 0
	}
	return SharedStraysAge
}

// auditRun is one audit of one pool.
type auditRun struct {
	*AuditReconciler
	pool    poolkind.Pool
	backend backends.Auditor
	now     time.Time

	status v1alpha1.AuditStatus
	// seen are the findings this audit timed (see oldEnough).
	seen     []string
	actions  []string
	failures []error
	// pendingAt is the earliest time a finding becomes actionable (minAge
	// or a tombstone's grace period ends).
	pendingAt time.Time
	// movedSeen are the claims whose moved records the listings hold,
	// with where each record went.
	movedSeen map[types.NamespacedName]string
	// sweep: the audit looks for records that creates left late (see
	// poolstate.LateRecords), and deletes duplicates without waiting.
	sweep bool
	// siblings are the other pools' spans, once listed (heldByAnotherPool).
	siblings *siblings
	// straysMaxAge is how old a listing of strays made for another pool
	// this audit takes (backends.Auditor.Strays).
	straysMaxAge time.Duration
	// freshMoves are where a fresh listing of strays found each claim's
	// records, once made (movedTo).
	freshMoves map[types.NamespacedName]string
}

func (a *auditRun) minAge() time.Duration {
	if d := a.pool.GetOrphans().MinAge; d != nil {
		return d.Duration
	}
	return v1alpha1.DefaultOrphanMinAge
}

func (a *auditRun) gracePeriod() time.Duration {
	if d := a.pool.GetRelease().GracePeriod; d != nil {
		return d.Duration
	}
	return 0
}

// judge sorts the listed records into tombstones, orphans, duplicates and
// the claims' own records.
func (a *auditRun) judge(ctx context.Context, records []backends.Record) error {
	a.status.Records = int32(len(records))
	byClaim := map[types.NamespacedName][]backends.Record{}
	for _, rec := range records {
		if _, at, ok := backends.ParseTombstone(rec.Marker); ok {
			if err := a.tombstone(ctx, rec, at); err != nil {
				return err
			}
			continue
		}
		ns, name, ok := backends.ParseMarker(a.Identity, rec.Marker)
		if !ok {
			continue
		}
		key := types.NamespacedName{Namespace: ns, Name: name}
		byClaim[key] = append(byClaim[key], rec)
	}
	for key, recs := range byClaim {
		state, err := a.claimState(ctx, key)
		if err != nil {
			return err
		}
		switch {
		case state.gone:
			for _, rec := range recs {
				if err := a.orphan(ctx, rec); err != nil {
					return err
				}
			}
		case state.bound.IsValid():
			// Records elsewhere are duplicates only while the claim's
			// address is held too and no record of the claim was moved:
			// a record the IPAM team moved is reported, never deleted.
			atBound := slices.ContainsFunc(recs, func(rec backends.Record) bool { return rec.Address.Addr() == state.bound })
			for _, rec := range recs {
				switch {
				case rec.Address.Addr() == state.bound:
				case state.moved || !atBound:
					a.status.Drifted++
					a.addFinding(v1alpha1.FindingMoved, rec, false)
					a.movedSeen[key] = movedPlace(rec)
				default:
					if err := a.duplicate(ctx, key, rec); err != nil {
						return err
					}
				}
			}
		}
	}
	a.forgetUnseen()
	return nil
}

// claimState is what the audit needs to know of the claim a marker names.
type claimState struct {
	// gone: no claim of that name exists, confirmed by the API server.
	gone bool
	// bound is the address of the claim's IPAddress, when the claim is
	// bound and neither it nor its IPAddress is being deleted.
	bound netip.Addr
	// moved: the IPAddress says the claim's record was moved.
	moved bool
}

// claimState reads the claim from the cache; a claim the cache lacks is
// read from the API server before it is called gone.
func (a *auditRun) claimState(ctx context.Context, key types.NamespacedName) (claimState, error) {
	claim := &ipamv1.IPAddressClaim{}
	err := a.Client.Get(ctx, key, claim)
	if apierrors.IsNotFound(err) {
		err = a.APIReader.Get(ctx, key, claim)
		if apierrors.IsNotFound(err) {
			return claimState{gone: true}, nil
		}
	}
	if err != nil {
		return claimState{}, fmt.Errorf("reading claim %s: %w", key, err)
	}
	if !claim.DeletionTimestamp.IsZero() {
		return claimState{}, nil
	}
	address := &ipamv1.IPAddress{}
	if err := a.Client.Get(ctx, key, address); err != nil {
		return claimState{}, client.IgnoreNotFound(err)
	}
	if !reservation.AddressBelongsTo(address, claim) || !address.DeletionTimestamp.IsZero() {
		return claimState{}, nil
	}
	p, err := reservation.AddressPrefix(address)
	if err != nil {
		return claimState{}, nil
	}
	_, moved := address.Annotations[v1alpha1.RecordMovedAnnotation]
	return claimState{bound: p.Addr(), moved: moved}, nil
}

// orphan reports a record without a claim and, under the Release policy,
// deletes it once it has been an orphan for minAge.
func (a *auditRun) orphan(ctx context.Context, rec backends.Record) error {
	a.status.Orphans++
	released := false
	if a.pool.GetOrphans().Policy == v1alpha1.OrphansRelease && a.oldEnough(rec) {
		done, err := a.drop(ctx, rec, metrics.AuditOrphanReleased)
		if err != nil {
			return err
		}
		released = done
		if done {
			a.actions = append(a.actions, fmt.Sprintf("released orphan %s (%s)", rec.Address.Addr(), rec.Marker))
		}
	}
	a.addFinding(v1alpha1.FindingOrphan, rec, released)
	return nil
}

// duplicate deletes, under either policy, a record that carries a bound
// claim's marker but not its address, once it has been seen for minAge, or
// at once in a sweep for late records: it is provably this cluster's and
// provably not in use. The claim and its IPAddress are read from the API
// server first.
func (a *auditRun) duplicate(ctx context.Context, key types.NamespacedName, rec backends.Record) error {
	a.status.Duplicates++
	released := false
	if oldEnough := a.oldEnough(rec); oldEnough || a.sweep {
		_, live, err := a.liveBound(ctx, key)
		if err != nil {
			return err
		}
		if live.IsValid() && live != rec.Address.Addr() {
			done, err := a.drop(ctx, rec, metrics.AuditDuplicateReleased)
			if err != nil {
				return err
			}
			released = done
			if done {
				a.actions = append(a.actions, fmt.Sprintf("released duplicate %s of claim %s (its IPAddress holds %s)", rec.Address.Addr(), key, live))
			}
		}
	}
	a.addFinding(v1alpha1.FindingDuplicate, rec, released)
	return nil
}

// liveBound reads the claim and its IPAddress from the API server and
// returns the claim and its address when it is bound and not being deleted.
func (a *auditRun) liveBound(ctx context.Context, key types.NamespacedName) (*ipamv1.IPAddressClaim, netip.Addr, error) {
	claim := &ipamv1.IPAddressClaim{}
	address := &ipamv1.IPAddress{}
	for _, o := range []client.Object{claim, address} {
		if err := a.APIReader.Get(ctx, key, o); err != nil {
			return nil, netip.Addr{}, client.IgnoreNotFound(err)
		}
	}
	if !claim.DeletionTimestamp.IsZero() || !reservation.AddressBelongsTo(address, claim) || !address.DeletionTimestamp.IsZero() {
		return nil, netip.Addr{}, nil
	}
	p, err := reservation.AddressPrefix(address)
	if err != nil {
		return nil, netip.Addr{}, nil
	}
	return claim, p.Addr(), nil
}

// tombstone deletes a tombstone whose grace period is over.
func (a *auditRun) tombstone(ctx context.Context, rec backends.Record, releasedAt time.Time) error {
	expiry := releasedAt.Add(a.gracePeriod())
	if expiry.After(a.now) {
		a.status.Tombstones++
		if a.status.NextTombstoneExpiry == nil || expiry.Before(a.status.NextTombstoneExpiry.Time) {
			a.status.NextTombstoneExpiry = &metav1.Time{Time: expiry}
		}
		a.pending(expiry)
		return nil
	}
	done, err := a.drop(ctx, rec, metrics.AuditTombstoneDeleted)
	if !done && err == nil {
		a.status.Tombstones++
	}
	return err
}

// drop deletes a record; a record someone took over meanwhile is left, and
// is no error.
func (a *auditRun) drop(ctx context.Context, rec backends.Record, action string) (bool, error) {
	err := a.backend.Delete(ctx, rec)
	switch {
	case errors.Is(err, backends.ErrNotOwned):
		ctrl.LoggerFrom(ctx).Info("Leaving a record that changed hands since it was listed", "reference", rec.Reference, "reason", err.Error())
		return false, nil
	case err != nil:
		// One failed deletion must not hide the rest of the audit.
		a.failures = append(a.failures, fmt.Errorf("deleting %s (%s): %w", rec.Reference, rec.Address.Addr(), err))
		return false, nil
	}
	metrics.AuditActions.WithLabelValues(a.Kind.Kind, action).Inc()
	return true, nil
}

// findStrays reports the records of this cluster that lie outside the
// pool's sources, where Records does not reach: a record of one of the
// pool's bound claims that the IPAM team moved into another VRF, network
// view or network is drift; a record whose claim is gone is a stray. Neither
// is deleted: outside its sources the pool cannot tell what else uses the
// address. A namespaced pool lists the markers of its namespace only; a
// Global pool, whose claims live anywhere, leaves the strays of gone claims
// to the pools of their namespaces.
func (a *auditRun) findStrays(ctx context.Context) error {
	records, err := a.backend.Strays(ctx, a.strayPrefix(), a.straysMaxAge)
	if err != nil {
		a.failures = append(a.failures, fmt.Errorf("listing this cluster's records outside the sources: %w", err))
		return nil
	}
	for _, rec := range records {
		key, ok := a.claimOf(rec)
		if !ok {
			continue
		}
		claim := &ipamv1.IPAddressClaim{}
		err := a.Client.Get(ctx, key, claim)
		if apierrors.IsNotFound(err) {
			err = a.APIReader.Get(ctx, key, claim)
		}
		switch {
		case apierrors.IsNotFound(err):
			if a.pool.GetNamespace() == "" {
				continue
			}
			held, err := a.heldByAnotherPool(ctx, rec.Address.Addr())
			if err != nil {
				a.failures = append(a.failures, fmt.Errorf("judging the stray %s (%s): %w", rec.Address.Addr(), rec.Reference, err))
				continue
			}
			if held {
				// That pool's orphan: its audit reports it.
				continue
			}
			a.status.Strays++
			a.addFinding(v1alpha1.FindingStray, rec, false)
		case err != nil:
			return fmt.Errorf("reading claim %s: %w", key, err)
		case claim.Spec.PoolRef.Kind != a.Kind.Kind || claim.Spec.PoolRef.Name != a.pool.GetName() ||
			(a.pool.GetNamespace() != "" && claim.Namespace != a.pool.GetNamespace()):
			// Another pool's claim: that pool's audit judges it.
		default:
			state, err := a.claimState(ctx, key)
			if err != nil {
				return err
			}
			if !state.bound.IsValid() {
				// Not bound yet: its own reconcile reports the record
				// (ReservationOutsidePool).
				continue
			}
			a.status.Drifted++
			a.addFinding(v1alpha1.FindingMoved, rec, false)
			a.movedSeen[key] = movedPlace(rec)
		}
	}
	return nil
}

// claimOf is the claim a record of this cluster's marks, unless it is a
// tombstone.
func (a *auditRun) claimOf(rec backends.Record) (types.NamespacedName, bool) {
	if _, _, tombstone := backends.ParseTombstone(rec.Marker); tombstone {
		return types.NamespacedName{}, false
	}
	ns, name, ok := backends.ParseMarker(a.Identity, rec.Marker)
	return types.NamespacedName{Namespace: ns, Name: name}, ok
}

// strayPrefix is the marker prefix of the records the pool's strays are
// listed from: this cluster's, of the pool's namespace for a namespaced
// pool.
func (a *auditRun) strayPrefix() string {
	prefix := a.Identity + "/"
	if ns := a.pool.GetNamespace(); ns != "" {
		prefix += ns + "/"
	}
	return prefix
}

// movedTo is where the claim's record lies outside the pool's scope, as
// the audit may act on it: by this audit's listing of strays if it listed
// anew, else by a listing made now, once per audit. A listing shared with
// another pool may be up to SharedStraysAge old: it may not show the IPAM
// team's last move, and a record it shows may since have been deleted or
// moved back. Its findings are reported as they are; what the audit does
// to a claim (hold its address again as a deleted record's or a moved
// one's, say on the claim that its record was moved) follows only what is
// there now.
func (a *auditRun) movedTo(ctx context.Context, key types.NamespacedName) (string, error) {
	if a.straysMaxAge == 0 {
		return a.movedSeen[key], nil
	}
	if a.freshMoves == nil {
		records, err := a.backend.Strays(ctx, a.strayPrefix(), 0)
		if err != nil {
			return "", err
		}
		a.freshMoves = map[types.NamespacedName]string{}
		for _, rec := range records {
			if key, ok := a.claimOf(rec); ok {
				a.freshMoves[key] = movedPlace(rec)
			}
		}
	}
	return a.freshMoves[key], nil
}

// movedPlace names where a moved record is, for messages.
func movedPlace(rec backends.Record) string {
	return fmt.Sprintf("%s (%s)", rec.Address.Addr(), rec.Reference)
}

// findDrift restores the records of bound claims of this pool that the
// listing lacks. Each candidate is confirmed by a marker search, so a claim
// bound after the listing is not misjudged.
func (a *auditRun) findDrift(ctx context.Context, records []backends.Record) error {
	held := map[string][]backends.Record{}
	for _, rec := range records {
		key := rec.Marker + "|" + rec.Address.Addr().String()
		held[key] = append(held[key], rec)
	}
	ref := ipamv1.IPPoolReference{APIGroup: v1alpha1.GroupVersion.Group, Kind: a.Kind.Kind, Name: a.pool.GetName()}
	addresses := &ipamv1.IPAddressList{}
	if err := a.Client.List(ctx, addresses, client.InNamespace(a.pool.GetNamespace()),
		client.MatchingFields{index.PoolRefField: index.PoolRefKey(ref)}); err != nil {
		return fmt.Errorf("listing IPAddresses of the pool: %w", err)
	}
	for i := range addresses.Items {
		if err := a.checkBound(ctx, &addresses.Items[i], held); err != nil {
			return err
		}
	}
	return nil
}

// checkBound checks one bound claim's IPAddress against the records the
// listing held, by marker and address.
func (a *auditRun) checkBound(ctx context.Context, address *ipamv1.IPAddress, held map[string][]backends.Record) error {
	p, err := reservation.AddressPrefix(address)
	marker := backends.Marker(a.Identity, address.Namespace, address.Spec.ClaimRef.Name)
	if err != nil || !address.DeletionTimestamp.IsZero() {
		return nil
	}
	if ep := address.Annotations[v1alpha1.ReservationEndpointAnnotation]; ep != "" && ep != a.backend.Endpoint() {
		// Reserved in a system the pool no longer points at: restoring
		// it here would put a second record in another system.
		return nil
	}
	records, ok := held[marker+"|"+p.Addr().String()]
	if !ok {
		return a.drifted(ctx, address, p)
	}
	// An IPAddress learns the record that holds its address, with the
	// marker it carries, when it names another: one from before markers
	// were recorded, or whose record was restored or handed over (a moved
	// record's case, below) by a manager that stopped before it noted so.
	// A clusterctl move takes the note along.
	recorded := address.Annotations[v1alpha1.ReservationRecordAnnotation]
	if !slices.ContainsFunc(records, func(r backends.Record) bool { return r.Reference == recorded }) {
		rec := records[0]
		alloc := backends.Allocation{Reference: rec.Reference, Endpoint: a.backend.Endpoint(), Planned: rec.Planned}
		if err := reservation.NoteRecord(ctx, a.Client, address, alloc, marker); err != nil {
			return err
		}
	}
	// Held, but a record of the claim was moved: the claim names it even
	// when the guard held its address again before this audit.
	claimKey := types.NamespacedName{Namespace: address.Namespace, Name: address.Spec.ClaimRef.Name}
	if _, listed := a.movedSeen[claimKey]; listed {
		movedTo, err := a.movedTo(ctx, claimKey)
		if err != nil {
			a.failures = append(a.failures, fmt.Errorf("looking for the record of claim %s outside the pool: %w", claimKey, err))
			return nil
		}
		if movedTo != "" {
			return a.reportMovedHeld(ctx, address, p, movedTo)
		}
	}
	// Or the guard handed another claim's record over to it, and stopped
	// before the claim was told (the hand-over's answer was lost): the
	// IPAddress's note, written first, says so.
	if note, noted := address.Annotations[v1alpha1.RecordMovedAnnotation]; noted {
		return a.reportHeldAgain(ctx, address, p, note)
	}
	if err := reservation.NoteMarker(ctx, a.Client, address, marker); err != nil {
		return err
	}
	return a.markReserved(ctx, address, true, "")
}

// drifted handles a bound claim whose record the listing lacks.
func (a *auditRun) drifted(ctx context.Context, address *ipamv1.IPAddress, p netip.Prefix) error {
	log := ctrl.LoggerFrom(ctx)
	key := client.ObjectKeyFromObject(address)
	liveClaim, live, err := a.liveBound(ctx, key)
	if err != nil || live != p.Addr() {
		return err
	}
	// A paused Cluster's claims are not acted on, by the audit either: in
	// the middle of a clusterctl move the source still owns them.
	cluster, err := reservation.GetCluster(ctx, a.Client, liveClaim.Namespace, reservation.ClaimClusterName(liveClaim))
	if err != nil {
		return err
	}
	if paused, _ := reservation.IsPaused(cluster, a.pool); paused {
		return nil
	}
	claim := reservation.BackendClaim(a.Identity, liveClaim)
	// Only a record under the marker the reservation was recorded with is
	// the claim's to restore: another management cluster may hold the
	// address for a claim of the same namespace and name.
	claim.Recorded = reservation.Recorded(liveClaim, address).Marker
	movedTo := ""
	switch found, err := a.backend.Lookup(ctx, claim); {
	case err == nil && found.Address.Addr() == p.Addr():
		// Found after all: bound after the listing.
		return a.markReserved(ctx, address, true, "")
	case err == nil:
		// The IPAM team moved the claim's record to another address.
		movedTo = fmt.Sprintf("%s (%s)", found.Address.Addr(), found.Reference)
	case errors.Is(err, backends.ErrOutsidePool):
		// Or into another VRF or network, out of the pool's scope.
		movedTo = err.Error()
	case !errors.Is(err, backends.ErrNotFound):
		// Not decidable now: the next audit looks again, and the
		// condition says why this one could not.
		a.failures = append(a.failures, fmt.Errorf("looking up the record of claim %s: %w", key, err))
		return nil
	default:
		// Not in the pool's scope; the listing of strays may have seen
		// where it went (another network view).
		if movedTo, err = a.movedTo(ctx, types.NamespacedName{Namespace: key.Namespace, Name: address.Spec.ClaimRef.Name}); err != nil {
			a.failures = append(a.failures, fmt.Errorf("looking for the record of claim %s outside the pool: %w", key, err))
			return nil
		}
	}
	rec := backends.Record{Address: p, Marker: claim.Marker}
	if movedTo != "" {
		// Noted before the address is held again: were the manager to stop
		// in between, the next audit would take the moved record for a
		// duplicate of the restored one and delete the IPAM team's edit.
		if err := reservation.MarkRecordMoved(ctx, a.Client, address, movedTo); err != nil {
			return err
		}
	}
	if movedTo == "" {
		// A deleted DHCP reservation comes back as it was made; a moved
		// record still holds the MAC, so the address is only held.
		claim.MAC = macaddress.Recorded(liveClaim, a.Kind, a.pool)
	}
	if movedTo == "" && backends.Offers(a.backend, backends.RoleAddressRequester) {
		// Said before the address is held again, as a move is noted:
		// were the manager to stop in between, or the answer be lost, the
		// next audit finds the restored record under the claim's marker
		// and, without this, nothing would tell it the record was ever
		// deleted.
		if err := a.setReserved(ctx, address, metav1.ConditionFalse, v1alpha1.RecordDeletedReason, fmt.Sprintf(
			"the record of this claim's address %s was deleted in the IPAM system; the machine still uses it, and the audit is holding it for it again", p.Addr())); err != nil {
			return err
		}
	}
	alloc, err := a.backend.Restore(ctx, claim, p)
	if err == nil {
		// The record the machine's address is held by now, marked with this
		// cluster's marker (after a clusterctl move, say): a release, or a
		// move back, must know it by both.
		if err := reservation.NoteRecord(ctx, a.Client, address, alloc, claim.Marker); err != nil {
			return err
		}
	}
	switch {
	case err == nil && movedTo != "":
		return a.recordMoved(ctx, address, p, movedTo, alloc)
	case err == nil:
		a.status.Drifted++
		rec.Reference = alloc.Reference
		a.addFinding(v1alpha1.FindingRestored, rec, false)
		metrics.AuditActions.WithLabelValues(a.Kind.Kind, metrics.AuditRestored).Inc()
		log.Info("Restored the claim's record", "address", p.Addr().String(), "claim", key.String())
		a.actions = append(a.actions, fmt.Sprintf("restored %s for claim %s", p.Addr(), key))
		a.Recorder.Eventf(address, a.pool, corev1.EventTypeNormal, reasons.ReservationRestoredReason, "Audit",
			"No record in the IPAM system held %s under this cluster's marker; it is held for the claim again (%s)", p.Addr(), alloc.Reference)
		return a.setReserved(ctx, address, metav1.ConditionTrue, v1alpha1.RecordDeletedReason, fmt.Sprintf(
			"the record of this claim's address %s was deleted in the IPAM system; the machine still uses it, and it is held for it again (%s)", p.Addr(), alloc.Reference))
	case errors.Is(err, backends.ErrAddressTaken):
		a.status.Drifted++
		a.addFinding(v1alpha1.FindingTaken, rec, false)
		metrics.AuditActions.WithLabelValues(a.Kind.Kind, metrics.AuditTaken).Inc()
		msg := fmt.Sprintf("the record of %s is gone from the IPAM system and another record holds the address, so two machines may use it: %v", p.Addr(), err)
		a.Recorder.Eventf(address, a.pool, corev1.EventTypeWarning, v1alpha1.AddressTakenOverReason, "Audit", "%s", msg)
		a.Recorder.Eventf(a.pool, address, corev1.EventTypeWarning, v1alpha1.AddressTakenOverReason, "Audit", "Claim %s: %s", key, msg)
		return a.markReserved(ctx, address, false, msg)
	case errors.Is(err, backends.ErrOutsidePool) && movedTo == "":
		// The pool's sources changed since the claim was bound: the
		// address is not held again, and the claim says so instead of
		// what was said before the restore.
		return a.setReserved(ctx, address, metav1.ConditionFalse, v1alpha1.RecordDeletedReason, fmt.Sprintf(
			"the record of this claim's address %s was deleted in the IPAM system; the machine still uses it, but the pool's sources no longer hold it, so it is not held again: %v", p.Addr(), err))
	case errors.Is(err, backends.ErrOutsidePool):
		// The pool's sources changed since the claim was bound.
		return nil
	case errors.Is(err, backends.ErrUnsupported):
		return a.unrestorable(ctx, address, p, movedTo)
	default:
		a.failures = append(a.failures, fmt.Errorf("restoring %s for claim %s: %w", p.Addr(), key, err))
		return nil
	}
}

// unrestorable reports a bound claim whose record was deleted or moved in
// a pool that cannot hold a given address again (a carved child: NetBox
// carves only the next free block under its lock, and a plain create could
// race a carve). The machine keeps using it; the claim says so, and nothing
// is carved elsewhere.
func (a *auditRun) unrestorable(ctx context.Context, address *ipamv1.IPAddress, p netip.Prefix, movedTo string) error {
	key := client.ObjectKeyFromObject(address)
	a.status.Drifted++
	a.addFinding(v1alpha1.FindingDeleted, backends.Record{Address: p, Marker: backends.Marker(a.Identity, key.Namespace, address.Spec.ClaimRef.Name)}, false)
	what := "deleted"
	if movedTo != "" {
		what = "moved to " + movedTo
	}
	msg := fmt.Sprintf("the record of %s was %s in the IPAM system while the machine still uses it, and this pool cannot hold it again: recreate it there with this claim's marker, or replace the machine",
		p, what)
	a.Recorder.Eventf(address, a.pool, corev1.EventTypeWarning, v1alpha1.RecordDeletedReason, "Audit", "%s", msg)
	a.Recorder.Eventf(a.pool, address, corev1.EventTypeWarning, v1alpha1.RecordDeletedReason, "Audit", "Claim %s: %s", key, msg)
	return a.setReserved(ctx, address, metav1.ConditionFalse, v1alpha1.RecordDeletedReason, msg)
}

// recordMoved reports a bound claim whose record the IPAM team moved,
// after the machine's address was held for it again (the IPAddress already
// remembers it, see drifted): the claim's condition and events name what
// changed.
func (a *auditRun) recordMoved(ctx context.Context, address *ipamv1.IPAddress, p netip.Prefix, movedTo string, alloc backends.Allocation) error {
	key := client.ObjectKeyFromObject(address)
	if _, seen := a.movedSeen[types.NamespacedName{Namespace: key.Namespace, Name: address.Spec.ClaimRef.Name}]; !seen {
		// Moved out of the listing's scope (another VRF or network):
		// the finding names the claim's address.
		a.status.Drifted++
		a.addFinding(v1alpha1.FindingMoved, backends.Record{Address: p, Marker: backends.Marker(a.Identity, key.Namespace, address.Spec.ClaimRef.Name)}, false)
	}
	metrics.AuditActions.WithLabelValues(a.Kind.Kind, metrics.AuditRestored).Inc()
	a.actions = append(a.actions, fmt.Sprintf("held %s for claim %s again: its record was moved to %s", p.Addr(), key, movedTo))
	msg := fmt.Sprintf("the record of this claim's address %s was moved in the IPAM system to %s; the machine still uses %s, which is held for it again (%s). To move the machine, replace it",
		p.Addr(), movedTo, p.Addr(), alloc.Reference)
	a.Recorder.Eventf(address, a.pool, corev1.EventTypeWarning, v1alpha1.RecordMovedReason, "Audit", "%s", msg)
	a.Recorder.Eventf(a.pool, address, corev1.EventTypeWarning, v1alpha1.RecordMovedReason, "Audit", "Claim %s: %s", key, msg)
	return a.setReserved(ctx, address, metav1.ConditionTrue, v1alpha1.RecordMovedReason, msg)
}

// reportMovedHeld says on the claim that its record was moved while its
// address is held for it, unless the claim already says so.
func (a *auditRun) reportMovedHeld(ctx context.Context, address *ipamv1.IPAddress, p netip.Prefix, movedTo string) error {
	claim := &ipamv1.IPAddressClaim{}
	if err := a.Client.Get(ctx, client.ObjectKeyFromObject(address), claim); err != nil {
		return client.IgnoreNotFound(err)
	}
	if c := conditions.Get(claim, v1alpha1.AddressReservedCondition); c != nil && c.Status == metav1.ConditionTrue &&
		(c.Reason == v1alpha1.RecordMovedReason || c.Reason == reasons.AddressHeldInClusterReason) {
		return nil
	}
	return a.setReserved(ctx, address, metav1.ConditionTrue, v1alpha1.RecordMovedReason, fmt.Sprintf(
		"a record of this claim was moved in the IPAM system to %s; the machine still uses %s, which is held for it. To move the machine, replace it",
		movedTo, p.Addr()))
}

// reportHeldAgain says on the claim that its address is held for it again
// by a record handed over by the guard, unless the claim already says what
// happened to its record.
func (a *auditRun) reportHeldAgain(ctx context.Context, address *ipamv1.IPAddress, p netip.Prefix, note string) error {
	claim := &ipamv1.IPAddressClaim{}
	if err := a.Client.Get(ctx, client.ObjectKeyFromObject(address), claim); err != nil {
		return client.IgnoreNotFound(err)
	}
	if c := conditions.Get(claim, v1alpha1.AddressReservedCondition); c != nil && c.Status == metav1.ConditionTrue &&
		(c.Reason == v1alpha1.RecordMovedReason || c.Reason == v1alpha1.RecordDeletedReason || c.Reason == reasons.AddressHeldInClusterReason) {
		return nil
	}
	return a.setReserved(ctx, address, metav1.ConditionTrue, reasons.AddressHeldInClusterReason, fmt.Sprintf(
		"the IPAM system no longer held this claim's address %s for it (its record is at %s); the machine still uses it, and a record holds it for this claim again",
		p.Addr(), note))
}

// markReserved sets the claim's AddressReserved condition when it changes:
// a claim whose record is fine and that never drifted is not written.
func (a *auditRun) markReserved(ctx context.Context, address *ipamv1.IPAddress, reserved bool, msg string) error {
	claim := &ipamv1.IPAddressClaim{}
	if err := a.Client.Get(ctx, client.ObjectKeyFromObject(address), claim); err != nil {
		return client.IgnoreNotFound(err)
	}
	prev := conditions.Get(claim, v1alpha1.AddressReservedCondition)
	if reserved && (prev == nil || prev.Status == metav1.ConditionTrue) {
		return nil
	}
	if reserved && prev.Reason == v1alpha1.RecordDeletedReason {
		// An audit held the address again and stopped before it said so:
		// the claim still says why it has a new record.
		return a.setReserved(ctx, address, metav1.ConditionTrue, v1alpha1.RecordDeletedReason, fmt.Sprintf(
			"the record of this claim's address %s was deleted in the IPAM system; the machine still uses it, and it is held for it again", address.Spec.Address))
	}
	if !reserved && prev != nil && prev.Status == metav1.ConditionFalse && prev.Message == msg {
		return nil
	}
	if reserved {
		return a.setReserved(ctx, address, metav1.ConditionTrue, v1alpha1.ReservedReason, "")
	}
	return a.setReserved(ctx, address, metav1.ConditionFalse, v1alpha1.AddressTakenOverReason, msg)
}

// setReserved writes the AddressReserved condition of the IPAddress's claim.
func (a *auditRun) setReserved(ctx context.Context, address *ipamv1.IPAddress, status metav1.ConditionStatus, reason, msg string) error {
	claim := &ipamv1.IPAddressClaim{}
	if err := a.Client.Get(ctx, client.ObjectKeyFromObject(address), claim); err != nil {
		return client.IgnoreNotFound(err)
	}
	return reservation.SetAddressReserved(ctx, a.Client, claim, status, reason, msg)
}

// oldEnough says whether a record has been seen in its state for minAge,
// and notes when it will have been otherwise.
func (a *auditRun) oldEnough(rec backends.Record) bool {
	key := findingKey(rec)
	a.seen = append(a.seen, key)
	a.mu.Lock()
	seen := a.firstSeen[a.pool.GetUID()]
	if seen == nil {
		seen = map[string]time.Time{}
		a.firstSeen[a.pool.GetUID()] = seen
	}
	first, ok := seen[key]
	if !ok {
		first = a.now
		seen[key] = first
	}
	a.mu.Unlock()
	ready := first.Add(a.minAge())
	if ready.After(a.now) {
		a.pending(ready)
		return false
	}
	return true
}

func (a *auditRun) pending(at time.Time) {
	if a.pendingAt.IsZero() || at.Before(a.pendingAt) {
		a.pendingAt = at
	}
}

func findingKey(rec backends.Record) string { return rec.Reference + "|" + rec.Marker }

// forgetUnseen keeps only the findings this audit saw: a record that is no
// longer an orphan or duplicate starts afresh if it becomes one again.
func (a *auditRun) forgetUnseen() {
	a.mu.Lock()
	defer a.mu.Unlock()
	seen := a.firstSeen[a.pool.GetUID()]
	for key := range seen {
		if !slices.Contains(a.seen, key) {
			delete(seen, key)
		}
	}
}

func (a *auditRun) addFinding(t v1alpha1.FindingType, rec backends.Record, released bool) {
	if len(a.status.Findings) >= v1alpha1.MaxAuditFindings {
		return
	}
	a.status.Findings = append(a.status.Findings, v1alpha1.AuditFinding{
		Type: t, Address: rec.Address.Addr().String(), Marker: rec.Marker, Reference: rec.Reference, Released: released,
	})
}

// report writes status.audit and the Audited condition, and tells people:
// one event per audit that found something, one per action, and metrics.
func (a *auditRun) report(ctx context.Context) error {
	pool := a.pool
	patchHelper, err := patch.NewHelper(pool, a.Client)
	if err != nil {
		return err
	}
	a.status.LastRun = metav1.Time{Time: time.Now()}
	a.status.Request = pool.GetAnnotations()[v1alpha1.AuditAnnotation]
	a.status.ObservedGeneration = pool.GetGeneration()
	slices.SortFunc(a.status.Findings, func(x, y v1alpha1.AuditFinding) int { return strings.Compare(x.Address, y.Address) })
	s := a.status
	summary := fmt.Sprintf("%d records: %d orphans, %d duplicates, %d drifted, %d strays, %d tombstones", s.Records, s.Orphans, s.Duplicates, s.Drifted, s.Strays, s.Tombstones)
	cond := metav1.Condition{Type: v1alpha1.AuditedCondition, Status: metav1.ConditionTrue, Reason: v1alpha1.AuditCleanReason, Message: summary}
	if s.Orphans+s.Duplicates+s.Drifted+s.Strays > 0 {
		cond.Reason = v1alpha1.FindingsReportedReason
	}
	if len(a.failures) > 0 {
		cond.Message += fmt.Sprintf("; %d actions failed and are retried at the next audit: %v", len(a.failures), a.failures[0])
	}
	pool.GetPoolStatus().Audit = &a.status
	conditions.Set(pool, cond)
	if err := patchHelper.Patch(ctx, pool, patch.WithOwnedConditions{Conditions: []string{v1alpha1.AuditedCondition}}); err != nil {
		if notfound.Ignore(err) == nil {
			// The pool was deleted during its audit: nothing to report to.
			return nil
		}
		return fmt.Errorf("writing the audit's status: %w", err)
	}
	metrics.SetAuditFindings(a.Kind.Kind, pool, s)
	for _, action := range a.actions {
		a.Recorder.Eventf(pool, nil, corev1.EventTypeNormal, reasons.AuditActionReason, "Audit", "%s", action)
	}
	if s.Orphans+s.Duplicates > 0 {
		a.Recorder.Eventf(pool, nil, corev1.EventTypeWarning, v1alpha1.FindingsReportedReason, "Audit", "%s (see status.audit)", summary)
	}
	ctrl.LoggerFrom(ctx).V(1).Info("Audited the pool", "records", s.Records, "orphans", s.Orphans, "duplicates", s.Duplicates,
		"drifted", s.Drifted, "tombstones", s.Tombstones)
	return nil
}

// setAuditFailed records a failed listing without losing the last report.
func (r *AuditReconciler) setAuditFailed(ctx context.Context, pool poolkind.Pool, err error) error {
	prev := conditions.Get(pool, v1alpha1.AuditedCondition)
	if prev != nil && prev.Reason == v1alpha1.AuditFailedReason && prev.Message == err.Error() {
		return nil
	}
	patchHelper, patchErr := patch.NewHelper(pool, r.Client)
	if patchErr != nil {
		return patchErr
	}
	conditions.Set(pool, metav1.Condition{Type: v1alpha1.AuditedCondition, Status: metav1.ConditionFalse,
		Reason: v1alpha1.AuditFailedReason, Message: err.Error()})
	r.Recorder.Eventf(pool, nil, corev1.EventTypeWarning, v1alpha1.AuditFailedReason, "Audit", "%v", err)
	if err := patchHelper.Patch(ctx, pool, patch.WithOwnedConditions{Conditions: []string{v1alpha1.AuditedCondition}}); notfound.Ignore(err) != nil {
		return fmt.Errorf("writing the audit's status: %w", err)
	}
	return nil
}
