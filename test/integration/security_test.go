package integration

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/api/v1alpha1"
)

// A pool may use only a Secret whose owner allowed it with the credentials
// label: otherwise anyone who may create a pool could point it at their own
// server with any Secret of the namespace and receive the credentials.
func TestPoolUsesOnlyASecretThatOptedIn(t *testing.T) {
	forEachSystem(t, func(t *testing.T, f *fixture) {
		f.seedNetwork("10.70.0.0/24")
		unlabelled := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "not-for-pools"}, Data: f.sys.secretData()}
		require.NoError(t, k8s.Create(f.ctx, unlabelled))
		f.sys.resetCalls()

		pool := f.sys.newPool(f.ns, "pool", "10.70.0.0/24", unlabelled.Name, false)
		pool.SetLabels(f.labels())
		require.NoError(t, k8s.Create(f.ctx, pool))
		cond := f.waitPoolReason(pool, metav1.ConditionFalse, v1alpha1.CredentialsNotAllowedReason)
		assert.Contains(t, cond.Message, v1alpha1.CredentialsLabel+"=true")
		f.waitEvent(f.ns, pool.GetName(), v1alpha1.CredentialsNotAllowedReason)
		assert.Zero(t, f.sys.callCount(), "the credentials were sent nowhere")

		f.update(unlabelled, func() { unlabelled.Labels = map[string]string{v1alpha1.CredentialsLabel: "true"} })
		f.waitPoolReady(pool)
		f.waitBound(f.createClaim("machine", "pool"))
	})
}

// A pool that reaches its IPAM system over plain http says so.
func TestPlainHTTPConnectionIsWarnedAbout(t *testing.T) {
	f := newFixture(t)
	f.seedNetwork("10.71.0.0/24")
	pool := f.createPool("pool", "10.71.0.0/24")
	f.waitPoolReady(pool)
	cond := f.waitPoolCondition(pool, v1alpha1.ConnectionSecureCondition, metav1.ConditionFalse, v1alpha1.InsecureConnectionReason)
	assert.Contains(t, cond.Message, "plain http")
	f.waitEvent(f.ns, pool.GetName(), v1alpha1.InsecureConnectionReason)
}
