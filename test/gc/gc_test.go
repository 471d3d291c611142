package gc

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/api/v1alpha1"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/pkg/poolkind"
)

// fixture is one test's namespace, with the Secret of its IPAM system.
type fixture struct {
	t   *testing.T
	ctx context.Context
	ns  string
	sys system
	// held is what each network held once seeded (a real NetBox keeps what
	// earlier runs left).
	held map[string][]netip.Addr
}

func newFixture(t *testing.T, sys system) *fixture {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	f := &fixture{t: t, ctx: ctx, ns: "gc-" + randomHex(4), sys: sys, held: map[string][]netip.Addr{}}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: f.ns}}
	require.NoError(t, k8s.Create(ctx, ns))
	// The namespace controller empties what a failed test leaves behind.
	t.Cleanup(func() { _ = client.IgnoreNotFound(k8s.Delete(context.Background(), ns)) })
	require.NoError(t, k8s.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: sys.secretName(),
			Labels: map[string]string{v1alpha1.CredentialsLabel: "true"}},
		Data: sys.secretData(),
	}))
	return f
}

// createPool seeds cidr in the IPAM system and creates a ready pool on it.
func (f *fixture) createPool(name, cidr string) poolkind.Pool {
	f.t.Helper()
	f.sys.seedNetwork(cidr)
	f.held[cidr] = f.sys.heldIn(cidr)
	pool := f.sys.newPool(f.ns, name, cidr)
	require.NoError(f.t, k8s.Create(f.ctx, pool))
	require.EventuallyWithT(f.t, func(c *assert.CollectT) {
		got := pool.DeepCopyObject().(poolkind.Pool)
		require.NoError(c, k8s.Get(f.ctx, client.ObjectKeyFromObject(pool), got))
		assert.True(c, conditions.IsTrue(got, v1alpha1.ReadyCondition), "pool %s not ready: %s", name,
			conditions.GetMessage(got, v1alpha1.ReadyCondition))
	}, waitTimeout, pollInterval)
	return pool
}

// controllerRef is a controller owner reference that blocks its owner's
// foreground deletion, as CAPI's consumers set on their claims.
func controllerRef(apiVersion, kind string, owner client.Object) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: owner.GetName(), UID: owner.GetUID(),
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}
}

// createClaims creates, all at once, claims prefix-00 onwards on pool,
// owned by owner when it is set, in cluster when it is not empty.
func (f *fixture) createClaims(prefix string, n int, pool string, owner *metav1.OwnerReference, cluster string) []*ipamv1.IPAddressClaim {
	f.t.Helper()
	claims := make([]*ipamv1.IPAddressClaim, n)
	var wg sync.WaitGroup
	for i := range n {
		claim := &ipamv1.IPAddressClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: fmt.Sprintf("%s-%02d", prefix, i)},
			Spec: ipamv1.IPAddressClaimSpec{
				PoolRef: ipamv1.IPPoolReference{APIGroup: v1alpha1.GroupVersion.Group, Kind: f.sys.poolKind(), Name: pool},
			},
		}
		if owner != nil {
			claim.OwnerReferences = []metav1.OwnerReference{*owner}
		}
		if cluster != "" {
			claim.Spec.ClusterName = cluster
			claim.Labels = map[string]string{clusterv1.ClusterNameLabel: cluster}
		}
		claims[i] = claim
		wg.Go(func() { assert.NoError(f.t, k8s.Create(f.ctx, claim)) })
	}
	wg.Wait()
	return claims
}

// waitBound waits until every claim is bound and returns their IPAddresses.
func (f *fixture) waitBound(claims []*ipamv1.IPAddressClaim) map[string]*ipamv1.IPAddress {
	f.t.Helper()
	addresses := map[string]*ipamv1.IPAddress{}
	require.EventuallyWithT(f.t, func(c *assert.CollectT) {
		for _, claim := range claims {
			if _, ok := addresses[claim.Name]; ok {
				continue
			}
			got := &ipamv1.IPAddressClaim{}
			require.NoError(c, k8s.Get(f.ctx, client.ObjectKeyFromObject(claim), got))
			if !assert.True(c, conditions.IsTrue(got, ipamv1.IPAddressClaimReadyCondition), "claim %s: %s", claim.Name,
				conditions.GetMessage(got, ipamv1.IPAddressClaimReadyCondition)) {
				continue
			}
			address := &ipamv1.IPAddress{}
			if assert.NoError(c, k8s.Get(f.ctx, client.ObjectKeyFromObject(claim), address)) {
				addresses[claim.Name] = address
			}
		}
	}, waitTimeout, pollInterval)
	return addresses
}

// watchAddresses records what happens to the namespace's IPAddresses from
// now on; stop ends the watch and returns the events.
func (f *fixture) watchAddresses() (stop func() []watch.Event) {
	f.t.Helper()
	list := &ipamv1.IPAddressList{}
	require.NoError(f.t, k8s.List(f.ctx, list, client.InNamespace(f.ns)))
	w, err := k8s.Watch(f.ctx, &ipamv1.IPAddressList{}, &client.ListOptions{Namespace: f.ns,
		Raw: &metav1.ListOptions{ResourceVersion: list.ResourceVersion}})
	require.NoError(f.t, err)
	var (
		mu     sync.Mutex
		events []watch.Event
		done   = make(chan struct{})
	)
	go func() {
		defer close(done)
		for e := range w.ResultChan() {
			mu.Lock()
			events = append(events, e)
			mu.Unlock()
		}
	}()
	return func() []watch.Event {
		w.Stop()
		<-done
		mu.Lock()
		defer mu.Unlock()
		return events
	}
}

// assertNothingRebuilt checks that no IPAddress was written anew while the
// claims were being deleted.
func (f *fixture) assertNothingRebuilt(events []watch.Event, allocationsBefore int) {
	f.t.Helper()
	for _, e := range events {
		if e.Type == watch.Added {
			a := e.Object.(*ipamv1.IPAddress)
			f.t.Errorf("IPAddress %s (%s) was created again while its claim was being deleted", a.Name, a.Spec.Address)
		}
	}
	assert.Equal(f.t, allocationsBefore, f.sys.allocations(), "nothing was reserved while the claims were being deleted")
	if n := strings.Count(managerLogs.String(), "IPAddress is being deleted while its claim exists"); n > 0 {
		// Across the suite, not only this test: informative.
		f.t.Logf("the manager has so far seen %d IPAddresses deleted before their claims", n)
	}
}

// assertReleased checks that the IPAM system holds nothing for the
// namespace's claims, and in each cidr only what it held before the pools.
func (f *fixture) assertReleased(cidrs ...string) {
	f.t.Helper()
	assert.Empty(f.t, f.sys.markedIn(f.ns), "every reservation of the namespace was released")
	for _, cidr := range cidrs {
		assert.ElementsMatch(f.t, addrStrings(f.held[cidr]), addrStrings(f.sys.heldIn(cidr)), "%s holds only what it held before", cidr)
	}
}

func addrStrings(addrs []netip.Addr) []string {
	out := make([]string, len(addrs))
	for i, a := range addrs {
		out[i] = a.String()
	}
	return out
}

func (f *fixture) waitGone(obj client.Object, timeout time.Duration) time.Duration {
	f.t.Helper()
	start := time.Now()
	require.EventuallyWithT(f.t, func(c *assert.CollectT) {
		err := k8s.Get(f.ctx, client.ObjectKeyFromObject(obj), obj.DeepCopyObject().(client.Object))
		assert.True(c, apierrors.IsNotFound(err), "%T %s still exists (err %v)", obj, obj.GetName(), err)
	}, timeout, pollInterval)
	return time.Since(start)
}

// waitNoneLeft waits until the namespace holds no claim and no IPAddress,
// and otherwise fails the test, describing what is left, but goes on.
func (f *fixture) waitNoneLeft() bool {
	f.t.Helper()
	var claims ipamv1.IPAddressClaimList
	var addresses ipamv1.IPAddressList
	deadline := time.Now().Add(30 * time.Second)
	for {
		require.NoError(f.t, k8s.List(f.ctx, &claims, client.InNamespace(f.ns)))
		require.NoError(f.t, k8s.List(f.ctx, &addresses, client.InNamespace(f.ns)))
		if len(claims.Items) == 0 && len(addresses.Items) == 0 {
			return true
		}
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(pollInterval)
	}
	for _, c := range claims.Items {
		f.t.Errorf("claim %s left: deleted %v, finalizers %v, owners %s", c.Name, c.DeletionTimestamp, c.Finalizers, owners(c.OwnerReferences))
	}
	for _, a := range addresses.Items {
		f.t.Errorf("IPAddress %s (%s) left: deleted %v, finalizers %v, owners %s", a.Name, a.Spec.Address, a.DeletionTimestamp,
			a.Finalizers, owners(a.OwnerReferences))
	}
	return false
}

func owners(refs []metav1.OwnerReference) string {
	var out []string
	for _, r := range refs {
		out = append(out, fmt.Sprintf("%s/%s(controller=%t,block=%t)", r.Kind, r.Name, ptr.Deref(r.Controller, false), ptr.Deref(r.BlockOwnerDeletion, false)))
	}
	return "[" + strings.Join(out, " ") + "]"
}

func (f *fixture) countClaims() int {
	f.t.Helper()
	claims := &ipamv1.IPAddressClaimList{}
	require.NoError(f.t, k8s.List(f.ctx, claims, client.InNamespace(f.ns)))
	return len(claims.Items)
}

// Deleting a namespace deletes its Secret, pools, claims and IPAddresses
// at once and in no particular order; the namespace controller finalizes it
// only when the provider has let every one of them go, after releasing every
// reservation.
func TestNamespaceDeletionReleasesEveryReservation(t *testing.T) {
	forEachSystem(t, func(t *testing.T, sys system) {
		f := newFixture(t, sys)
		f.createPool("pool-a", "10.190.0.0/24")
		f.createPool("pool-b", "10.191.0.0/24")
		claims := append(f.createClaims("a", 10, "pool-a", nil, ""), f.createClaims("b", 10, "pool-b", nil, "")...)
		f.waitBound(claims)
		require.Len(t, sys.markedIn(f.ns), 20)
		allocations := sys.allocations()

		start := time.Now()
		require.NoError(t, k8s.Delete(f.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: f.ns}}))
		f.waitGone(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: f.ns}}, 3*time.Minute)
		t.Logf("%s: namespace with 2 pools and 20 bound claims gone %s after its deletion",
			sys.name(), time.Since(start).Round(time.Millisecond))

		f.assertReleased("10.190.0.0/24", "10.191.0.0/24")
		assert.Equal(t, allocations, sys.allocations(), "nothing was reserved while the namespace went")
	})
}

// Claims owned by a plain object go with it, in either propagation mode,
// releasing every reservation; a claim being deleted never gets its
// IPAddress back.
func TestOwnerDeletionReleasesEveryClaim(t *testing.T) {
	for i, policy := range []metav1.DeletionPropagation{metav1.DeletePropagationBackground, metav1.DeletePropagationForeground} {
		t.Run(string(policy), func(t *testing.T) {
			forEachSystem(t, func(t *testing.T, sys system) {
				f := newFixture(t, sys)
				cidr := fmt.Sprintf("10.%d.0.0/24", 192+i)
				f.createPool("pool", cidr)
				owner := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "owner"}}
				require.NoError(t, k8s.Create(f.ctx, owner))
				ref := controllerRef("v1", "ConfigMap", owner)
				claims := f.createClaims("machine", 10, "pool", &ref, "")
				f.waitBound(claims)
				require.Len(t, sys.markedIn(f.ns), 10)
				allocations := sys.allocations()
				stop := f.watchAddresses()

				start := time.Now()
				require.NoError(t, k8s.Delete(f.ctx, owner, client.PropagationPolicy(policy)))
				f.waitGone(owner, waitTimeout)
				ownerGone := time.Since(start)
				if policy == metav1.DeletePropagationForeground {
					assert.Zero(t, f.countClaims(), "the owner outlives its claims in the foreground")
				}
				f.waitNoneLeft()
				t.Logf("%s, %s: owner gone after %s, its 10 claims and IPAddresses after %s", sys.name(), policy,
					ownerGone.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))

				f.assertNothingRebuilt(stop(), allocations)
				f.assertReleased(cidr)
			})
		})
	}
}

// A Cluster's claims are owned through its consumers (Cluster → Machine →
// claim); deleting the Cluster deletes the Machines and then the claims,
// and every reservation is released.
func TestClusterDeletionReleasesClaimsOfItsMachines(t *testing.T) {
	for i, policy := range []metav1.DeletionPropagation{metav1.DeletePropagationBackground, metav1.DeletePropagationForeground} {
		t.Run(string(policy), func(t *testing.T) {
			forEachSystem(t, func(t *testing.T, sys system) {
				f := newFixture(t, sys)
				cidr := fmt.Sprintf("10.%d.0.0/24", 194+i)
				f.createPool("pool", cidr)
				cluster := &clusterv1.Cluster{
					ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "workload"},
					Spec:       clusterv1.ClusterSpec{ClusterNetwork: clusterv1.ClusterNetwork{ServiceDomain: "cluster.local"}},
				}
				require.NoError(t, k8s.Create(f.ctx, cluster))
				var claims []*ipamv1.IPAddressClaim
				for m := range 5 {
					machine := &clusterv1.Machine{
						ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: fmt.Sprintf("workload-md-%d", m),
							Labels:          map[string]string{clusterv1.ClusterNameLabel: cluster.Name},
							OwnerReferences: []metav1.OwnerReference{controllerRef(clusterv1.GroupVersion.String(), "Cluster", cluster)}},
						Spec: clusterv1.MachineSpec{
							ClusterName: cluster.Name,
							Bootstrap:   clusterv1.Bootstrap{DataSecretName: ptr.To("bootstrap")},
							InfrastructureRef: clusterv1.ContractVersionedObjectReference{
								APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "Metal3Machine", Name: fmt.Sprintf("workload-md-%d", m),
							},
						},
					}
					require.NoError(t, k8s.Create(f.ctx, machine))
					ref := controllerRef(clusterv1.GroupVersion.String(), "Machine", machine)
					claims = append(claims, f.createClaims(machine.Name, 2, "pool", &ref, cluster.Name)...)
				}
				f.waitBound(claims)
				require.Len(t, sys.markedIn(f.ns), 10)
				allocations := sys.allocations()
				stop := f.watchAddresses()

				start := time.Now()
				require.NoError(t, k8s.Delete(f.ctx, cluster, client.PropagationPolicy(policy)))
				f.waitGone(cluster, waitTimeout)
				f.waitNoneLeft()
				require.EventuallyWithT(t, func(c *assert.CollectT) {
					machines := &clusterv1.MachineList{}
					require.NoError(c, k8s.List(f.ctx, machines, client.InNamespace(f.ns)))
					assert.Empty(c, machines.Items)
				}, waitTimeout, pollInterval)
				t.Logf("%s, %s: Cluster, 5 Machines and 10 claims gone %s after the Cluster's deletion", sys.name(), policy,
					time.Since(start).Round(time.Millisecond))

				f.assertNothingRebuilt(stop(), allocations)
				f.assertReleased(cidr)
			})
		})
	}
}

// A claim deleted in the foreground (kubectl delete --cascade=foreground,
// or a GitOps tool pruning in the foreground) waits for its IPAddress,
// which the garbage collector handles before the provider releases.
func TestForegroundClaimDeletionReleases(t *testing.T) {
	forEachSystem(t, func(t *testing.T, sys system) {
		f := newFixture(t, sys)
		cidr := "10.196.0.0/24"
		f.createPool("pool", cidr)
		claims := f.createClaims("machine", 3, "pool", nil, "")
		f.waitBound(claims)
		allocations := sys.allocations()
		stop := f.watchAddresses()

		for _, claim := range claims {
			require.NoError(t, k8s.Delete(f.ctx, claim, client.PropagationPolicy(metav1.DeletePropagationForeground)))
		}
		clean := f.waitNoneLeft()

		f.assertNothingRebuilt(stop(), allocations)
		f.assertReleased(cidr)
		if clean {
			return
		}
		// What an IPAddress left behind does: a new claim of the same name
		// (a Machine recreated under its old name) and the pool's deletion.
		again := f.createClaims("machine", 3, "pool", nil, "")
		for _, claim := range again {
			assert.EventuallyWithT(t, func(c *assert.CollectT) {
				got := &ipamv1.IPAddressClaim{}
				require.NoError(c, k8s.Get(f.ctx, client.ObjectKeyFromObject(claim), got))
				assert.True(c, conditions.IsTrue(got, ipamv1.IPAddressClaimReadyCondition), "claim %s: %s: %s", claim.Name,
					conditions.GetReason(got, ipamv1.IPAddressClaimReadyCondition), conditions.GetMessage(got, ipamv1.IPAddressClaimReadyCondition))
			}, 15*time.Second, pollInterval, "a new claim of the same name binds")
		}
		for _, claim := range again {
			require.NoError(t, k8s.Delete(f.ctx, claim))
		}
		pool := f.sys.newPool(f.ns, "pool", cidr)
		require.NoError(t, k8s.Delete(f.ctx, pool))
		assert.EventuallyWithT(t, func(c *assert.CollectT) {
			err := k8s.Get(f.ctx, client.ObjectKeyFromObject(pool), pool.DeepCopyObject().(client.Object))
			assert.True(c, apierrors.IsNotFound(err), "pool still exists: %v", err)
		}, 15*time.Second, pollInterval, "the pool can be deleted")
	})
}
