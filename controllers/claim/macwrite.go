package claim

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/api/v1alpha1"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/macaddress"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/reasons"
)

// The MAC written late. A CAPV claim of a pool whose fixed addresses carry
// the machine's MAC, reserved without one because vSphere gives the device
// its MAC only once the VM is ready (MACAddressDeferred, see
// macForAllocation), says so on its MACAddressCurrent condition. Once
// bound, it waits for the VSphereVM to report the device's MAC
// (status.network[i].macAddr), then has the backend write it into the
// fixed address (backends.MACWriter: match_client MAC_ADDRESS), records it
// in the claim's MAC annotations as if the record had been made with it,
// and says so (MACAddressCurrent True, MACAddressWritten). The MAC is
// written once: from then on checkBoundMAC compares it with the
// machine's, and a MAC that changes is reported, never written.

// deferMAC marks a claim reserved without its machine's MAC, so that the
// MAC is written into its record once the machine reports it.
func deferMAC(s *scope, why string) {
	s.setCondition(metav1.Condition{Type: v1alpha1.MACAddressCurrentCondition, Status: metav1.ConditionFalse,
		Reason: reasons.MACAddressDeferredReason,
		Message: "the fixed address was reserved without a MAC: " + why +
			"; the MAC is written into it once the machine reports it"})
}

// macDeferred says whether the bound claim waits for its machine's MAC to
// be written into its record.
func macDeferred(s *scope) bool {
	c := s.condition(v1alpha1.MACAddressCurrentCondition)
	return c != nil && c.Reason == reasons.MACAddressDeferredReason
}

// writeDeferredMAC writes the machine's MAC into the fixed address of a
// bound claim reserved without one, once the machine reports it. A claim
// whose record carries a MAC after all (a plan the IPAM team made, or a
// MAC written before a restart) is handed to checkBoundMAC's comparison.
func (r *ClaimReconciler) writeDeferredMAC(ctx context.Context, s *scope) error {
	claim, kind, pool := s.claim, s.kind, s.pool
	if r.MACAddresses == nil || pool == nil || !kind.WantsMachineMAC(pool) || !macDeferred(s) {
		return nil
	}
	key := client.ObjectKeyFromObject(claim)
	if claim.Annotations[v1alpha1.MACAddressAnnotation] != "" {
		r.MACAddresses.StopAwaiting(key)
		s.deleteCondition(v1alpha1.MACAddressCurrentCondition)
		return nil
	}
	found, err := r.MACAddresses.Lookup(ctx, claim)
	if err != nil {
		return fmt.Errorf("finding the machine's MAC: %w", err)
	}
	if found.Source != (macaddress.Source{}) {
		r.MACAddresses.Await(key)
		r.MACAddresses.Watch(found.Source, key)
	}
	if found.MAC == "" {
		// The VSphereVM's update that reports it brings the claim back.
		ctrl.LoggerFrom(ctx).V(4).Info("Waiting for the machine to report the MAC its fixed address gets")
		return nil
	}
	backend, err := s.reserver()
	if err != nil {
		return fmt.Errorf("connecting to write the machine's MAC: %w", err)
	}
	rec := backends.Record{
		Reference: s.address.Annotations[v1alpha1.ReservationRecordAnnotation],
		Marker:    s.address.Annotations[v1alpha1.ReservationMarkerAnnotation],
	}
	return r.writeMAC(ctx, s, backend, rec, found)
}

// writeMAC writes the machine's MAC found into the claim's record rec and
// says on the claim what came of it.
func (r *ClaimReconciler) writeMAC(ctx context.Context, s *scope, writer backends.MACWriter, rec backends.Record, found macaddress.Found) error {
	claim, pool := s.claim, s.pool
	key := client.ObjectKeyFromObject(claim)
	carried, err := writer.WriteMAC(ctx, rec, found.MAC)
	switch {
	case errors.Is(err, backends.ErrNoMACMatch):
		// An IPv6 fixed address (a DUID's) or a host record: no MAC to
		// write, nothing to compare.
		r.MACAddresses.StopAwaiting(key)
		s.deleteCondition(v1alpha1.MACAddressCurrentCondition)
		ctrl.LoggerFrom(ctx).V(2).Info("The claim's record matches no DHCP client by MAC, no MAC written", "record", rec.Reference)
		return nil
	case errors.Is(err, backends.ErrMACAddressInUse), errors.Is(err, backends.ErrNotOwned), errors.Is(err, backends.ErrNotFound):
		r.MACAddresses.StopAwaiting(key)
		msg := fmt.Sprintf("%s gives MAC %s, which could not be written into the claim's record %s: %v; "+
			"the provider does not try again: set the MAC in the grid and the claim's annotation %s, or delete the claim to reserve again",
			found.Source, found.MAC, rec.Reference, err, v1alpha1.MACAddressAnnotation)
		r.Recorder.Eventf(claim, pool, corev1.EventTypeWarning, reasons.MACAddressNotWrittenReason, "WriteMAC", "%s", msg)
		s.setCondition(metav1.Condition{Type: v1alpha1.MACAddressCurrentCondition, Status: metav1.ConditionFalse,
			Reason: reasons.MACAddressNotWrittenReason, Message: msg})
		return nil
	case err != nil:
		return fmt.Errorf("writing the machine's MAC into %s: %w", rec.Reference, err)
	}
	r.MACAddresses.StopAwaiting(key)
	if carried == "" {
		// A plan without a MAC keeps none: nothing to compare.
		s.deleteCondition(v1alpha1.MACAddressCurrentCondition)
		return nil
	}
	if claim.Annotations == nil {
		claim.Annotations = map[string]string{}
	}
	claim.Annotations[v1alpha1.MACAddressAnnotation] = carried
	claim.Annotations[v1alpha1.MACAddressSourceAnnotation] = found.Source.Key()
	if carried != found.MAC {
		// The record had a MAC already: compared, and reported if it is
		// not the machine's, never rewritten.
		s.deleteCondition(v1alpha1.MACAddressCurrentCondition)
		return nil
	}
	ctrl.LoggerFrom(ctx).Info("Wrote the machine's MAC into its fixed address", "mac", carried, "source", found.Source.String(),
		"record", rec.Reference)
	r.Recorder.Eventf(claim, pool, corev1.EventTypeNormal, reasons.MACAddressWrittenReason, "WriteMAC",
		"wrote MAC %s, which %s reports, into the claim's fixed address %s (match_client MAC_ADDRESS)", carried, found.Source, rec.Reference)
	s.setCondition(metav1.Condition{Type: v1alpha1.MACAddressCurrentCondition, Status: metav1.ConditionTrue,
		Reason:  reasons.MACAddressWrittenReason,
		Message: fmt.Sprintf("the fixed address carries MAC %s, which %s reported after the address was reserved", carried, found.Source)})
	return nil
}
