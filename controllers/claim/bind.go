package claim

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/metrics"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/poolstate"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/reasons"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/reservation"
)

// bind writes the IPAddress of the address the backend reserved for the
// claim, unless another live IPAddress holds it, and reports a failed
// reservation.
func (r *ClaimReconciler) bind(ctx context.Context, s *scope, answer allocationAnswer, err error) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	backend, alloc := answer.backend, answer.alloc
	if err != nil {
		switch {
		case poolstate.IsRefusal(err):
			r.Alarms.Refused(s.kind, s.pool, backend, s.claim, err)
		case errors.Is(err, backends.ErrUnusableAnswer):
			r.Recorder.Eventf(s.pool, s.claim, corev1.EventTypeWarning, reasons.UnusableAddressAnsweredReason, "Allocate",
				"Claim %s/%s: %v", s.claim.Namespace, s.claim.Name, err)
			r.Alarms.Revalidate(s.kind, s.pool)
		}
		return r.allocationFailed(s, err)
	}

	holder, err := r.heldInCluster(ctx, s.claim, alloc)
	if err != nil {
		// Its retry would reserve again first: the wait spaces that too.
		r.holdBack(s.claim)
		return ctrl.Result{}, err
	}
	if holder != nil {
		return r.handOver(ctx, s, backend, alloc, holder)
	}

	address, err := r.newIPAddress(s, alloc)
	if err != nil {
		return ctrl.Result{}, err
	}
	reservation.Record(address, alloc, r.backendClaim(s.claim).Marker)
	if err := r.Client.Create(ctx, address); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return r.lostToAnotherWriter(ctx, s.claim, backend, alloc)
		}
		s.setReady(metav1.ConditionFalse, ipamv1.IPAddressClaimReadyAllocationFailedReason,
			fmt.Sprintf("creating IPAddress for %s: %v", alloc.Address, err))
		r.holdBack(s.claim)
		return ctrl.Result{}, fmt.Errorf("creating IPAddress: %w", err)
	}
	r.written.Set(s.claim.UID, false, writtenMemory)
	describeRecordMAC(s, alloc.MAC)
	log.Info("Allocated address", "address", alloc.Address.String(), "reference", alloc.Reference)
	metrics.ClaimBindSeconds.WithLabelValues(s.kind.Kind).Observe(time.Since(s.claim.CreationTimestamp.Time).Seconds())
	r.Recorder.Eventf(s.claim, s.pool, corev1.EventTypeNormal, reasons.AddressAllocatedReason, "Allocate",
		"Allocated %s from %s %s (%s)", alloc.Address, s.kind.Kind, s.pool.GetName(), alloc.Reference)

	forgetReservation(s.claim)
	s.bound(address)
	return ctrl.Result{}, nil
}
