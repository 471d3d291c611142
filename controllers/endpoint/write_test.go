package endpoint

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/internal/apitest"
)

// A user who writes the endpoint while the provider writes the claimed
// address wins: the provider's write carries the resourceVersion it read,
// the API server refuses it, and the user's value stays.
func TestWriteNeverOverwritesAnEndpointWrittenMeanwhile(t *testing.T) {
	_, c := apitest.Server(t)
	ctx := context.Background()
	ns := apitest.Namespace(t, c)
	cluster := &clusterv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "prod"},
		Spec:       clusterv1.ClusterSpec{ClusterNetwork: clusterv1.ClusterNetwork{ServiceDomain: "cluster.local"}},
	}
	require.NoError(t, c.Create(ctx, cluster))
	read := cluster.DeepCopy()

	// The user, between the provider's read and its write.
	user := cluster.DeepCopy()
	user.Spec.ControlPlaneEndpoint = clusterv1.APIEndpoint{Host: "10.0.0.9", Port: 6443}
	require.NoError(t, c.Update(ctx, user))

	recorder := events.NewFakeRecorder(10)
	r := &Reconciler{Client: c, APIReader: c, Recorder: recorder}
	err := r.write(ctx, read, optIn{port: 6443}, "10.0.0.2")
	require.Error(t, err)
	assert.True(t, apierrors.IsConflict(err), "the API server refuses the stale write: %v", err)
	assert.Empty(t, recorder.Events, "no ControlPlaneEndpointSet for a write that did not happen")

	got := &clusterv1.Cluster{}
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(cluster), got))
	assert.Equal(t, clusterv1.APIEndpoint{Host: "10.0.0.9", Port: 6443}, got.Spec.ControlPlaneEndpoint, "the user's endpoint stays")

	// The next reconcile reads the user's value and never writes over it.
	current, set, err := currentValue(got, optIn{port: 6443})
	require.NoError(t, err)
	assert.True(t, set)
	assert.Equal(t, "10.0.0.9", current)
}
