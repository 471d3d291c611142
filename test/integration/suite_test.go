// Package integration runs the provider's reconcilers against a real
// kube-apiserver and etcd (envtest) and the in-process NetBox simulator.
package integration

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/api/v1alpha1"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/pkg/poolkind"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/pkg/scheme"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/envtestenv"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/netboxsim"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/netboxtarget"
)

const (
	// suiteFilter is the watch-filter label value of the shared manager.
	// Tests that need a manager of their own use another value, so that the
	// two never reconcile the same objects.
	suiteFilter      = "suite"
	managerNamespace = "ipam-bridge-system"
	waitTimeout      = 45 * time.Second
	pollInterval     = 100 * time.Millisecond
)

var (
	restConfig *rest.Config
	k8s        client.Client
	testScheme *runtime.Scheme
	// clusterIdentity is the envtest cluster's kube-system UID: the identity
	// in the markers of every manager started without one.
	clusterIdentity string
	// managerLogs holds everything the shared manager logged.
	managerLogs = &envtestenv.LogBuffer{}
)

func TestMain(m *testing.M) {
	os.Exit(runSuite(m))
}

func runSuite(m *testing.M) int {
	// Stand-ins for the Metal3 and CAPV kinds between a claim and its
	// machine's MAC (see macaddress_test.go).
	env, cfg, err := envtestenv.Start(filepath.Join("testdata", "crds"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = env.Stop() }()
	restConfig = cfg
	testScheme = scheme.New()
	if k8s, err = client.New(cfg, client.Options{Scheme: testScheme}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	kubeSystem := &corev1.Namespace{}
	if err := k8s.Get(ctx, client.ObjectKey{Name: "kube-system"}, kubeSystem); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	clusterIdentity = string(kubeSystem.UID)
	if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: managerNamespace}}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctrl.SetLogger(funcr.New(func(prefix, args string) {
		managerLogs.WriteString(prefix + " " + args + "\n")
	}, funcr.Options{Verbosity: 4}))

	done, err := startManager(ctx, suiteFilter, "", nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	code := m.Run()
	cancel()
	<-done
	if buildDir != "" {
		_ = os.RemoveAll(buildDir)
	}
	if code != 0 && os.Getenv("SHOW_MANAGER_LOGS") != "" {
		fmt.Fprintln(os.Stderr, managerLogs.String())
	}
	return code
}

// startManager runs a manager with the provider's reconcilers for objects
// labelled with filter. wrap, when set, wraps the manager's client.
func startManager(ctx context.Context, filter, identity string, wrap func(client.WithWatch) client.Client) (<-chan struct{}, error) {
	return startManagerWith(ctx, restConfig, filter, identity, wrap)
}

// startManagerWith is startManager talking to the API server with cfg.
func startManagerWith(ctx context.Context, cfg *rest.Config, filter, identity string, wrap func(client.WithWatch) client.Client) (<-chan struct{}, error) {
	return startTunedManager(ctx, cfg, filter, identity, wrap, nil)
}

// startTunedManager is startManagerWith with tune, when set, changing the
// suite's options first.
func startTunedManager(ctx context.Context, cfg *rest.Config, filter, identity string, wrap func(client.WithWatch) client.Client,
	tune func(*controllers.Options)) (<-chan struct{}, error) {
	opts := controllers.Options{
		Identity:         identity,
		ManagerNamespace: managerNamespace,
		WatchFilterValue: filter,
		ClaimConcurrency: 8,
		PoolConcurrency:  2,
		SyncPeriod:       time.Minute,
		// Long, so that tests prove a release wakes waiting claims.
		ExhaustedRetryInterval: 10 * time.Minute,
		PoolRefreshInterval:    2 * time.Second,
	}
	if tune != nil {
		tune(&opts)
	}
	return envtestenv.StartManager(ctx, cfg, testScheme, opts, func(o *manager.Options) {
		o.Logger = ctrl.Log.WithName(filter)
		if wrap != nil {
			o.NewClient = func(cfg *rest.Config, opts client.Options) (client.Client, error) {
				c, err := client.NewWithWatch(cfg, opts)
				if err != nil {
					return nil, err
				}
				return wrap(c), nil
			}
		}
	})
}

// fixture is one test's namespace, IPAM system and credentials. sim and
// token are set for NetBox only, for the tests that are NetBox's own.
type fixture struct {
	t      *testing.T
	ctx    context.Context
	ns     string
	filter string
	sys    system
	// secret names the Secret with the system's credentials, in ns.
	secret string
	sim    netboxtarget.Target
	token  string
}

// newFixture sets a test up against NetBox.
func newFixture(t *testing.T) *fixture {
	t.Helper()
	sim, token := netboxtarget.New(t), randomHex(20)
	sim.AddToken(token, true)
	f := startFixture(t, &netboxSystem{target: sim, token: token}, "netbox")
	f.sim, f.token = sim, token
	return f
}

// newInfobloxFixture sets a test up against the Infoblox WAPI simulator.
func newInfobloxFixture(t *testing.T) *fixture {
	t.Helper()
	return startFixture(t, newInfobloxSystem(t), "infoblox")
}

func startFixture(t *testing.T, sys system, secret string) *fixture {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	f := &fixture{t: t, ctx: ctx, ns: "t-" + randomHex(4), filter: suiteFilter, sys: sys, secret: secret}
	require.NoError(t, k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: f.ns}}))
	f.createSystemSecret(f.ns, secret)
	// Runs before the context is cancelled and the IPAM system closed.
	t.Cleanup(f.pausePools)
	return f
}

// pausePools pauses the pools a finished test leaves behind: their IPAM
// system is closed, and the suite's manager would otherwise keep validating
// them and retrying their claims until the suite ends, taking worker time
// from the tests that still run.
func (f *fixture) pausePools() {
	ctx := context.Background()
	for _, list := range []client.ObjectList{&v1alpha1.NetboxIPPoolList{}, &v1alpha1.InfobloxIPPoolList{},
		&v1alpha1.GlobalNetboxIPPoolList{}, &v1alpha1.GlobalInfobloxIPPoolList{}} {
		if err := k8s.List(ctx, list); err != nil {
			f.t.Logf("listing pools to pause: %v", err)
			continue
		}
		_ = meta.EachListItem(list, func(o runtime.Object) error {
			pool := o.(client.Object)
			if pool.GetNamespace() != f.ns && !strings.Contains(pool.GetName(), f.ns) {
				return nil
			}
			base := pool.DeepCopyObject().(client.Object)
			a := pool.GetAnnotations()
			if a == nil {
				a = map[string]string{}
			}
			a[clusterv1.PausedAnnotation] = "true"
			pool.SetAnnotations(a)
			if err := k8s.Patch(ctx, pool, client.MergeFrom(base)); client.IgnoreNotFound(err) != nil {
				f.t.Logf("pausing pool %s: %v", pool.GetName(), err)
			}
			return nil
		})
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func (f *fixture) labels() map[string]string {
	return map[string]string{clusterv1.WatchLabel: f.filter}
}

// createSecret creates a NetBox token Secret.
func (f *fixture) createSecret(namespace, name, token string) {
	f.t.Helper()
	f.createSecretData(namespace, name, map[string][]byte{v1alpha1.NetboxTokenKey: []byte(token)})
}

// createSystemSecret creates a Secret with credentials the system accepts.
func (f *fixture) createSystemSecret(namespace, name string) {
	f.t.Helper()
	f.createSecretData(namespace, name, f.sys.secretData())
}

func (f *fixture) createSecretData(namespace, name string, data map[string][]byte) {
	f.t.Helper()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name,
		Labels: map[string]string{v1alpha1.CredentialsLabel: "true"}}, Data: data}
	require.NoError(f.t, k8s.Create(f.ctx, s))
	f.t.Cleanup(func() { _ = k8s.Delete(context.Background(), s) })
}

// seedPrefix adds a NetBox prefix with its gateway recorded.
func (f *fixture) seedPrefix(cidr string, o netboxsim.PrefixOptions) int32 {
	return f.sim.AddPrefixWithGateway(cidr, o)
}

// seedNetwork adds a network (NetBox: a prefix) with its gateway recorded.
func (f *fixture) seedNetwork(cidr string) { f.sys.seedNetwork(cidr) }

type poolOption func(*v1alpha1.NetboxIPPoolSpec)

func prefixSource(cidr string) v1alpha1.NetboxAddressSource {
	return v1alpha1.NetboxAddressSource{Prefix: &v1alpha1.NetboxPrefixSource{CIDR: cidr}}
}

func withSources(s ...v1alpha1.NetboxAddressSource) poolOption {
	return func(spec *v1alpha1.NetboxIPPoolSpec) { spec.Sources = s }
}

func (f *fixture) poolSpec(cidr string, opts ...poolOption) v1alpha1.NetboxIPPoolSpec {
	spec := v1alpha1.NetboxIPPoolSpec{
		Connection: v1alpha1.NetboxConnection{URL: f.sim.URL(), CredentialsSecretRef: v1alpha1.SecretReference{Name: "netbox"}},
		Sources:    []v1alpha1.NetboxAddressSource{prefixSource(cidr)},
	}
	for _, o := range opts {
		o(&spec)
	}
	return spec
}

// createPool creates a namespaced pool of the fixture's system; options
// apply to NetBox pools only.
func (f *fixture) createPool(name, cidr string, opts ...poolOption) poolkind.Pool {
	f.t.Helper()
	var pool poolkind.Pool
	if f.sim != nil {
		pool = &v1alpha1.NetboxIPPool{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: name}, Spec: f.poolSpec(cidr, opts...)}
	} else {
		require.Empty(f.t, opts, "pool options are for NetBox pools")
		pool = f.sys.newPool(f.ns, name, cidr, f.secret, false)
	}
	pool.SetLabels(f.labels())
	require.NoError(f.t, k8s.Create(f.ctx, pool))
	return pool
}

// createNetboxPool creates a NetboxIPPool.
func (f *fixture) createNetboxPool(name, cidr string, opts ...poolOption) *v1alpha1.NetboxIPPool {
	f.t.Helper()
	require.NotNil(f.t, f.sim, "a NetBox test")
	return f.createPool(name, cidr, opts...).(*v1alpha1.NetboxIPPool)
}

func (f *fixture) waitPoolReason(pool poolkind.Pool, status metav1.ConditionStatus, reason string) *metav1.Condition {
	f.t.Helper()
	return f.waitPoolCondition(pool, v1alpha1.ReadyCondition, status, reason)
}

func (f *fixture) waitPoolCondition(pool poolkind.Pool, conditionType string, status metav1.ConditionStatus, reason string) *metav1.Condition {
	f.t.Helper()
	var cond *metav1.Condition
	require.EventuallyWithT(f.t, func(c *assert.CollectT) {
		got := pool.DeepCopyObject().(poolkind.Pool)
		require.NoError(c, k8s.Get(f.ctx, client.ObjectKeyFromObject(pool), got))
		cond = conditions.Get(got, conditionType)
		require.NotNil(c, cond, "pool has no %s condition", conditionType)
		assert.Equal(c, status, cond.Status, cond.Message)
		assert.Equal(c, reason, cond.Reason, cond.Message)
	}, waitTimeout, pollInterval)
	return cond
}

func (f *fixture) waitPoolReady(pool poolkind.Pool) {
	f.t.Helper()
	f.waitPoolReason(pool, metav1.ConditionTrue, v1alpha1.ReadyReason)
}

type claimOption func(*ipamv1.IPAddressClaim)

func inCluster(name string) claimOption {
	return func(c *ipamv1.IPAddressClaim) { c.Spec.ClusterName = name }
}

func poolRef(kind, name string) claimOption {
	return func(c *ipamv1.IPAddressClaim) {
		c.Spec.PoolRef = ipamv1.IPPoolReference{APIGroup: v1alpha1.GroupVersion.Group, Kind: kind, Name: name}
	}
}

func (f *fixture) newClaim(name, pool string, opts ...claimOption) *ipamv1.IPAddressClaim {
	claim := &ipamv1.IPAddressClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: name, Labels: f.labels()},
		Spec: ipamv1.IPAddressClaimSpec{
			PoolRef: ipamv1.IPPoolReference{APIGroup: v1alpha1.GroupVersion.Group, Kind: f.sys.poolKind(false), Name: pool},
		},
	}
	for _, o := range opts {
		o(claim)
	}
	return claim
}

func (f *fixture) createClaim(name, pool string, opts ...claimOption) *ipamv1.IPAddressClaim {
	f.t.Helper()
	claim := f.newClaim(name, pool, opts...)
	require.NoError(f.t, k8s.Create(f.ctx, claim))
	return claim
}

// createClaimsAtOnce creates n claims on pool, machine-00 onwards, all at
// once, as a scale-out does.
func (f *fixture) createClaimsAtOnce(n int, pool string, opts ...claimOption) []*ipamv1.IPAddressClaim {
	f.t.Helper()
	claims := make([]*ipamv1.IPAddressClaim, n)
	var wg sync.WaitGroup
	for i := range n {
		claims[i] = f.newClaim(fmt.Sprintf("machine-%02d", i), pool, opts...)
		wg.Go(func() { assert.NoError(f.t, k8s.Create(f.ctx, claims[i])) })
	}
	wg.Wait()
	return claims
}

func (f *fixture) createCluster(name string, mutate ...func(*clusterv1.Cluster)) *clusterv1.Cluster {
	f.t.Helper()
	cluster := &clusterv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: name},
		Spec:       clusterv1.ClusterSpec{ClusterNetwork: clusterv1.ClusterNetwork{ServiceDomain: "cluster.local"}},
	}
	for _, m := range mutate {
		m(cluster)
	}
	require.NoError(f.t, k8s.Create(f.ctx, cluster))
	return cluster
}

// assertAdmitted creates pool, paused so that only the API server's
// validation is under test: it is accepted when message is empty, and
// otherwise refused with an error that contains message.
func (f *fixture) assertAdmitted(t *testing.T, pool client.Object, message string) {
	t.Helper()
	switch pool.(type) {
	case *v1alpha1.NetboxIPPool, *v1alpha1.InfobloxIPPool:
		pool.SetNamespace(f.ns)
	}
	pool.SetAnnotations(map[string]string{"cluster.x-k8s.io/paused": "true"})
	err := k8s.Create(f.ctx, pool)
	if message == "" {
		require.NoError(t, err)
		t.Cleanup(func() { _ = k8s.Delete(context.Background(), pool) })
		return
	}
	require.Error(t, err)
	assert.Contains(t, err.Error(), message)
}

// waitBound waits for the claim's IPAddress and addressRef.
func (f *fixture) waitBound(claim *ipamv1.IPAddressClaim) *ipamv1.IPAddress {
	f.t.Helper()
	return f.waitBoundWithin(claim, waitTimeout)
}

// waitBoundWithin is waitBound with a timeout of the test's own: a burst
// against a system that takes one request a second binds at that pace.
func (f *fixture) waitBoundWithin(claim *ipamv1.IPAddressClaim, timeout time.Duration) *ipamv1.IPAddress {
	f.t.Helper()
	address := &ipamv1.IPAddress{}
	require.EventuallyWithT(f.t, func(c *assert.CollectT) {
		got := &ipamv1.IPAddressClaim{}
		require.NoError(c, k8s.Get(f.ctx, client.ObjectKeyFromObject(claim), got))
		require.Equal(c, claim.Name, got.Status.AddressRef.Name, "addressRef not set; Ready: %+v", conditions.Get(got, ipamv1.IPAddressClaimReadyCondition))
		require.NoError(c, k8s.Get(f.ctx, client.ObjectKeyFromObject(claim), address))
		assert.True(c, conditions.IsTrue(got, ipamv1.IPAddressClaimReadyCondition))
	}, timeout, pollInterval)
	return address
}

// waitClaimReason waits for the claim's Ready condition to have reason.
func (f *fixture) waitClaimReason(claim *ipamv1.IPAddressClaim, reason string) *metav1.Condition {
	f.t.Helper()
	var cond *metav1.Condition
	require.EventuallyWithT(f.t, func(c *assert.CollectT) {
		got := &ipamv1.IPAddressClaim{}
		require.NoError(c, k8s.Get(f.ctx, client.ObjectKeyFromObject(claim), got))
		cond = conditions.Get(got, ipamv1.IPAddressClaimReadyCondition)
		require.NotNil(c, cond)
		assert.Equal(c, reason, cond.Reason, cond.Message)
	}, waitTimeout, pollInterval)
	return cond
}

// waitGone waits until obj no longer exists.
func (f *fixture) waitGone(obj client.Object) {
	f.t.Helper()
	require.EventuallyWithT(f.t, func(c *assert.CollectT) {
		err := k8s.Get(f.ctx, client.ObjectKeyFromObject(obj), obj.DeepCopyObject().(client.Object))
		assert.True(c, apierrors.IsNotFound(err), "%T %s still exists (err %v)", obj, obj.GetName(), err)
	}, waitTimeout, pollInterval)
}

// markedRecords returns the reservations whose marker names a claim of
// this test's namespace (a real NetBox is shared by every test of a run).
func (f *fixture) markedRecords() []record {
	var out []record
	for _, r := range f.sys.records() {
		if strings.Contains("/"+r.Marker, "/"+f.ns+"/") {
			out = append(out, r)
		}
	}
	return out
}

// marker is the marker of a claim of the fixture's namespace, as a manager
// without an explicit identity writes it.
func (f *fixture) marker(name string) string { return clusterIdentity + "/" + f.ns + "/" + name }

func (f *fixture) recordsWithMarker(marker string) []record {
	var out []record
	for _, r := range f.markedRecords() {
		if r.Marker == marker {
			out = append(out, r)
		}
	}
	return out
}

// netboxRecords returns the NetBox IP addresses marked for this namespace.
func (f *fixture) netboxRecords() []netboxsim.IPAddress {
	var out []netboxsim.IPAddress
	for _, ip := range f.sim.IPAddresses() {
		if m, _ := ip.CustomFields["capi_ipam_claim"].(string); strings.Contains("/"+m, "/"+f.ns+"/") {
			out = append(out, ip)
		}
	}
	return out
}

// events returns the events about an object.
func (f *fixture) events(namespace, name string) []eventsv1.Event {
	f.t.Helper()
	list := &eventsv1.EventList{}
	require.NoError(f.t, k8s.List(f.ctx, list, client.InNamespace(namespace)))
	var out []eventsv1.Event
	for _, e := range list.Items {
		if e.Regarding.Name == name {
			out = append(out, e)
		}
	}
	return out
}

func (f *fixture) waitEvent(namespace, name, reason string) eventsv1.Event {
	f.t.Helper()
	var found eventsv1.Event
	require.EventuallyWithT(f.t, func(c *assert.CollectT) {
		list := &eventsv1.EventList{}
		require.NoError(c, k8s.List(f.ctx, list, client.InNamespace(namespace)))
		for _, e := range list.Items {
			if e.Regarding.Name == name && e.Reason == reason {
				found = e
				return
			}
		}
		assert.Fail(c, "no event", "no %s event about %s", reason, name)
	}, waitTimeout, pollInterval)
	return found
}

// deleteClaim deletes a claim and waits until it is gone.
func (f *fixture) deleteClaim(claim *ipamv1.IPAddressClaim) {
	f.t.Helper()
	require.NoError(f.t, k8s.Delete(f.ctx, claim))
	f.waitGone(claim)
}

func paused(c *clusterv1.Cluster) { c.Spec.Paused = ptr.To(true) }

// update reads obj afresh, applies mutate and writes it back, again if the
// reconcilers changed it meanwhile (they patch pools and claims).
func (f *fixture) update(obj client.Object, mutate func()) {
	f.t.Helper()
	require.NoError(f.t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := k8s.Get(f.ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			return err
		}
		mutate()
		return k8s.Update(f.ctx, obj)
	}))
}
