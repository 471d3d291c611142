package reservation

import (
	"testing"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/api/v1alpha1"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/pkg/poolkind"
)

func TestIsPaused(t *testing.T) {
	paused := map[string]string{clusterv1.PausedAnnotation: ""}
	for _, tc := range []struct {
		name    string
		cluster *clusterv1.Cluster
		pool    poolkind.Pool
		want    bool
		why     string
	}{
		{name: "no Cluster, no pool"},
		{name: "a running Cluster and pool", cluster: &clusterv1.Cluster{}, pool: &v1alpha1.NetboxIPPool{}},
		{name: "spec.paused", cluster: &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "c"}, Spec: clusterv1.ClusterSpec{Paused: ptr.To(true)}},
			want: true, why: "Cluster c has spec.paused set"},
		{name: "spec.paused false", cluster: &clusterv1.Cluster{Spec: clusterv1.ClusterSpec{Paused: ptr.To(false)}}},
		{name: "the Cluster's annotation", cluster: &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "c", Annotations: paused}},
			want: true, why: "Cluster c has the " + clusterv1.PausedAnnotation + " annotation"},
		{name: "the pool's annotation", pool: &v1alpha1.InfobloxIPPool{ObjectMeta: metav1.ObjectMeta{Name: "p", Annotations: paused}},
			want: true, why: "pool p has the " + clusterv1.PausedAnnotation + " annotation"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var pool poolkind.Pool
			if tc.pool != nil {
				pool = tc.pool
			}
			got, why := IsPaused(tc.cluster, pool)
			assert.Equal(t, tc.want, got)
			assert.Equal(t, tc.why, why)
		})
	}
}
