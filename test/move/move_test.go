package move

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	clusterctl "sigs.k8s.io/cluster-api/cmd/clusterctl/client"
	"sigs.k8s.io/cluster-api/util/conditions"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/api/v1alpha1"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/endpoint"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/pkg/poolkind"
)

const (
	// Two networks of each IPAM system: the namespaced pool's and the
	// Global pool's. A real NetBox is shared with the other suites, whose
	// networks lie elsewhere.
	namespacedCIDR = "10.252.0.0/24"
	globalCIDR     = "10.252.1.0/24"
	clusterName    = "workload"
)

// machines are the workload Cluster's Machines; each owns two claims, one
// of the namespaced pool and one of the Global pool, as CAPV's VSphereVM or
// CAPM3's Metal3Data owns the claims of a machine's devices.
var machines = []string{"workload-cp-0", "workload-md-0"}

func claimNames(machine string) []string { return []string{machine + "-nic0", machine + "-nic1"} }

// fixture is one IPAM system's namespace, pools and workload Cluster.
type fixture struct {
	t   *testing.T
	ctx context.Context
	sys system
	ns  string
	// global is the Global pool's name: cluster-scoped, so one per test.
	global string
	// held is what the networks held before the test.
	held []record
}

// TestClusterctlMoveRoundTrip moves a workload Cluster with its Machines,
// their claims and IPAddresses, the claim of the Cluster's control-plane
// endpoint (the Cluster opts in; the endpoint and its address stay the
// same, and the target reports nothing), and the pools (namespaced and Global) with
// clusterctl's library from management cluster A to B, and back to A. Each
// way, every claim is bound in the target to the very address it had, no
// reservation is made, the source releases nothing and writes nothing to
// the IPAM system from the move on, the source keeps none of the moved
// objects, and the target's audit finds no orphan and no duplicate.
// Deleting claims in B (after the first move) and in A (after the second)
// releases their records, and the IPAM system is left as it was.
func TestClusterctlMoveRoundTrip(t *testing.T) {
	forEachSystem(t, func(t *testing.T, sys system) {
		started := time.Now()
		f := newFixture(t, sys)
		f.createPools(clusterA)
		f.createWorkload(clusterA)
		// The Cluster's control-plane endpoint claim moves with it, as
		// the Machines' claims do.
		all := []string{endpointClaim}
		for _, m := range machines {
			all = append(all, claimNames(m)...)
		}
		bound := f.waitBound(clusterA, all)
		f.assertRecordsMarked(clusterA, bound)
		endpoint := f.waitEndpoint(clusterA, bound[endpointClaim])
		t.Logf("%s: %d claims bound in A after %s", sys.name(), len(bound), time.Since(started).Round(time.Millisecond))

		// A to B.
		reserved := f.markedAddresses()
		moveStarted := time.Now()
		f.move(clusterA, clusterB)
		f.assertMoved(clusterA, clusterB, bound, reserved, moveStarted)
		f.assertEndpointKept(clusterB, endpoint)
		t.Logf("%s: moved A to B in %s (with the checks)", sys.name(), time.Since(moveStarted).Round(time.Millisecond))

		// The claims of one Machine go in B: B releases the records A made.
		gone := machines[1]
		for _, name := range claimNames(gone) {
			f.deleteClaim(clusterB, name)
		}
		require.NoError(t, clusterB.k8s.Delete(f.ctx, &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: gone}}))
		for _, name := range claimNames(gone) {
			f.assertReleased(bound[name])
			delete(bound, name)
		}

		// A wrote nothing since the move, B's deletions included.
		f.assertNoWritesSince(clusterA, moveStarted)

		// And back from B to A, as Cluster API's controllers would have it:
		// provisioned and with its nodes.
		f.setProvisioned(clusterB)
		reserved = f.markedAddresses()
		moveStarted = time.Now()
		f.move(clusterB, clusterA)
		f.assertMoved(clusterB, clusterA, bound, reserved, moveStarted)
		f.assertEndpointKept(clusterA, endpoint)
		t.Logf("%s: moved B back to A in %s (with the checks)", sys.name(), time.Since(moveStarted).Round(time.Millisecond))

		// The endpoint's claim keeps the VIP while its Cluster lives: the
		// Cluster goes first.
		require.NoError(t, clusterA.k8s.Delete(f.ctx, &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: clusterName}}))
		require.EventuallyWithT(t, func(ct *assert.CollectT) {
			err := clusterA.k8s.Get(f.ctx, client.ObjectKey{Namespace: f.ns, Name: clusterName}, &clusterv1.Cluster{})
			assert.True(ct, apierrors.IsNotFound(err), "the Cluster is still in A (%v)", err)
		}, waitTimeout, pollInterval)
		for name, addr := range bound {
			f.deleteClaim(clusterA, name)
			f.assertReleased(addr)
		}
		for _, cidr := range []string{namespacedCIDR, globalCIDR} {
			assert.Equal(t, f.heldIn(cidr), addrs(sys.recordsIn(cidr)), "%s holds only what it held before the test", cidr)
		}
		f.assertNoWritesSince(clusterB, moveStarted)
		t.Logf("%s: round trip done in %s", sys.name(), time.Since(started).Round(time.Millisecond))
	})
}

func newFixture(t *testing.T, sys system) *fixture {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	f := &fixture{t: t, ctx: ctx, sys: sys, ns: "move-" + randomHex(3), global: "move-global-" + randomHex(3)}
	for _, cidr := range []string{namespacedCIDR, globalCIDR} {
		sys.seedNetwork(cidr)
		f.held = append(f.held, sys.recordsIn(cidr)...)
	}
	// Each management cluster has its own credentials: the pools'
	// Secrets are not moved (docs/install.md), so B's are created before
	// the move, in the workload's namespace and, for the Global pool, in
	// the manager's.
	for _, c := range []*mgmt{clusterA, clusterB} {
		require.NoError(t, c.k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: f.ns}}))
		for _, ns := range []string{f.ns, managerNamespace} {
			secret := &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sys.secretName(),
					Labels: map[string]string{v1alpha1.CredentialsLabel: "true"}},
				Data: sys.secretData(c),
			}
			err := c.k8s.Create(ctx, secret)
			if apierrors.IsAlreadyExists(err) {
				err = c.k8s.Update(ctx, secret)
			}
			require.NoError(t, err)
		}
	}
	t.Cleanup(func() {
		// Global pools outlive the namespace: gone, the next system's
		// move does not carry this one's along.
		ctx := context.Background()
		for _, c := range []*mgmt{clusterA, clusterB} {
			pool := sys.newPool("", f.global, globalCIDR)
			if err := client.IgnoreNotFound(c.k8s.Delete(ctx, pool)); err != nil {
				t.Logf("deleting Global pool %s in %s: %v", f.global, c.name, err)
				continue
			}
			assert.EventuallyWithT(t, func(ct *assert.CollectT) {
				err := c.k8s.Get(ctx, client.ObjectKeyFromObject(pool), pool)
				assert.True(ct, apierrors.IsNotFound(err), "Global pool %s still in %s (%v)", f.global, c.name, err)
			}, waitTimeout, pollInterval)
		}
	})
	return f
}

// createPools creates the namespaced and the Global pool in c and waits
// until both are ready.
func (f *fixture) createPools(c *mgmt) {
	f.t.Helper()
	for _, pool := range []poolkind.Pool{f.sys.newPool(f.ns, "pool", namespacedCIDR), f.sys.newPool("", f.global, globalCIDR)} {
		require.NoError(f.t, c.k8s.Create(f.ctx, pool))
		require.EventuallyWithT(f.t, func(ct *assert.CollectT) {
			got := pool.DeepCopyObject().(poolkind.Pool)
			require.NoError(ct, c.k8s.Get(f.ctx, client.ObjectKeyFromObject(pool), got))
			assert.True(ct, conditions.IsTrue(got, v1alpha1.ReadyCondition), "pool %s not ready: %s", pool.GetName(),
				conditions.GetMessage(got, v1alpha1.ReadyCondition))
		}, waitTimeout, pollInterval)
	}
}

// createWorkload creates the Cluster, its Machines and their claims, as
// Cluster API and an infrastructure provider would: the Machines owned by
// the Cluster, each claim by its Machine (controller) and labelled with the
// Cluster's name, as the IPAM contract asks of consumers.
func (f *fixture) createWorkload(c *mgmt) {
	f.t.Helper()
	cluster := &clusterv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: clusterName, Annotations: map[string]string{
			// The control-plane endpoint from the namespaced pool.
			v1alpha1.ControlPlaneEndpointPoolAnnotation: f.sys.poolKind(false) + "/pool",
		}},
		Spec: clusterv1.ClusterSpec{ClusterNetwork: clusterv1.ClusterNetwork{ServiceDomain: "cluster.local"}},
	}
	require.NoError(f.t, c.k8s.Create(f.ctx, cluster))
	for _, m := range machines {
		machine := &clusterv1.Machine{
			ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: m,
				Labels:          map[string]string{clusterv1.ClusterNameLabel: clusterName},
				OwnerReferences: []metav1.OwnerReference{controllerRef("Cluster", cluster)}},
			Spec: clusterv1.MachineSpec{
				ClusterName: clusterName,
				Bootstrap:   clusterv1.Bootstrap{DataSecretName: ptr.To(m + "-bootstrap")},
				InfrastructureRef: clusterv1.ContractVersionedObjectReference{
					APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "VSphereMachine", Name: m,
				},
			},
		}
		require.NoError(f.t, c.k8s.Create(f.ctx, machine))
		for i, name := range claimNames(m) {
			ref := ipamv1.IPPoolReference{APIGroup: v1alpha1.GroupVersion.Group, Kind: f.sys.poolKind(false), Name: "pool"}
			if i == 1 {
				ref = ipamv1.IPPoolReference{APIGroup: v1alpha1.GroupVersion.Group, Kind: f.sys.poolKind(true), Name: f.global}
			}
			require.NoError(f.t, c.k8s.Create(f.ctx, &ipamv1.IPAddressClaim{
				ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: name,
					Labels:          map[string]string{clusterv1.ClusterNameLabel: clusterName},
					OwnerReferences: []metav1.OwnerReference{controllerRef("Machine", machine)}},
				Spec: ipamv1.IPAddressClaimSpec{ClusterName: clusterName, PoolRef: ref},
			}))
		}
	}
	f.setProvisioned(c)
}

func controllerRef(kind string, owner client.Object) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: clusterv1.GroupVersion.String(), Kind: kind, Name: owner.GetName(),
		UID: owner.GetUID(), Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}
}

// setProvisioned writes the status Cluster API's controllers would: the
// Cluster's infrastructure provisioned and control plane initialized, each
// Machine's node. clusterctl moves only provisioned Clusters, and a move
// does not carry status.
func (f *fixture) setProvisioned(c *mgmt) {
	f.t.Helper()
	cluster := &clusterv1.Cluster{}
	require.NoError(f.t, c.k8s.Get(f.ctx, client.ObjectKey{Namespace: f.ns, Name: clusterName}, cluster))
	cluster.Status.Initialization = clusterv1.ClusterInitializationStatus{
		InfrastructureProvisioned: ptr.To(true), ControlPlaneInitialized: ptr.To(true)}
	conditions.Set(cluster, metav1.Condition{Type: clusterv1.ClusterControlPlaneInitializedCondition,
		Status: metav1.ConditionTrue, Reason: clusterv1.ClusterControlPlaneInitializedReason})
	require.NoError(f.t, c.k8s.Status().Update(f.ctx, cluster))
	list := &clusterv1.MachineList{}
	require.NoError(f.t, c.k8s.List(f.ctx, list, client.InNamespace(f.ns)))
	for i := range list.Items {
		m := &list.Items[i]
		m.Status.NodeRef = clusterv1.MachineNodeReference{Name: m.Name}
		require.NoError(f.t, c.k8s.Status().Update(f.ctx, m))
	}
}

// endpointClaim is the claim the provider makes for the Cluster's
// control-plane endpoint.
const endpointClaim = clusterName + endpoint.ClaimSuffix

// waitEndpoint waits until the provider has written the endpoint claim's
// address (addr, with its prefix length) into the Cluster in c.
func (f *fixture) waitEndpoint(c *mgmt, addr string) clusterv1.APIEndpoint {
	f.t.Helper()
	want := clusterv1.APIEndpoint{Host: netip.MustParsePrefix(addr).Addr().String(), Port: v1alpha1.DefaultControlPlaneEndpointPort}
	require.EventuallyWithT(f.t, func(ct *assert.CollectT) {
		cluster := &clusterv1.Cluster{}
		require.NoError(ct, c.k8s.Get(f.ctx, client.ObjectKey{Namespace: f.ns, Name: clusterName}, cluster))
		assert.Equal(ct, want, cluster.Spec.ControlPlaneEndpoint)
	}, waitTimeout, pollInterval)
	return want
}

// assertEndpointKept checks that the Cluster moved to c has the endpoint
// it had, that its claim is the one that moved (bound again to the same
// address by assertMoved), and that c's provider saw nothing to report:
// no Warning on the Cluster.
func (f *fixture) assertEndpointKept(c *mgmt, want clusterv1.APIEndpoint) {
	f.t.Helper()
	cluster := &clusterv1.Cluster{}
	require.NoError(f.t, c.k8s.Get(f.ctx, client.ObjectKey{Namespace: f.ns, Name: clusterName}, cluster))
	assert.Equal(f.t, want, cluster.Spec.ControlPlaneEndpoint, "the endpoint in %s", c.name)
	claim := &ipamv1.IPAddressClaim{}
	require.NoError(f.t, c.k8s.Get(f.ctx, client.ObjectKey{Namespace: f.ns, Name: endpointClaim}, claim))
	assert.True(f.t, metav1.IsControlledBy(claim, cluster), "the moved claim is owned by the moved Cluster in %s", c.name)
	list := &eventsv1.EventList{}
	require.NoError(f.t, c.k8s.List(f.ctx, list, client.InNamespace(f.ns)))
	for _, e := range list.Items {
		if e.Regarding.Kind == "Cluster" && e.Type == corev1.EventTypeWarning {
			f.t.Errorf("Warning on the Cluster in %s after the move: %s: %s", c.name, e.Reason, e.Note)
		}
	}
}

// move runs clusterctl move for the namespace.
func (f *fixture) move(from, to *mgmt) {
	f.t.Helper()
	err := clusterctlClient.Move(f.ctx, clusterctl.MoveOptions{
		FromKubeconfig: clusterctl.Kubeconfig{Path: from.kubeconfig},
		ToKubeconfig:   clusterctl.Kubeconfig{Path: to.kubeconfig},
		Namespace:      f.ns,
	})
	require.NoError(f.t, err, "clusterctl move -n %s from %s to %s", f.ns, from.name, to.name)
}

// waitBound waits until every named claim in c is Ready and returns the
// address of each, with its prefix length.
func (f *fixture) waitBound(c *mgmt, names []string) map[string]string {
	f.t.Helper()
	bound := map[string]string{}
	require.EventuallyWithT(f.t, func(ct *assert.CollectT) {
		for _, name := range names {
			claim := &ipamv1.IPAddressClaim{}
			require.NoError(ct, c.k8s.Get(f.ctx, client.ObjectKey{Namespace: f.ns, Name: name}, claim))
			if !assert.True(ct, conditions.IsTrue(claim, ipamv1.IPAddressClaimReadyCondition), "claim %s in %s: %s: %s", name, c.name,
				conditions.GetReason(claim, ipamv1.IPAddressClaimReadyCondition), conditions.GetMessage(claim, ipamv1.IPAddressClaimReadyCondition)) {
				continue
			}
			address := &ipamv1.IPAddress{}
			require.NoError(ct, c.k8s.Get(f.ctx, client.ObjectKey{Namespace: f.ns, Name: claim.Status.AddressRef.Name}, address))
			bound[name] = fmt.Sprintf("%s/%d", address.Spec.Address, ptr.Deref(address.Spec.Prefix, 0))
		}
	}, waitTimeout, pollInterval)
	return bound
}

// assertRecordsMarked checks that each bound address is held by exactly
// one record, carrying the marker of its claim in c.
func (f *fixture) assertRecordsMarked(c *mgmt, bound map[string]string) {
	f.t.Helper()
	records := append(f.sys.recordsIn(namespacedCIDR), f.sys.recordsIn(globalCIDR)...)
	for name, addr := range bound {
		var holders []string
		for _, r := range records {
			if r.address.String() == addr {
				holders = append(holders, r.marker)
			}
		}
		assert.Equal(f.t, []string{c.identity + "/" + f.ns + "/" + name}, holders, "the records holding %s, of claim %s", addr, name)
	}
}

// assertMoved checks what a move from one management cluster to the other
// left: the claims bound in the target to the addresses they had, the
// records of the namespace's claims those reserved before the move (no
// reservation made, none released), no write of the source's manager since
// the move started, nothing of the workload left in the source, and audits
// in the target (and of the Global pool left in the source) that find
// nothing.
func (f *fixture) assertMoved(from, to *mgmt, bound map[string]string, reserved []string, moveStarted time.Time) {
	f.t.Helper()
	var names []string
	for name := range bound {
		names = append(names, name)
	}
	assert.Equal(f.t, bound, f.waitBound(to, names), "every claim is bound in %s to the address it had in %s", to.name, from.name)

	// The source keeps nothing of the workload but the Global pool, which
	// clusterctl never deletes.
	for _, list := range []client.ObjectList{&ipamv1.IPAddressClaimList{}, &ipamv1.IPAddressList{}, &clusterv1.MachineList{}, &clusterv1.ClusterList{}} {
		require.NoError(f.t, from.k8s.List(f.ctx, list, client.InNamespace(f.ns)))
		assert.Empty(f.t, describe(list), "%s keeps no %T of the moved namespace", from.name, list)
	}
	err := from.k8s.Get(f.ctx, client.ObjectKeyFromObject(f.sys.newPool(f.ns, "pool", namespacedCIDR)), f.sys.newPool(f.ns, "pool", namespacedCIDR))
	assert.True(f.t, apierrors.IsNotFound(err), "the namespaced pool left %s (%v)", from.name, err)
	require.NoError(f.t, from.k8s.Get(f.ctx, client.ObjectKey{Name: f.global}, f.sys.newPool("", f.global, globalCIDR)),
		"clusterctl keeps the Global pool in %s", from.name)
	require.NoError(f.t, to.k8s.Get(f.ctx, client.ObjectKey{Name: f.global}, f.sys.newPool("", f.global, globalCIDR)),
		"the Global pool exists in %s", to.name)

	// The target's audit finds no orphan and no duplicate, and takes the
	// records over: they carry its marker from then on.
	for _, pool := range []poolkind.Pool{f.sys.newPool(f.ns, "pool", namespacedCIDR), f.sys.newPool("", f.global, globalCIDR)} {
		report := f.audit(to, pool)
		assert.Zero(f.t, report.Orphans, "%s's audit of %s: orphans %v", to.name, pool.GetName(), report.Findings)
		assert.Zero(f.t, report.Duplicates, "%s's audit of %s: duplicates %v", to.name, pool.GetName(), report.Findings)
	}
	f.assertRecordsMarked(to, bound)
	// And the source's audit of its Global pool finds no record of its own.
	report := f.audit(from, f.sys.newPool("", f.global, globalCIDR))
	assert.Zero(f.t, report.Records+report.Orphans+report.Duplicates, "%s's audit of the Global pool: %+v", from.name, report)

	assert.Equal(f.t, reserved, f.markedAddresses(), "no reservation was made or released")
	px := f.sys.proxy()
	assert.Empty(f.t, px.unattributed(), "every request to the IPAM system carried one management cluster's credentials")
	assert.NotEmpty(f.t, px.writesSince(to.name, moveStarted), "the target's audit took the records over, through the proxy")
	f.assertNoWritesSince(from, moveStarted)
}

// assertNoWritesSince checks that the manager of c, the source of a move
// that started at moveStarted, wrote nothing to the IPAM system since.
func (f *fixture) assertNoWritesSince(c *mgmt, moveStarted time.Time) {
	f.t.Helper()
	for _, w := range f.sys.proxy().writesSince(c.name, moveStarted) {
		f.t.Errorf("the manager of %s, the move's source, wrote to the IPAM system after the move started: %s %s at %s",
			c.name, w.method, w.path, w.at.Format(time.RFC3339Nano))
	}
}

// markedAddresses lists the addresses of the records that carry the
// marker of a claim of the namespace, under any identity.
func (f *fixture) markedAddresses() []string {
	var out []string
	for _, cidr := range []string{namespacedCIDR, globalCIDR} {
		for _, r := range f.sys.recordsIn(cidr) {
			if strings.Contains(r.marker, "/"+f.ns+"/") {
				out = append(out, r.address.String())
			}
		}
	}
	return out
}

// audit asks c's manager to audit the pool now and returns its report.
func (f *fixture) audit(c *mgmt, pool poolkind.Pool) *v1alpha1.AuditStatus {
	f.t.Helper()
	request := randomHex(4)
	got := pool.DeepCopyObject().(poolkind.Pool)
	require.NoError(f.t, c.k8s.Get(f.ctx, client.ObjectKeyFromObject(pool), got))
	base := got.DeepCopyObject().(poolkind.Pool)
	a := got.GetAnnotations()
	if a == nil {
		a = map[string]string{}
	}
	a[v1alpha1.AuditAnnotation] = request
	got.SetAnnotations(a)
	require.NoError(f.t, c.k8s.Patch(f.ctx, got, client.MergeFrom(base)))
	var report *v1alpha1.AuditStatus
	require.EventuallyWithT(f.t, func(ct *assert.CollectT) {
		require.NoError(ct, c.k8s.Get(f.ctx, client.ObjectKeyFromObject(pool), got))
		report = got.GetPoolStatus().Audit
		require.NotNil(ct, report, "no audit yet")
		assert.Equal(ct, request, report.Request, "audit not done yet")
	}, waitTimeout, pollInterval)
	return report
}

// deleteClaim deletes a claim in c and waits until it and its IPAddress
// are gone.
func (f *fixture) deleteClaim(c *mgmt, name string) {
	f.t.Helper()
	key := client.ObjectKey{Namespace: f.ns, Name: name}
	require.NoError(f.t, c.k8s.Delete(f.ctx, &ipamv1.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: name}}))
	require.EventuallyWithT(f.t, func(ct *assert.CollectT) {
		for _, o := range []client.Object{&ipamv1.IPAddressClaim{}, &ipamv1.IPAddress{}} {
			err := c.k8s.Get(f.ctx, key, o)
			assert.True(ct, apierrors.IsNotFound(err), "%T %s still in %s (%v)", o, name, c.name, err)
		}
	}, waitTimeout, pollInterval)
}

// assertReleased checks that no record holds addr any more.
func (f *fixture) assertReleased(addr string) {
	f.t.Helper()
	p := netip.MustParsePrefix(addr)
	for _, cidr := range []string{namespacedCIDR, globalCIDR} {
		for _, r := range f.sys.recordsIn(cidr) {
			assert.NotEqual(f.t, p.Addr(), r.address.Addr(), "%s is still held (%s)", addr, r.marker)
		}
	}
}

// heldIn is what cidr held before the test.
func (f *fixture) heldIn(cidr string) []string {
	var out []record
	p := netip.MustParsePrefix(cidr)
	for _, r := range f.held {
		if p.Contains(r.address.Addr()) {
			out = append(out, r)
		}
	}
	return addrs(out)
}

func addrs(records []record) []string {
	out := []string{}
	for _, r := range records {
		out = append(out, r.address.String())
	}
	return out
}

// describe names the items of a list.
func describe(list client.ObjectList) []string {
	var out []string
	switch l := list.(type) {
	case *ipamv1.IPAddressClaimList:
		for _, o := range l.Items {
			out = append(out, fmt.Sprintf("claim %s (finalizers %v)", o.Name, o.Finalizers))
		}
	case *ipamv1.IPAddressList:
		for _, o := range l.Items {
			out = append(out, fmt.Sprintf("IPAddress %s %s (finalizers %v, owners %v)", o.Name, o.Spec.Address, o.Finalizers, o.OwnerReferences))
		}
	case *clusterv1.MachineList:
		for _, o := range l.Items {
			out = append(out, "Machine "+o.Name)
		}
	case *clusterv1.ClusterList:
		for _, o := range l.Items {
			out = append(out, "Cluster "+o.Name)
		}
	}
	return out
}
