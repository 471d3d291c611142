package integration

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/api/v1alpha1"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/pkg/cachetransform"
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

// The manager's cache holds only the Secrets labelled as credentials: RBAC
// cannot grant list and watch by label, so the cache's selector is what
// keeps every other Secret of the cluster out of the manager's memory.
func TestManagerCachesOnlyOptedInSecrets(t *testing.T) {
	f := newFixture(t)
	other := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "not-for-pools"}, Data: map[string][]byte{"k": []byte("v")}}
	require.NoError(t, k8s.Create(f.ctx, other))

	opts := cachetransform.CacheOptions(nil)
	opts.Scheme = testScheme
	c, err := cache.New(restConfig, opts)
	require.NoError(t, err)
	go func() { _ = c.Start(f.ctx) }()
	require.True(t, c.WaitForCacheSync(f.ctx))

	// Metadata only, as the provider watches them.
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("SecretList"))
	require.NoError(t, c.List(f.ctx, list, client.InNamespace(f.ns)))
	var names []string
	for _, s := range list.Items {
		names = append(names, s.Name)
	}
	assert.Equal(t, []string{f.secret}, names, "only the labelled Secret is cached")
}

// A Secret whose label is removed while a pool uses it leaves the cache, but
// not the provider's sight: the pool says it may no longer use it, and the
// Secret's finalizer goes with the last pool that names it.
func TestUnlabelledSecretLosesItsFinalizerWithItsLastPool(t *testing.T) {
	forEachSystem(t, func(t *testing.T, f *fixture) {
		f.seedNetwork("10.71.0.0/24")
		pool := f.createPool("pool", "10.71.0.0/24")
		f.waitPoolReady(pool)
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: f.secret}}
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			require.NoError(c, k8s.Get(f.ctx, client.ObjectKeyFromObject(secret), secret))
			assert.Contains(c, secret.Finalizers, v1alpha1.CredentialsInUseFinalizer)
		}, waitTimeout, pollInterval)

		f.update(secret, func() { delete(secret.Labels, v1alpha1.CredentialsLabel) })
		cond := f.waitPoolReason(pool, metav1.ConditionFalse, v1alpha1.CredentialsNotAllowedReason)
		assert.Contains(t, cond.Message, v1alpha1.CredentialsLabel+"=true")
		require.NoError(t, k8s.Get(f.ctx, client.ObjectKeyFromObject(secret), secret))
		assert.Contains(t, secret.Finalizers, v1alpha1.CredentialsInUseFinalizer, "kept while a pool names it")

		require.NoError(t, k8s.Delete(f.ctx, pool))
		f.waitGone(pool)
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			require.NoError(c, k8s.Get(f.ctx, client.ObjectKeyFromObject(secret), secret))
			assert.NotContains(c, secret.Finalizers, v1alpha1.CredentialsInUseFinalizer)
		}, waitTimeout, pollInterval)
	})
}
