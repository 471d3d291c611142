package release

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/api/v1alpha1"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/pkg/poolkind"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/pkg/scheme"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/envtestenv"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/netboxsim"
)

const (
	serviceAccount   = "capi-ipam-bridge-manager"
	leaderElectionID = "capi-ipam-bridge-leader"
	waitTimeout      = 45 * time.Second
	poll             = 100 * time.Millisecond
)

// TestManagerRunsUnderReleasedRBAC runs the manager as the released
// ServiceAccount, with exactly the released ClusterRole, Role and bindings
// (the API server authenticates it by a client certificate naming the
// ServiceAccount), with leader election on, and shows that it binds and
// releases claims of a namespaced and of a Global pool, and that the role
// does not let it write Secrets or touch RBAC.
func TestManagerRunsUnderReleasedRBAC(t *testing.T) {
	cfg, admin := startEnv(t)
	install(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	user, err := env.AddUser(envtest.User{
		Name:   "system:serviceaccount:" + targetNS + ":" + serviceAccount,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + targetNS, "system:authenticated"},
	}, cfg)
	require.NoError(t, err)
	managerConfig := user.Config()
	managerConfig.QPS, managerConfig.Burst = 200, 400

	// Everything the manager logs; an RBAC gap shows up as "forbidden".
	logs := &logBuffer{}
	logger := funcr.New(func(prefix, args string) { logs.add(prefix + " " + args) }, funcr.Options{Verbosity: 1})

	done, err := envtestenv.StartManager(ctx, managerConfig, scheme.New(), controllers.Options{
		Identity:               markerIdentity,
		ManagerNamespace:       targetNS,
		ClaimConcurrency:       4,
		PoolConcurrency:        2,
		SyncPeriod:             time.Minute,
		ExhaustedRetryInterval: time.Minute,
	}, func(o *manager.Options) {
		o.Logger = logger
		o.LeaderElection = true
		o.LeaderElectionID = leaderElectionID
		o.LeaderElectionNamespace = targetNS
		o.LeaseDuration = ptr.To(15 * time.Second)
		o.RenewDeadline = ptr.To(10 * time.Second)
		o.RetryPeriod = ptr.To(time.Second)
	})
	require.NoError(t, err)
	defer func() {
		cancel()
		<-done
	}()

	// Leader election took the Lease in the manager's namespace.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		lease := &coordinationv1.Lease{}
		require.NoError(c, admin.Get(ctx, client.ObjectKey{Namespace: targetNS, Name: leaderElectionID}, lease))
		assert.NotEmpty(c, ptr.Deref(lease.Spec.HolderIdentity, ""))
	}, waitTimeout, poll)

	sim := netboxsim.New()
	defer sim.Close()
	token := "0123456789abcdef0123456789abcdef01234567"
	sim.AddToken(token, true)
	sim.AddPrefixWithGateway("10.77.0.0/24", netboxsim.PrefixOptions{})
	sim.AddPrefixWithGateway("10.78.0.0/24", netboxsim.PrefixOptions{})

	ns := "rbac-test"
	require.NoError(t, admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	for _, secretNS := range []string{ns, targetNS} {
		require.NoError(t, admin.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: secretNS, Name: "netbox",
				Labels: map[string]string{v1alpha1.CredentialsLabel: "true"}},
			Data: map[string][]byte{v1alpha1.NetboxTokenKey: []byte(token)},
		}))
	}
	spec := func(cidr string) v1alpha1.NetboxIPPoolSpec {
		return v1alpha1.NetboxIPPoolSpec{
			Connection: v1alpha1.NetboxConnection{URL: sim.URL(), CredentialsSecretRef: v1alpha1.SecretReference{Name: "netbox"}},
			Sources:    []v1alpha1.NetboxAddressSource{{Prefix: &v1alpha1.NetboxPrefixSource{CIDR: cidr}}},
		}
	}
	pool := &v1alpha1.NetboxIPPool{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pool"}, Spec: spec("10.77.0.0/24")}
	global := &v1alpha1.GlobalNetboxIPPool{ObjectMeta: metav1.ObjectMeta{Name: "rbac-global"}, Spec: spec("10.78.0.0/24")}
	require.NoError(t, admin.Create(ctx, pool))
	require.NoError(t, admin.Create(ctx, global))

	for _, p := range []client.Object{pool, global} {
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			got := p.DeepCopyObject().(poolkind.Pool)
			require.NoError(c, admin.Get(ctx, client.ObjectKeyFromObject(p), got))
			cond := conditions.Get(got, v1alpha1.ReadyCondition)
			require.NotNil(c, cond, "%s has no Ready condition", p.GetName())
			assert.Equal(c, metav1.ConditionTrue, cond.Status, "%s: %s %s", p.GetName(), cond.Reason, cond.Message)
		}, waitTimeout, poll)
	}
	// The admission policy lets the manager add its finalizer to the Secrets
	// in use, and nothing else (checked below).
	for _, secretNS := range []string{ns, targetNS} {
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			s := &corev1.Secret{}
			require.NoError(c, admin.Get(ctx, client.ObjectKey{Namespace: secretNS, Name: "netbox"}, s))
			assert.Contains(c, s.Finalizers, v1alpha1.CredentialsInUseFinalizer)
		}, waitTimeout, poll)
	}

	claims := []*ipamv1.IPAddressClaim{
		{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "from-pool"},
			Spec: ipamv1.IPAddressClaimSpec{PoolRef: ipamv1.IPPoolReference{APIGroup: v1alpha1.GroupVersion.Group, Kind: "NetboxIPPool", Name: pool.Name}}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "from-global"},
			Spec: ipamv1.IPAddressClaimSpec{PoolRef: ipamv1.IPPoolReference{APIGroup: v1alpha1.GroupVersion.Group, Kind: "GlobalNetboxIPPool", Name: global.Name}}},
	}
	for _, claim := range claims {
		require.NoError(t, admin.Create(ctx, claim))
	}
	for _, claim := range claims {
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			got := &ipamv1.IPAddressClaim{}
			require.NoError(c, admin.Get(ctx, client.ObjectKeyFromObject(claim), got))
			cond := conditions.Get(got, ipamv1.IPAddressClaimReadyCondition)
			require.NotNil(c, cond, "claim %s has no Ready condition", claim.Name)
			assert.Equal(c, metav1.ConditionTrue, cond.Status, "claim %s: %s %s", claim.Name, cond.Reason, cond.Message)
			assert.Equal(c, claim.Name, got.Status.AddressRef.Name)
			address := &ipamv1.IPAddress{}
			require.NoError(c, admin.Get(ctx, client.ObjectKeyFromObject(claim), address))
		}, waitTimeout, poll)
	}
	assert.Len(t, markedRecords(sim), 2, "NetBox holds one reservation per claim")

	// Release: the manager deletes the IPAddresses and NetBox's records.
	for _, claim := range claims {
		require.NoError(t, admin.Delete(ctx, claim))
	}
	for _, claim := range claims {
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			err := admin.Get(ctx, client.ObjectKeyFromObject(claim), &ipamv1.IPAddressClaim{})
			assert.True(c, apierrors.IsNotFound(err), "claim %s still exists (%v)", claim.Name, err)
			err = admin.Get(ctx, client.ObjectKeyFromObject(claim), &ipamv1.IPAddress{})
			assert.True(c, apierrors.IsNotFound(err), "IPAddress %s still exists (%v)", claim.Name, err)
		}, waitTimeout, poll)
	}
	assert.Empty(t, markedRecords(sim), "NetBox still holds reservations")

	// The pools go too: their finalizer comes off under the same role.
	require.NoError(t, admin.Delete(ctx, pool))
	require.NoError(t, admin.Delete(ctx, global))
	for _, p := range []client.Object{pool, global} {
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			err := admin.Get(ctx, client.ObjectKeyFromObject(p), p.DeepCopyObject().(client.Object))
			assert.True(c, apierrors.IsNotFound(err), "pool %s still exists (%v)", p.GetName(), err)
		}, waitTimeout, poll)
	}

	// What the role must not allow.
	asManager, err := client.New(managerConfig, client.Options{Scheme: scheme.New()})
	require.NoError(t, err)
	forbidden := func(what string, err error) {
		t.Helper()
		assert.True(t, apierrors.IsForbidden(err), "the manager's role allows %s (err %v)", what, err)
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "stolen"}, StringData: map[string]string{"k": "v"}}
	forbidden("creating Secrets", asManager.Create(ctx, secret))
	existing := &corev1.Secret{}
	require.NoError(t, asManager.Get(ctx, client.ObjectKey{Namespace: ns, Name: "netbox"}, existing), "the role must let the manager read Secrets")
	existing.Data["token"] = []byte("changed")
	forbidden("updating Secrets", asManager.Update(ctx, existing))
	require.NoError(t, asManager.Get(ctx, client.ObjectKey{Namespace: ns, Name: "netbox"}, existing))
	relabelled := existing.DeepCopy()
	relabelled.Labels["stolen"] = "yes"
	forbidden("patching a Secret's labels", asManager.Patch(ctx, relabelled, client.MergeFrom(existing)))
	withData := existing.DeepCopy()
	withData.Data["token"] = []byte("changed")
	forbidden("patching a Secret's data", asManager.Patch(ctx, withData, client.MergeFrom(existing)))
	forbidden("deleting Secrets", asManager.Delete(ctx, existing))
	// The manager makes namespaced pools for ClusterSubnets, beside their
	// parent and with its connection; never a cluster-scoped one, which
	// every namespace's claims could use.
	forbidden("creating cluster-scoped pools", asManager.Create(ctx, &v1alpha1.GlobalNetboxIPPool{ObjectMeta: metav1.ObjectMeta{Name: "x"}, Spec: spec("10.79.0.0/24")}))
	forbidden("creating ClusterRoleBindings", asManager.Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "escalate"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: targetNS, Name: serviceAccount}},
	}))
	forbidden("creating Leases outside its namespace", asManager.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "x"}}))
	forbidden("creating Namespaces", asManager.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "x"}}))

	// The Machine-name chain reads the consumers' objects: get, nothing
	// more. The objects a MAC is read from (BareMetalHosts, VSphereVMs)
	// are also listed and watched, by a metadata-only informer that wakes
	// the claims waiting for a MAC; never written.
	reviewer, err := client.New(cfg, client.Options{})
	require.NoError(t, err)
	readOnly := map[string]bool{"get": true, "list": false, "watch": false, "update": false, "patch": false, "delete": false}
	watched := map[string]bool{"get": true, "list": true, "watch": true, "update": false, "patch": false, "delete": false}
	for _, r := range []struct {
		group, resource string
		verbs           map[string]bool
	}{
		{"infrastructure.cluster.x-k8s.io", "metal3datas", readOnly},
		{"infrastructure.cluster.x-k8s.io", "metal3dataclaims", readOnly},
		{"infrastructure.cluster.x-k8s.io", "metal3machines", readOnly},
		{"infrastructure.cluster.x-k8s.io", "vspheremachines", readOnly},
		{"infrastructure.cluster.x-k8s.io", "vspherevms", watched},
		{"metal3.io", "baremetalhosts", watched},
	} {
		for verb, want := range r.verbs {
			review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
				User: "system:serviceaccount:" + targetNS + ":" + serviceAccount, Groups: []string{"system:serviceaccounts", "system:authenticated"},
				ResourceAttributes: &authorizationv1.ResourceAttributes{
					Namespace: ns, Verb: verb, Group: r.group, Resource: r.resource,
				},
			}}
			require.NoError(t, reviewer.Create(ctx, review))
			assert.Equal(t, want, review.Status.Allowed, "%s %s.%s", verb, r.resource, r.group)
		}
	}

	for _, line := range logs.lines() {
		assert.NotContains(t, strings.ToLower(line), "forbidden", "the manager hit an RBAC denial")
	}
}

// markedRecords are NetBox's IP addresses that carry a claim marker of this
// test's identity.
func markedRecords(sim *netboxsim.Server) []netboxsim.IPAddress {
	var out []netboxsim.IPAddress
	for _, ip := range sim.IPAddresses() {
		if m, _ := ip.CustomFields["capi_ipam_claim"].(string); strings.HasPrefix(m, markerIdentity+"/") {
			out = append(out, ip)
		}
	}
	return out
}

type logBuffer struct {
	mu  sync.Mutex
	buf []string
}

func (b *logBuffer) add(s string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, s)
}

func (b *logBuffer) lines() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.buf...)
}
