package claim

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/api/v1alpha1"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/macaddress"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/reasons"
)

// macForAllocation puts the MAC the claim's new record carries in the
// request, or stops the reconcile instead of reserving now. The claim's annotation wins;
// else the machine's MAC is looked up and recorded in the annotation, which
// is persisted before anything is reserved (as the finalizer is), so that a
// restarted manager makes the record with the MAC the claim names. Until
// the MAC is known the claim waits, its Ready condition saying why. A claim
// rebuilding its IPAddress (bound once) never waits: its record exists,
// whatever MAC it carries.
func (r *ClaimReconciler) macForAllocation(ctx context.Context, s *scope) (step, error) {
	if r.MACAddresses == nil || !s.kind.WantsMachineMAC(s.pool) {
		return next, nil
	}
	key := client.ObjectKeyFromObject(s.claim)
	if recorded, ok := s.claim.Annotations[v1alpha1.MACAddressAnnotation]; ok {
		mac, err := macaddress.Normalize(recorded)
		if err != nil {
			r.waitForMAC(s, fmt.Sprintf("the claim's annotation %s: %v", v1alpha1.MACAddressAnnotation, err))
			return stop(r.wait(s.claim)), nil
		}
		s.request.MAC = mac
		return next, nil
	}
	if s.claim.Status.AddressRef.Name != "" {
		return next, nil
	}
	found, err := r.MACAddresses.Lookup(ctx, s.claim)
	if err != nil {
		return next, fmt.Errorf("finding the machine's MAC: %w", err)
	}
	if found.Source != (macaddress.Source{}) {
		r.MACAddresses.Watch(found.Source, key)
	}
	switch {
	case found.MAC != "":
		if s.claim.Annotations == nil {
			s.claim.Annotations = map[string]string{}
		}
		s.claim.Annotations[v1alpha1.MACAddressAnnotation] = found.MAC
		s.claim.Annotations[v1alpha1.MACAddressSourceAnnotation] = found.Source.Key()
		ctrl.LoggerFrom(ctx).Info("The fixed address will carry the machine's MAC", "mac", found.MAC, "source", found.Source.String())
		// The annotation's write brings the claim back; the requeue covers
		// a missed event.
		return stop(ctrl.Result{RequeueAfter: cacheLagRetry}), nil
	case found.Unknown != "":
		r.waitForMAC(s, found.Unknown)
		return stop(r.wait(s.claim)), nil
	case found.Deferred != "":
		// Waiting would wait for ever: reserve without a MAC, and say so,
		// once.
		if r.MACAddresses.FirstDeferral(key) {
			r.Recorder.Eventf(s.claim, s.pool, corev1.EventTypeNormal, reasons.MACAddressDeferredReason, "Allocate",
				"the fixed address is reserved without a MAC: %s; the MAC is written into it once the VM reports it", found.Deferred)
		}
		deferMAC(s, found.Deferred)
		return next, nil
	}
	// No machine interface: a reservation without a MAC, as for any pool.
	ctrl.LoggerFrom(ctx).V(2).Info("No Metal3 or CAPV machine owns the claim, its fixed address carries no MAC")
	return next, nil
}

// describeRecordMAC makes the claim's MAC annotation say the MAC its
// record carries, as the backend read it when the claim was bound, on a
// pool whose fixed addresses carry the machine's. That may not be the MAC
// the claim asked for: a plan the claim adopted keeps the MAC the IPAM team
// set, and an IPv6 fixed address (or a record made before the pool opted
// in) carries none. Without one the annotations go, the source too: there
// is nothing the machine's MAC could be compared with (checkBoundMAC).
func describeRecordMAC(s *scope, carried string) {
	if !s.kind.WantsMachineMAC(s.pool) {
		return
	}
	if carried == "" {
		delete(s.claim.Annotations, v1alpha1.MACAddressAnnotation)
		delete(s.claim.Annotations, v1alpha1.MACAddressSourceAnnotation)
		return
	}
	if s.claim.Annotations == nil {
		s.claim.Annotations = map[string]string{}
	}
	s.claim.Annotations[v1alpha1.MACAddressAnnotation] = carried
}

// waitForMAC leaves the claim waiting for its machine's MAC; the event is
// sent when the claim starts waiting, not at every look.
func (r *ClaimReconciler) waitForMAC(s *scope, why string) {
	claim := s.claim
	msg := "waiting for the MAC address of the machine's interface, which the pool's fixed addresses carry: " + why
	if prev := s.condition(ipamv1.IPAddressClaimReadyCondition); prev == nil || prev.Reason != reasons.MACAddressUnknownReason {
		r.Recorder.Eventf(claim, nil, corev1.EventTypeNormal, reasons.MACAddressUnknownReason, "Allocate", "%s", msg)
	}
	s.setReady(metav1.ConditionFalse, reasons.MACAddressUnknownReason, msg)
}

// checkBoundMAC compares the MAC a bound claim's record carries (its
// annotation, see describeRecordMAC) with its machine's and reports a
// difference on the claim (MACAddressCurrent False, an event), without
// touching the record: the IPAM team decides. A claim whose record carries
// no MAC (bound before its pool opted in, an IPv6 fixed address, a plan
// without one) is not checked. The
// comparison reads the owner chain (up to three gets), so a bound claim
// makes it once, and then only when its source object changed: a restart
// or a resync of thousands of bound claims reads nothing but the cache.
func (r *ClaimReconciler) checkBoundMAC(ctx context.Context, s *scope) error {
	recorded := s.claim.Annotations[v1alpha1.MACAddressAnnotation]
	if r.MACAddresses == nil || recorded == "" || s.pool == nil || !s.kind.WantsMachineMAC(s.pool) {
		return nil
	}
	key := client.ObjectKeyFromObject(s.claim)
	if src, ok := macaddress.ParseSource(s.claim.Annotations[v1alpha1.MACAddressSourceAnnotation]); ok {
		r.MACAddresses.Watch(src, key)
	}
	prev := s.condition(v1alpha1.MACAddressCurrentCondition)
	if !r.MACAddresses.TakeDue(key) && prev != nil {
		return nil
	}
	found, err := r.MACAddresses.Lookup(ctx, s.claim)
	if err != nil {
		return fmt.Errorf("finding the machine's MAC: %w", err)
	}
	if found.Source != (macaddress.Source{}) {
		// The chain may now lead elsewhere (a Metal3Machine on another
		// host): follow the source it names now.
		r.MACAddresses.Watch(found.Source, key)
		s.claim.Annotations[v1alpha1.MACAddressSourceAnnotation] = found.Source.Key()
	}
	if found.MAC == "" {
		return nil // nothing to compare with: the record stays as it is
	}
	if normalized, err := macaddress.Normalize(recorded); err == nil && normalized == found.MAC {
		// A MAC written late keeps saying so (MACAddressWritten) while it
		// matches.
		if prev == nil || prev.Status != metav1.ConditionTrue {
			s.setCondition(metav1.Condition{Type: v1alpha1.MACAddressCurrentCondition, Status: metav1.ConditionTrue,
				Reason: v1alpha1.MACAddressMatchesReason})
		}
		return nil
	}
	msg := fmt.Sprintf("the claim's fixed address carries MAC %s, but %s now gives %s; the provider does not change the record: "+
		"update its MAC in the grid and the claim's annotation %s, or delete the claim to reserve again", recorded, found.Source, found.MAC,
		v1alpha1.MACAddressAnnotation)
	if prev == nil || prev.Status != metav1.ConditionFalse || prev.Message != msg {
		ctrl.LoggerFrom(ctx).Info("The machine's MAC changed after the claim was bound", "recorded", recorded, "now", found.MAC,
			"source", found.Source.String())
		r.Recorder.Eventf(s.claim, s.pool, corev1.EventTypeWarning, v1alpha1.MACAddressChangedReason, "CheckMAC", "%s", msg)
	}
	s.setCondition(metav1.Condition{Type: v1alpha1.MACAddressCurrentCondition, Status: metav1.ConditionFalse,
		Reason: v1alpha1.MACAddressChangedReason, Message: msg})
	return nil
}
