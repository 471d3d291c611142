package endpoint

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
)

// A Cluster that waits for its endpoint says so: Cluster API's control
// plane waits for the endpoint for ever, and the claim that says why
// (PoolExhausted, PoolNotReady, a refused credential) is an object the
// user never made. The Cluster gets a Warning event with the claim's
// reason and message, again after a backoff while the wait lasts (events
// expire after an hour), and a metric that an alert reads.

// waitingEndpoints is 1 for each Cluster whose endpoint's claim waits.
var waitingEndpoints = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "capi_ipam_bridge_control_plane_endpoint_waiting",
	Help: "1 for each Cluster whose control-plane endpoint's IPAddressClaim waits for an address, by the claim's reason.",
	// cluster_namespace, not namespace: a scrape's target label namespace
	// (the manager's) would override it.
}, []string{"cluster_namespace", "cluster", "reason"})

var registerWaiting sync.Once

func registerMetrics() {
	registerWaiting.Do(func() { ctrlmetrics.Registry.MustRegister(waitingEndpoints) })
}

// Repeats of the waiting event: first after a minute, doubling to half the
// time an event lives.
const (
	firstWaitRepeat = time.Minute
	maxWaitRepeat   = 30 * time.Minute
)

// waitRepeats are, per Cluster, the delay before the next event.
type waitRepeats struct {
	mu    sync.Mutex
	delay map[types.UID]time.Duration
}

func (w *waitRepeats) next(uid types.UID) time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.delay == nil {
		w.delay = map[types.UID]time.Duration{}
	}
	d := max(w.delay[uid], firstWaitRepeat)
	w.delay[uid] = min(2*d, maxWaitRepeat)
	return d
}

func (w *waitRepeats) forget(uid types.UID) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.delay, uid)
}

// waiting reports a claim that has no address yet on its Cluster, with
// the claim's own reason, and comes back after the backoff.
func (r *Reconciler) waiting(cluster *clusterv1.Cluster, claim *ipamv1.IPAddressClaim) ctrl.Result {
	ready := meta.FindStatusCondition(claim.Status.Conditions, ipamv1.IPAddressClaimReadyCondition)
	if ready == nil || ready.Reason == "" || ready.Status != "False" {
		// Not looked at yet: its first answer brings the Cluster back.
		return ctrl.Result{}
	}
	waitingEndpoints.DeletePartialMatch(prometheus.Labels{"cluster_namespace": cluster.Namespace, "cluster": cluster.Name})
	waitingEndpoints.WithLabelValues(cluster.Namespace, cluster.Name, ready.Reason).Set(1)
	r.warn(cluster, ControlPlaneEndpointWaitingReason, "IPAddressClaim %s waits for the control-plane endpoint's address: %s: %s",
		claim.Name, ready.Reason, ready.Message)
	return ctrl.Result{RequeueAfter: r.repeats.next(cluster.UID)}
}

// forgetWaiting ends the Cluster's wait: its endpoint is bound, or it is
// gone.
func forgetWaiting(namespace, cluster string) {
	waitingEndpoints.DeletePartialMatch(prometheus.Labels{"cluster_namespace": namespace, "cluster": cluster})
}
