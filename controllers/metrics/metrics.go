package metrics

import (
	"context"
	"errors"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/cluster-api/util/conditions"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/api/v1alpha1"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/reasons"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/pkg/poolkind"
)

// Metrics beyond controller-runtime's, on the manager's metrics endpoint.
// They are registered once per process, so several managers in one test
// binary share them.
var (
	backendOperations = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "capi_ipam_bridge_backend_operations_total",
		Help: "Backend operations (validate, usage, allocate, lookup, release) by backend and outcome.",
	}, []string{"backend", "operation", "outcome"})

	backendOperationSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "capi_ipam_bridge_backend_operation_duration_seconds",
		Help:    "Duration of backend operations, retries included; allocate and release are the allocation and release latency.",
		Buckets: []float64{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60},
	}, []string{"backend", "operation"})

	backendRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "capi_ipam_bridge_backend_http_requests_total",
		Help: "HTTP requests sent to the IPAM systems, each attempt counted, by backend, method and status code (0: no answer).",
	}, []string{"backend", "method", "code"})

	backendBatchSize = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "capi_ipam_bridge_backend_batch_size",
		Help:    "Claims per batch sent to the IPAM systems, by backend and operation (allocate, release): a burst's batches fill up to --max-batch-size.",
		Buckets: []float64{1, 2, 5, 10, 20, 30, 40, 50, 100, 200},
	}, []string{"backend", "operation"})

	ClaimBindSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "capi_ipam_bridge_claim_bind_duration_seconds",
		Help:    "Time from an IPAddressClaim's creation to its IPAddress being written.",
		Buckets: []float64{0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600},
	}, []string{"pool_kind"})

	// The pool's labels are pool_namespace and pool, not namespace and
	// name: a scrape's target labels (namespace, pod, service, endpoint, …)
	// would override those and rename ours exported_*.
	poolLabels = []string{"pool_kind", "pool_namespace", "pool"}

	// Capacity and usage are series of their own, so that a ratio of them
	// needs no ignoring(...).
	poolCapacity = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "capi_ipam_bridge_pool_capacity_addresses",
		Help: "Addresses of a pool's sources as the IPAM system reports them.",
	}, poolLabels)

	poolUsed = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "capi_ipam_bridge_pool_used_addresses",
		Help: "Addresses of a pool's sources in use, as the IPAM system reports them.",
	}, poolLabels)

	poolFree = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "capi_ipam_bridge_pool_free_addresses",
		Help: "Addresses of a pool's sources still free, as the IPAM system reports them.",
	}, poolLabels)

	poolReady = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "capi_ipam_bridge_pool_ready",
		Help: "1 when a pool's Ready condition is True, else 0; reason is the condition's reason (AuthenticationFailed, BackendUnavailable, …).",
	}, append(append([]string{}, poolLabels...), "reason"))

	RecordsLeft = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "capi_ipam_bridge_records_left_total",
		Help: "Records left in the IPAM system when their claim was deleted, by pool kind and reason (ReleaseSkipped: no longer carries the marker; ReleaseLeft: out of the pool's reach).",
	}, []string{"pool_kind", "reason"})

	AddressConflicts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "capi_ipam_bridge_address_conflicts_total",
		Help: "Addresses the IPAM system reserved for a claim while another live IPAddress of this management cluster held them in the same scope; never bound, the record was handed to the holder.",
	}, []string{"pool_kind"})

	AuditRuns = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "capi_ipam_bridge_audit_runs_total",
		Help: "Audits of pools, by pool kind and outcome (succeeded, failed).",
	}, []string{"pool_kind", "outcome"})

	AuditActions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "capi_ipam_bridge_audit_actions_total",
		Help: "What audits did to records, by pool kind and action (orphan_released, duplicate_released, tombstone_deleted, restored, taken: a bound claim's address is held by another record).",
	}, []string{"pool_kind", "action"})

	auditFindings = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "capi_ipam_bridge_audit_findings",
		Help: "What a pool's last audit found, by type (orphans, duplicates, drifted, strays, tombstones).",
	}, append(append([]string{}, poolLabels...), "type"))

	auditFailing = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "capi_ipam_bridge_pool_audit_failing",
		Help: "1 while a pool's last audit failed (its Audited condition is AuditFailed), 0 once one succeeded.",
	}, poolLabels)

	Waiting = &waitingClaims{claims: map[types.NamespacedName]waitingClaim{}, now: time.Now}

	registerOnce sync.Once
)

// Audit actions and outcomes, as AuditActions and AuditRuns count them.
const (
	AuditOrphanReleased    = "orphan_released"
	AuditDuplicateReleased = "duplicate_released"
	AuditTombstoneDeleted  = "tombstone_deleted"
	AuditRestored          = "restored"
	AuditTaken             = "taken"
	AuditSucceeded         = "succeeded"
	AuditFailed            = "failed"
)

// ZeroCounters makes every counter series an alert reads exist at 0 for
// each pool kind served, from the start: Prometheus's increase() over a
// series born at 1 reads 0, so the first conflict after a start (or ever)
// would page no one.
func ZeroCounters(kinds []poolkind.Kind) {
	for _, kind := range kinds {
		AddressConflicts.WithLabelValues(kind.Kind)
		for _, reason := range []string{reasons.ReleaseSkippedReason, reasons.ReleaseLeftReason} {
			RecordsLeft.WithLabelValues(kind.Kind, reason)
		}
		for _, action := range []string{AuditOrphanReleased, AuditDuplicateReleased, AuditTombstoneDeleted, AuditRestored, AuditTaken} {
			AuditActions.WithLabelValues(kind.Kind, action)
		}
		for _, outcome := range []string{AuditSucceeded, AuditFailed} {
			AuditRuns.WithLabelValues(kind.Kind, outcome)
		}
	}
}

// Register adds the provider's metrics to controller-runtime's registry.
func Register() {
	registerOnce.Do(func() {
		ctrlmetrics.Registry.MustRegister(backendOperations, backendOperationSeconds, backendRequests, backendBatchSize,
			ClaimBindSeconds, poolCapacity, poolUsed, poolFree, poolReady, RecordsLeft, AddressConflicts, Waiting, AuditRuns, AuditActions, auditFindings, auditFailing)
	})
}

// instrumented records every operation of a backend.
type instrumented struct {
	backends.Backend
	name string
}

// Instrument records every operation of b, a backend of the IPAM system
// name, in the manager's metrics.
func Instrument(b backends.Backend, name string) backends.Backend {
	return &instrumented{Backend: b, name: name}
}

// Offers passes on which optional roles the backend's driver offers (see
// backends.Offers): wrapping must not hide them.
func (i *instrumented) Offers(role backends.Role) bool { return backends.Offers(i.Backend, role) }

// timed runs one operation of the backend and records its outcome and
// duration.
func timed[T any](i *instrumented, operation string, call func() (T, error)) (T, error) {
	start := time.Now()
	v, err := call()
	backendOperations.WithLabelValues(i.name, operation, outcome(err)).Inc()
	backendOperationSeconds.WithLabelValues(i.name, operation).Observe(time.Since(start).Seconds())
	return v, err
}

// timedErr is timed for an operation that returns only an error.
func timedErr(i *instrumented, operation string, call func() error) error {
	_, err := timed(i, operation, func() (struct{}, error) { return struct{}{}, call() })
	return err
}

func (i *instrumented) Validate(ctx context.Context) (backends.Usage, error) {
	return timed(i, "validate", func() (backends.Usage, error) { return i.Backend.Validate(ctx) })
}

func (i *instrumented) Usage(ctx context.Context) (backends.Usage, error) {
	return timed(i, "usage", func() (backends.Usage, error) { return i.Backend.Usage(ctx) })
}

func (i *instrumented) Allocate(ctx context.Context, c backends.Claim) (backends.Allocation, error) {
	return timed(i, "allocate", func() (backends.Allocation, error) { return i.Backend.Allocate(ctx, c) })
}

func (i *instrumented) Lookup(ctx context.Context, c backends.Claim) (backends.Allocation, error) {
	return timed(i, "lookup", func() (backends.Allocation, error) { return i.Backend.Lookup(ctx, c) })
}

func (i *instrumented) Release(ctx context.Context, c backends.Claim, last backends.Reservation) error {
	return timedErr(i, "release", func() error { return i.Backend.Release(ctx, c, last) })
}

func (i *instrumented) Retire(ctx context.Context, c backends.Claim, last backends.Reservation, at time.Time) error {
	return timedErr(i, "retire", func() error { return i.Backend.Retire(ctx, c, last, at) })
}

func (i *instrumented) Keep(ctx context.Context, c backends.Claim, last backends.Reservation) error {
	return timedErr(i, "keep", func() error { return i.Backend.Keep(ctx, c, last) })
}

func (i *instrumented) Records(ctx context.Context, prefix string) ([]backends.Record, error) {
	return timed(i, "records", func() ([]backends.Record, error) { return i.Backend.Records(ctx, prefix) })
}

func (i *instrumented) Strays(ctx context.Context, prefix string, maxAge time.Duration) ([]backends.Record, error) {
	return timed(i, "strays", func() ([]backends.Record, error) { return i.Backend.Strays(ctx, prefix, maxAge) })
}

func (i *instrumented) Remark(ctx context.Context, rec backends.Record, marker string) error {
	return timedErr(i, "remark", func() error { return i.Backend.Remark(ctx, rec, marker) })
}

func (i *instrumented) Delete(ctx context.Context, rec backends.Record) error {
	return timedErr(i, "delete", func() error { return i.Backend.Delete(ctx, rec) })
}

func (i *instrumented) Restore(ctx context.Context, c backends.Claim, address netip.Prefix) (backends.Allocation, error) {
	return timed(i, "restore", func() (backends.Allocation, error) { return i.Backend.Restore(ctx, c, address) })
}

// WriteMAC is the backend's, timed as its other operations.
func (i *instrumented) WriteMAC(ctx context.Context, rec backends.Record, mac string) (string, error) {
	return timed(i, "write_mac", func() (string, error) { return i.Backend.WriteMAC(ctx, rec, mac) })
}

// outcome names the class of an operation's result; the set is fixed, so the
// label stays small.
func outcome(err error) string {
	for _, o := range []struct {
		err  error
		name string
	}{
		{backends.ErrExhausted, "exhausted"},
		{backends.ErrNotFound, "not_found"},
		{backends.ErrUnauthorized, "unauthorized"},
		{backends.ErrForbidden, "forbidden"},
		{backends.ErrConflict, "conflict"},
		{backends.ErrInvalidConfig, "invalid_config"},
		{backends.ErrSetupRequired, "setup_required"},
		{backends.ErrThrottled, "throttled"},
		{backends.ErrUnavailable, "unavailable"},
		{backends.ErrNotOwned, "not_owned"},
		{backends.ErrUnreachable, "unreachable"},
		{backends.ErrOutsidePool, "outside_pool"},
		{backends.ErrAddressTaken, "address_taken"},
		{backends.ErrUnusableAnswer, "unusable_answer"},
	} {
		if errors.Is(err, o.err) {
			return o.name
		}
	}
	if err != nil {
		return "error"
	}
	return "success"
}

// ObserveRequests returns the hook that counts a backend's HTTP attempts.
func ObserveRequests(backend string) func(method string, code int) {
	return func(method string, code int) {
		backendRequests.WithLabelValues(backend, method, strconv.Itoa(code)).Inc()
	}
}

// ObserveBatches returns the hook that records a backend's batch sizes.
func ObserveBatches(backend string) func(operation string, size int) {
	return func(operation string, size int) {
		backendBatchSize.WithLabelValues(backend, operation).Observe(float64(size))
	}
}

// waitingClaims tracks the claims that are not bound, by pool and reason,
// for the capi_ipam_bridge_claims_waiting gauges: how many wait, and how
// long the oldest has. A count alone cannot tell claims that keep arriving
// and binding from one that waits for ever.
type waitingClaims struct {
	mu     sync.Mutex
	claims map[types.NamespacedName]waitingClaim
	now    func() time.Time
}

// waitingClaim is a claim's pool and reason, and since when it waits: when
// its Ready condition turned False.
type waitingClaim struct {
	group waitingGroup
	since time.Time
}

type waitingGroup struct{ kind, poolNamespace, pool, reason string }

var (
	waitingLabels = append(append([]string{}, poolLabels...), "reason")
	waitingDesc   = prometheus.NewDesc("capi_ipam_bridge_claims_waiting",
		"IPAddressClaims of this provider's pools that have no address yet, by pool and the reason of their Ready condition (Paused: their Cluster or pool is paused).",
		waitingLabels, nil)
	waitingOldestDesc = prometheus.NewDesc("capi_ipam_bridge_claims_waiting_oldest_seconds",
		"How long the IPAddressClaim of a pool that has waited longest for an address has waited (since its Ready condition turned False), by pool and the reason of its Ready condition.",
		waitingLabels, nil)
)

// Set counts the claim as waiting on the pool (namespace "" for a Global
// pool) for reason, since since.
func (w *waitingClaims) Set(key types.NamespacedName, kind, poolNamespace, pool, reason string, since time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.claims[key] = waitingClaim{group: waitingGroup{kind: kind, poolNamespace: poolNamespace, pool: pool, reason: reason}, since: since}
}

func (w *waitingClaims) Forget(key types.NamespacedName) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.claims, key)
}

func (w *waitingClaims) Describe(ch chan<- *prometheus.Desc) {
	ch <- waitingDesc
	ch <- waitingOldestDesc
}

func (w *waitingClaims) Collect(ch chan<- prometheus.Metric) {
	w.mu.Lock()
	counts := map[waitingGroup]int{}
	oldest := map[waitingGroup]time.Time{}
	for _, c := range w.claims {
		counts[c.group]++
		if o, ok := oldest[c.group]; !ok || c.since.Before(o) {
			oldest[c.group] = c.since
		}
	}
	now := w.now()
	w.mu.Unlock()
	for g, n := range counts {
		labels := []string{g.kind, g.poolNamespace, g.pool, g.reason}
		ch <- prometheus.MustNewConstMetric(waitingDesc, prometheus.GaugeValue, float64(n), labels...)
		ch <- prometheus.MustNewConstMetric(waitingOldestDesc, prometheus.GaugeValue, max(now.Sub(oldest[g]).Seconds(), 0), labels...)
	}
}

func SetPoolAddresses(kind string, pool poolkind.Pool, total, used, free int64) {
	poolCapacity.WithLabelValues(kind, pool.GetNamespace(), pool.GetName()).Set(float64(total))
	poolUsed.WithLabelValues(kind, pool.GetNamespace(), pool.GetName()).Set(float64(used))
	poolFree.WithLabelValues(kind, pool.GetNamespace(), pool.GetName()).Set(float64(free))
}

// SetPoolReady exports the pool's Ready condition: one series per pool, for
// the reason it has now.
func SetPoolReady(kind string, pool poolkind.Pool) {
	c := conditions.Get(pool, v1alpha1.ReadyCondition)
	if c == nil {
		return
	}
	poolReady.DeletePartialMatch(poolMetricLabels(kind, pool))
	v := 0.0
	if c.Status == metav1.ConditionTrue {
		v = 1
	}
	poolReady.WithLabelValues(kind, pool.GetNamespace(), pool.GetName(), c.Reason).Set(v)
}

func poolMetricLabels(kind string, pool poolkind.Pool) prometheus.Labels {
	return prometheus.Labels{"pool_kind": kind, "pool_namespace": pool.GetNamespace(), "pool": pool.GetName()}
}

func ForgetPoolAddresses(kind string, pool poolkind.Pool) {
	labels := poolMetricLabels(kind, pool)
	for _, m := range []*prometheus.GaugeVec{poolCapacity, poolUsed, poolFree, poolReady} {
		m.DeletePartialMatch(labels)
	}
	ForgetAuditMetrics(kind, pool.GetNamespace(), pool.GetName())
}

// ForgetAuditMetrics drops the audit's series of a pool that is deleted.
func ForgetAuditMetrics(kind, namespace, name string) {
	labels := prometheus.Labels{"pool_kind": kind, "pool_namespace": namespace, "pool": name}
	auditFindings.DeletePartialMatch(labels)
	auditFailing.DeletePartialMatch(labels)
}

// SetAuditFailing exports whether the pool's last audit failed.
func SetAuditFailing(kind string, pool poolkind.Pool, failing bool) {
	v := 0.0
	if failing {
		v = 1
	}
	auditFailing.WithLabelValues(kind, pool.GetNamespace(), pool.GetName()).Set(v)
}

func SetAuditFindings(kind string, pool poolkind.Pool, s v1alpha1.AuditStatus) {
	for t, v := range map[string]int32{"orphans": s.Orphans, "duplicates": s.Duplicates, "drifted": s.Drifted, "strays": s.Strays, "tombstones": s.Tombstones} {
		auditFindings.WithLabelValues(kind, pool.GetNamespace(), pool.GetName(), t).Set(float64(v))
	}
}
