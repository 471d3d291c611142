package claim

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/reasons"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/pkg/poolkind"
)

// scope is what one reconcile knows of its claim, handed from phase to
// phase. Phases change the claim (its finalizer, annotations and
// status.addressRef) and say what they concluded of its conditions; the
// claim is patched, with those conditions, once, when the reconcile ends.
type scope struct {
	claim *ipamv1.IPAddressClaim
	// kind is the pool kind the claim's poolRef names, and pool that pool;
	// nil when it is not found.
	kind poolkind.Kind
	pool poolkind.Pool
	// reserver is the pool's backend, built from its spec and Secret: asked
	// for once a reconcile, by the phases that reserve, release or write.
	reserver func() (backends.Reserver, error)
	// address is the claim's own IPAddress as the reconcile found it; nil
	// when it has none.
	address *ipamv1.IPAddress
	// request is what a reservation asks the backend for: the claim's
	// marker and Machine, and its machine's MAC.
	request backends.Claim
	// requested is the address the claim requests, by its annotation or
	// its pool's pre-allocations, or why that request cannot be read.
	requested addressRequest
	// fresh: this reconcile wrote the claim's release finalizer on a
	// version of the claim that had none, nor any sign of a reservation,
	// so nothing can have been reserved for it (see backends.Claim.Fresh).
	fresh bool
	// retain: the claim's record is to be kept for the IPAM team, unmarked,
	// when it is deleted (see retains).
	retain bool
	// concluded are the conditions this reconcile concluded, by type; nil
	// for one that goes. Applied to the claim once (conclude).
	concluded map[string]*metav1.Condition
	// writeMetadata writes the claim's metadata as the phases changed it so
	// far, before the reconcile ends (see finalizerFirst).
	writeMetadata func(ctx context.Context) error
}

// setReady concludes the claim's Ready condition.
func (s *scope) setReady(status metav1.ConditionStatus, reason, message string) {
	s.setCondition(metav1.Condition{Type: ipamv1.IPAddressClaimReadyCondition, Status: status, Reason: reason, Message: message})
}

// setCondition concludes one of the claim's conditions.
func (s *scope) setCondition(c metav1.Condition) {
	if s.concluded == nil {
		s.concluded = map[string]*metav1.Condition{}
	}
	s.concluded[c.Type] = &c
}

// deleteCondition concludes that the claim no longer has a condition.
func (s *scope) deleteCondition(conditionType string) {
	if s.concluded == nil {
		s.concluded = map[string]*metav1.Condition{}
	}
	s.concluded[conditionType] = nil
}

// condition is the claim's condition of that type as this reconcile
// leaves it: what a phase concluded, else what the claim says.
func (s *scope) condition(conditionType string) *metav1.Condition {
	if c, ok := s.concluded[conditionType]; ok {
		return c
	}
	return conditions.Get(s.claim, conditionType)
}

// conclude applies the conditions the reconcile concluded to the claim.
func (s *scope) conclude() {
	for t, c := range s.concluded {
		if c == nil {
			conditions.Delete(s.claim, t)
			continue
		}
		conditions.Set(s.claim, *c)
	}
	s.concluded = nil
}

// bound records the claim as bound to its IPAddress.
func (s *scope) bound(address *ipamv1.IPAddress) {
	s.claim.Status.AddressRef = ipamv1.IPAddressReference{Name: address.Name}
	s.setReady(metav1.ConditionTrue, reasons.AddressAllocatedReason, "")
}

// rebuilding says whether the claim lost the IPAddress it was bound to:
// status.addressRef stays set, and its record is found again by its marker.
func (s *scope) rebuilding() bool {
	return s.claim.Status.AddressRef.Name != ""
}

// A phase is one step of a reconcile: it lets the next phase run, or ends
// the reconcile with a result or an error.
type phase func(ctx context.Context, s *scope) (step, error)

// step is what a phase decided: go on, or stop with result.
type step struct {
	result ctrl.Result
	stop   bool
}

// next lets the next phase run.
var next = step{}

// stop ends the reconcile with result.
func stop(result ctrl.Result) step {
	return step{result: result, stop: true}
}

// runPhases runs phases in order until one stops the reconcile or fails.
func runPhases(ctx context.Context, s *scope, phases ...phase) (ctrl.Result, error) {
	for _, p := range phases {
		st, err := p(ctx, s)
		if err != nil || st.stop {
			return st.result, err
		}
	}
	return ctrl.Result{}, nil
}
