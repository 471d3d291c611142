package claim

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/api/v1alpha1"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/reasons"
)

// kept says whether a claim being deleted keeps its address: its consumer
// still serves it (a live Cluster's control-plane endpoint) and holds the
// claim with v1alpha1.KeepAddressFinalizer. Then nothing is released and
// the IPAddress stays; the finalizer's removal brings the claim back.
func kept(s *scope) bool {
	if !controllerutil.ContainsFinalizer(s.claim, v1alpha1.KeepAddressFinalizer) {
		return false
	}
	s.setReady(metav1.ConditionFalse, reasons.AddressKeptReason, fmt.Sprintf(
		"the claim is being deleted, but finalizer %s keeps its address reserved while its consumer serves it (a Cluster's control-plane endpoint stays until the Cluster is gone or names another address); nothing is released until that finalizer is removed",
		v1alpha1.KeepAddressFinalizer))
	return true
}
