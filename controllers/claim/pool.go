package claim

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/api/v1alpha1"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/reservation"
)

// poolFound lets the claim go on only when the pool it names exists; the
// pool's creation brings it back.
func (r *ClaimReconciler) poolFound(_ context.Context, s *scope) (step, error) {
	if s.pool != nil {
		return next, nil
	}
	s.setReady(metav1.ConditionFalse, ipamv1.IPAddressClaimReadyPoolNotReadyReason,
		fmt.Sprintf("%s %s not found", s.kind.Kind, s.claim.Spec.PoolRef.Name))
	return stop(r.wait(s.claim)), nil
}

// poolReady lets a new claim go on only from a ready pool that is not
// being deleted. A claim that lost its IPAddress rebuilds it from its
// marker, which needs the connection but not the pool's counts or
// readiness.
func (r *ClaimReconciler) poolReady(_ context.Context, s *scope) (step, error) {
	if s.rebuilding() {
		return next, nil
	}
	if !s.pool.GetDeletionTimestamp().IsZero() {
		return stop(r.poolBeingDeleted(s)), nil
	}
	if conditions.IsTrue(s.pool, v1alpha1.ReadyCondition) {
		return next, nil
	}
	msg := fmt.Sprintf("%s %s is not ready", s.kind.Kind, s.pool.GetName())
	if m := conditions.GetMessage(s.pool, v1alpha1.ReadyCondition); m != "" {
		msg += ": " + m
	}
	s.setReady(metav1.ConditionFalse, ipamv1.IPAddressClaimReadyPoolNotReadyReason, msg)
	return stop(r.wait(s.claim)), nil
}

// poolBeingDeleted leaves a claim of a pool being deleted waiting. A claim
// with the release finalizer may hold a reservation in the pool (a record
// made before a manager died, say), so the pool waits in turn until the
// claim is deleted and its release, which goes through the pool, is done.
func (r *ClaimReconciler) poolBeingDeleted(s *scope) ctrl.Result {
	msg := fmt.Sprintf("%s %s is being deleted and gives no address out", s.kind.Kind, s.pool.GetName())
	if controllerutil.ContainsFinalizer(s.claim, reservation.ClaimFinalizer) {
		msg += "; its deletion waits for this claim to be deleted"
	}
	s.setReady(metav1.ConditionFalse, ipamv1.IPAddressClaimReadyPoolNotReadyReason, msg)
	return r.wait(s.claim)
}
