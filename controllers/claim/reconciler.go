package claim

import (
	"time"

	"k8s.io/apimachinery/pkg/util/cache"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/backendcache"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/macaddress"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/poolstate"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/reservation"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/retry"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/pkg/poolkind"
)

// ClaimReconciler fulfils IPAddressClaims that reference one of our pool
// kinds: it owns the whole Cluster API IPAM contract and asks the pool's
// backend only to allocate, look up and release.
type ClaimReconciler struct {
	Client client.Client
	// APIReader reads past the cache where a decision must not rest on a
	// stale view.
	APIReader client.Reader
	// InFlight keeps allocations and pool deletions apart.
	InFlight *poolstate.InFlight
	// Alarms tells a pool at once that its credentials were refused, or
	// that its IPAM system answered what the pool may not give.
	Alarms *poolstate.Alarms
	// Tombstones learns of the grace periods releases start, for the audit.
	Tombstones *poolstate.Tombstones
	Recorder   events.EventRecorder
	Kinds      poolkind.Kinds
	Backends   *backendcache.Backends
	// MachineNames names the Machine of each new claim, for the pools'
	// patterns.
	MachineNames *MachineNames
	// MACAddresses finds the MAC of the machine's interface, for pools
	// whose fixed addresses carry it (package macaddress); nil for none.
	MACAddresses *macaddress.Sources

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

	waits *retry.WaitBackoff
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

// allocationAnswer is a background reservation's answer.
type allocationAnswer struct {
	// backend is the pool's backend the reservation went through, as
	// built from the pool's spec and Secret at the time.
	backend backends.Reserver
	alloc   backends.Allocation
}

// releaseAnswer is a background release's answer.
type releaseAnswer struct {
	backend backends.Reserver
	last    backends.Reservation
	// kept: the record was kept for the IPAM team (Backend.Keep).
	kept bool
}

// wait is the result of a reconcile that leaves the claim waiting for
// something no event is guaranteed to announce: it comes back after a capped
// backoff.
func (r *ClaimReconciler) wait(claim *ipamv1.IPAddressClaim) ctrl.Result {
	return ctrl.Result{RequeueAfter: r.waits.Next(client.ObjectKeyFromObject(claim))}
}

// holdBack is wait for a claim whose reservation was refused or failed: it
// also holds the claim back for that wait (see holds).
func (r *ClaimReconciler) holdBack(claim *ipamv1.IPAddressClaim) ctrl.Result {
	retry := r.wait(claim)
	r.holds.hold(claim, retry.RequeueAfter)
	return retry
}

// backendClaim describes the claim to the backend.
func (r *ClaimReconciler) backendClaim(claim *ipamv1.IPAddressClaim) backends.Claim {
	return reservation.BackendClaim(r.Identity, claim)
}
