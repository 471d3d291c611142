package reservation

import (
	"context"
	"fmt"
	"maps"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	"sigs.k8s.io/cluster-api/util/annotations"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/cluster-api/util/patch"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/api/v1alpha1"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends"
)

// NoteMarker records on an IPAddress the marker its claim's record carries,
// unless it says so already.
func NoteMarker(ctx context.Context, c client.Client, address *ipamv1.IPAddress, marker string) error {
	return annotateAddress(ctx, c, address, "the marker of its record", func(o metav1.Object) {
		annotations.AddAnnotations(o, map[string]string{v1alpha1.ReservationMarkerAnnotation: marker})
	})
}

// NoteRecord records on an IPAddress the record that holds its address
// now, as Record does when its claim is bound, unless it says so already:
// the audit restored the record, or the guard handed the claim another.
// The release finds the record by this note after a clusterctl move (the
// record still carries the source's marker), and keeps this one under
// reclaimPolicy Retain.
func NoteRecord(ctx context.Context, c client.Client, address *ipamv1.IPAddress, alloc backends.Allocation, marker string) error {
	return annotateAddress(ctx, c, address, "its record "+alloc.Reference, func(o metav1.Object) { Record(o, alloc, marker) })
}

// MarkRecordMoved notes on an IPAddress where its claim's record was moved.
func MarkRecordMoved(ctx context.Context, c client.Client, address *ipamv1.IPAddress, movedTo string) error {
	return annotateAddress(ctx, c, address, "that its record was moved", func(o metav1.Object) {
		annotations.AddAnnotations(o, map[string]string{v1alpha1.RecordMovedAnnotation: movedTo})
	})
}

// annotateAddress writes what note changes of an IPAddress's annotations,
// with one patch, unless it changes nothing; what says what it notes, for
// errors.
func annotateAddress(ctx context.Context, c client.Client, address *ipamv1.IPAddress, what string, note func(metav1.Object)) error {
	base := address.DeepCopy()
	note(address)
	if maps.Equal(base.Annotations, address.Annotations) {
		return nil
	}
	if err := c.Patch(ctx, address, client.MergeFrom(base)); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("noting on IPAddress %s %s: %w", address.Name, what, err)
	}
	return nil
}

// SetAddressReserved writes a claim's AddressReserved condition, which says
// whether the IPAM system still holds the machine's address for it.
func SetAddressReserved(ctx context.Context, c client.Client, claim *ipamv1.IPAddressClaim, status metav1.ConditionStatus, reason, msg string) error {
	if prev := conditions.Get(claim, v1alpha1.AddressReservedCondition); prev != nil && prev.Status == status && prev.Reason == reason && prev.Message == msg {
		return nil
	}
	patchHelper, err := patch.NewHelper(claim, c)
	if err != nil {
		return err
	}
	conditions.Set(claim, metav1.Condition{Type: v1alpha1.AddressReservedCondition, Status: status, Reason: reason, Message: msg})
	if err := patchHelper.Patch(ctx, claim, patch.WithOwnedConditions{Conditions: []string{v1alpha1.AddressReservedCondition}}); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("setting %s on claim %s: %w", v1alpha1.AddressReservedCondition, claim.Name, err)
	}
	return nil
}
