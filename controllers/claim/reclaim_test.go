package claim

import (
	"testing"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/api/v1alpha1"
)

func TestRetainsReadsTheReclaimPolicy(t *testing.T) {
	for _, tc := range []struct {
		name        string
		annotations map[string]string
		retain      bool
		wantErr     bool
	}{
		{name: "no annotation releases"},
		{name: "Delete releases", annotations: map[string]string{v1alpha1.ReclaimPolicyAnnotation: "Delete"}},
		{name: "Retain keeps", annotations: map[string]string{v1alpha1.ReclaimPolicyAnnotation: "Retain"}, retain: true},
		{name: "a policy in the wrong case is not guessed", annotations: map[string]string{v1alpha1.ReclaimPolicyAnnotation: "retain"}, wantErr: true},
		{name: "an empty policy is not guessed", annotations: map[string]string{v1alpha1.ReclaimPolicyAnnotation: ""}, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			retain, err := retains(&ipamv1.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Annotations: tc.annotations}})
			assert.Equal(t, tc.retain, retain)
			if tc.wantErr {
				assert.ErrorContains(t, err, v1alpha1.ReclaimPolicyAnnotation)
			} else {
				assert.NoError(t, err)
			}
		})
	}
}
