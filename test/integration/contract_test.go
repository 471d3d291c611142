package integration

import (
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/api/v1alpha1"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/reasons"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/reservation"
)

// The tests below follow the IPAM provider contract, bullet by bullet.

func TestClaimForAnotherProvidersPoolIsUntouched(t *testing.T) {
	forEachSystem(t, func(t *testing.T, f *fixture) {
		f.seedNetwork("10.1.0.0/24")
		pool := f.createPool("pool", "10.1.0.0/24")
		f.waitPoolReady(pool)

		foreign := f.createClaim("foreign", "other-pool", func(c *ipamv1.IPAddressClaim) {
			c.Spec.PoolRef = ipamv1.IPPoolReference{APIGroup: "ipam.cluster.x-k8s.io", Kind: "InClusterIPPool", Name: "other-pool"}
		})
		otherGroup := f.createClaim("other-group", "pool", func(c *ipamv1.IPAddressClaim) {
			c.Spec.PoolRef.APIGroup = "ipam.example.com"
		})
		// A claim of ours created after them binds, so they had their chance.
		f.waitBound(f.createClaim("ours", "pool"))

		for _, c := range []*ipamv1.IPAddressClaim{foreign, otherGroup} {
			got := &ipamv1.IPAddressClaim{}
			require.NoError(t, k8s.Get(f.ctx, client.ObjectKeyFromObject(c), got))
			assert.Empty(t, got.Finalizers, c.Name)
			assert.Empty(t, got.Status.Conditions, c.Name)
			assert.Empty(t, got.Status.AddressRef.Name, c.Name)
			err := k8s.Get(f.ctx, client.ObjectKeyFromObject(c), &ipamv1.IPAddress{})
			assert.True(t, client.IgnoreNotFound(err) == nil && err != nil, "no IPAddress for %s", c.Name)
		}
		assert.Len(t, f.markedRecords(), 1)
	})
}

func TestClaimIsBoundWithAnIPAddressAsTheContractSays(t *testing.T) {
	forEachSystem(t, func(t *testing.T, f *fixture) {
		f.seedNetwork("10.2.0.0/24")
		pool := f.createPool("pool", "10.2.0.0/24")
		cluster := f.createCluster("workload")
		claim := f.createClaim("machine-0", "pool", inCluster(cluster.Name))

		address := f.waitBound(claim)

		got := &ipamv1.IPAddressClaim{}
		require.NoError(t, k8s.Get(f.ctx, client.ObjectKeyFromObject(claim), got))
		t.Run("the claim has the provider's finalizer", func(t *testing.T) {
			assert.Contains(t, got.Finalizers, reservation.ClaimFinalizer)
		})
		t.Run("the IPAddress has the claim's name and namespace", func(t *testing.T) {
			assert.Equal(t, claim.Name, address.Name)
			assert.Equal(t, claim.Namespace, address.Namespace)
		})
		t.Run("the IPAddress is controlled by the claim and blocks its deletion", func(t *testing.T) {
			ref := controllerRef(address)
			require.NotNil(t, ref)
			assert.Equal(t, "IPAddressClaim", ref.Kind)
			assert.Equal(t, got.UID, ref.UID)
			assert.True(t, ptr.Deref(ref.BlockOwnerDeletion, false))
		})
		t.Run("the IPAddress is owned by the pool, not as controller, and blocks its deletion", func(t *testing.T) {
			var poolRef *metav1.OwnerReference
			for i, r := range address.OwnerReferences {
				if r.Kind == f.sys.poolKind(false) {
					poolRef = &address.OwnerReferences[i]
				}
			}
			require.NotNil(t, poolRef)
			require.NoError(t, k8s.Get(f.ctx, client.ObjectKeyFromObject(pool), pool))
			assert.Equal(t, pool.GetUID(), poolRef.UID)
			assert.False(t, ptr.Deref(poolRef.Controller, false))
			assert.True(t, ptr.Deref(poolRef.BlockOwnerDeletion, false))
		})
		t.Run("the IPAddress is protected by a finalizer", func(t *testing.T) {
			assert.Contains(t, address.Finalizers, reservation.ProtectAddressFinalizer)
		})
		t.Run("the IPAddress carries the cluster-name label", func(t *testing.T) {
			assert.Equal(t, cluster.Name, address.Labels[clusterv1.ClusterNameLabel])
		})
		t.Run("the IPAddress holds address, prefix, gateway and references", func(t *testing.T) {
			assert.Equal(t, "10.2.0.2", address.Spec.Address, "first free after network and recorded gateway")
			assert.Equal(t, int32(24), ptr.Deref(address.Spec.Prefix, 0))
			assert.Equal(t, "10.2.0.1", address.Spec.Gateway)
			assert.Equal(t, claim.Name, address.Spec.ClaimRef.Name)
			assert.Equal(t, claim.Spec.PoolRef, address.Spec.PoolRef)
		})
		t.Run("the claim's addressRef names the IPAddress and Ready is true", func(t *testing.T) {
			assert.Equal(t, address.Name, got.Status.AddressRef.Name)
			ready := conditions.Get(got, ipamv1.IPAddressClaimReadyCondition)
			require.NotNil(t, ready)
			assert.Equal(t, metav1.ConditionTrue, ready.Status)
			assert.Equal(t, reasons.AddressAllocatedReason, ready.Reason)
		})
		t.Run("the IPAM system holds one record with the claim's marker", func(t *testing.T) {
			records := f.recordsWithMarker(f.marker("machine-0"))
			require.Len(t, records, 1)
			assert.Equal(t, "10.2.0.2/24", records[0].Address.String())
			assert.Equal(t, "Cluster API claim "+f.ns+"/machine-0 of cluster workload", records[0].Description)
			if f.sim != nil {
				assert.Contains(t, f.netboxRecords()[0].Tags, "cluster-api-ipam")
			}
		})
		t.Run("an event reports the allocation", func(t *testing.T) {
			e := f.waitEvent(f.ns, claim.Name, reasons.AddressAllocatedReason)
			assert.Contains(t, e.Note, "10.2.0.2/24")
		})
	})
}

func TestClusterFromTheDeprecatedLabel(t *testing.T) {
	forEachSystem(t, func(t *testing.T, f *fixture) {
		f.seedNetwork("10.3.0.0/24")
		f.createPool("pool", "10.3.0.0/24")
		f.createCluster("labelled", paused)
		claim := f.newClaim("by-label", "pool")
		claim.Labels[clusterv1.ClusterNameLabel] = "labelled"
		require.NoError(t, k8s.Create(f.ctx, claim))

		// The label leads to the paused Cluster, so the claim waits.
		f.waitPaused(claim)
		unpause(t, f, "labelled")
		address := f.waitBound(claim)
		assert.Equal(t, "labelled", address.Labels[clusterv1.ClusterNameLabel])
	})
}

func TestPausedClusterOrPoolStopsReconciliation(t *testing.T) {
	tests := []struct {
		name    string
		cluster func(*clusterv1.Cluster)
		pool    bool
		resume  func(t *testing.T, f *fixture)
	}{
		{
			name:    "cluster spec.paused",
			cluster: paused,
			resume:  func(t *testing.T, f *fixture) { unpause(t, f, "workload") },
		},
		{
			name: "cluster paused annotation",
			cluster: func(c *clusterv1.Cluster) {
				c.Annotations = map[string]string{clusterv1.PausedAnnotation: ""}
			},
			resume: func(t *testing.T, f *fixture) { unpause(t, f, "workload") },
		},
		{
			name: "pool paused annotation",
			pool: true,
			resume: func(t *testing.T, f *fixture) {
				pool := f.sys.newPool(f.ns, "pool", "", "", false)
				f.update(pool, func() { pool.SetAnnotations(nil) })
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			forEachSystem(t, func(t *testing.T, f *fixture) {
				f.seedNetwork("10.4.0.0/24")
				pool := f.createPool("pool", "10.4.0.0/24")
				f.waitPoolReady(pool)
				if tt.pool {
					f.update(pool, func() { pool.SetAnnotations(map[string]string{clusterv1.PausedAnnotation: ""}) })
				}
				if tt.cluster == nil {
					tt.cluster = func(*clusterv1.Cluster) {}
				}
				f.createCluster("workload", tt.cluster)
				claim := f.createClaim("machine", "pool", inCluster("workload"))

				f.waitPaused(claim)
				got := &ipamv1.IPAddressClaim{}
				require.NoError(t, k8s.Get(f.ctx, client.ObjectKeyFromObject(claim), got))
				assert.Empty(t, got.Status.AddressRef.Name)
				assert.Empty(t, f.markedRecords(), "nothing is reserved while paused")

				tt.resume(t, f)
				f.waitBound(claim)
				assert.Len(t, f.markedRecords(), 1)
			})
		})
	}
}

func (f *fixture) waitPaused(claim *ipamv1.IPAddressClaim) {
	f.t.Helper()
	require.EventuallyWithT(f.t, func(c *assert.CollectT) {
		got := &ipamv1.IPAddressClaim{}
		require.NoError(c, k8s.Get(f.ctx, client.ObjectKeyFromObject(claim), got))
		assert.True(c, conditions.IsTrue(got, clusterv1.PausedCondition), "Paused condition")
	}, waitTimeout, pollInterval)
}

func unpause(t *testing.T, f *fixture, name string) {
	t.Helper()
	cluster := &clusterv1.Cluster{}
	require.NoError(t, k8s.Get(f.ctx, client.ObjectKey{Namespace: f.ns, Name: name}, cluster))
	cluster.Spec.Paused = nil
	delete(cluster.Annotations, clusterv1.PausedAnnotation)
	require.NoError(t, k8s.Update(f.ctx, cluster))
}

func TestMissingClusterStopsReconciliationUntilItExists(t *testing.T) {
	forEachSystem(t, func(t *testing.T, f *fixture) {
		f.seedNetwork("10.5.0.0/24")
		f.createPool("pool", "10.5.0.0/24")
		claim := f.createClaim("machine", "pool", inCluster("later"))

		f.waitEvent(f.ns, claim.Name, reasons.ClusterNotFoundReason)
		got := &ipamv1.IPAddressClaim{}
		require.NoError(t, k8s.Get(f.ctx, client.ObjectKeyFromObject(claim), got))
		assert.Empty(t, got.Finalizers)
		assert.Empty(t, f.markedRecords())

		f.createCluster("later")
		f.waitBound(claim)
	})
}

func TestDeletedClaimReleasesItsAddress(t *testing.T) {
	forEachSystem(t, func(t *testing.T, f *fixture) {
		f.seedNetwork("10.6.0.0/24")
		f.createPool("pool", "10.6.0.0/24")
		f.createCluster("workload")
		claim := f.createClaim("machine", "pool", inCluster("workload"))
		address := f.waitBound(claim)
		require.Len(t, f.markedRecords(), 1)

		f.deleteClaim(claim)

		t.Run("the address is released in the IPAM system", func(t *testing.T) {
			assert.Empty(t, f.markedRecords())
		})
		t.Run("the IPAddress is deleted despite its protecting finalizer", func(t *testing.T) {
			f.waitGone(address)
		})
		t.Run("an event reports the release", func(t *testing.T) {
			f.waitEvent(f.ns, claim.Name, reasons.AddressReleasedReason)
		})
	})
}

func TestDeletedClaimWaitsWhileItsClusterIsPaused(t *testing.T) {
	forEachSystem(t, func(t *testing.T, f *fixture) {
		f.seedNetwork("10.7.0.0/24")
		f.createPool("pool", "10.7.0.0/24")
		cluster := f.createCluster("workload")
		claim := f.createClaim("machine", "pool", inCluster(cluster.Name))
		f.waitBound(claim)

		require.NoError(t, k8s.Get(f.ctx, client.ObjectKeyFromObject(cluster), cluster))
		cluster.Spec.Paused = ptr.To(true)
		require.NoError(t, k8s.Update(f.ctx, cluster))
		f.waitPaused(claim)
		require.NoError(t, k8s.Delete(f.ctx, claim))

		// While paused, nothing is released.
		require.Never(t, func() bool { return len(f.markedRecords()) == 0 }, 2*time.Second, pollInterval)
		require.NoError(t, k8s.Get(f.ctx, client.ObjectKeyFromObject(claim), &ipamv1.IPAddressClaim{}))

		unpause(t, f, cluster.Name)
		f.waitGone(claim)
		assert.Empty(t, f.markedRecords())
	})
}

func TestDeletedClaimIsReleasedWhenItsClusterIsGone(t *testing.T) {
	forEachSystem(t, func(t *testing.T, f *fixture) {
		f.seedNetwork("10.8.0.0/24")
		f.createPool("pool", "10.8.0.0/24")
		cluster := f.createCluster("workload")
		claim := f.createClaim("machine", "pool", inCluster(cluster.Name))
		f.waitBound(claim)

		require.NoError(t, k8s.Delete(f.ctx, cluster))
		f.waitGone(cluster)
		f.deleteClaim(claim)
		assert.Empty(t, f.markedRecords())
	})
}

func TestIPv6Claim(t *testing.T) {
	forEachSystem(t, func(t *testing.T, f *fixture) {
		f.seedNetwork("2001:db8:42::/64")
		f.createPool("pool", "2001:db8:42::/64")
		address := f.waitBound(f.createClaim("machine", "pool"))

		addr := netip.MustParseAddr(address.Spec.Address)
		assert.True(t, addr.Is6())
		assert.Equal(t, "2001:db8:42::2", address.Spec.Address, "skips the subnet-router anycast address and the recorded gateway")
		assert.Equal(t, int32(64), ptr.Deref(address.Spec.Prefix, 0))
		assert.Equal(t, "2001:db8:42::1", address.Spec.Gateway)
	})
}

func TestGlobalPoolServesEveryNamespaceWithTheManagersSecret(t *testing.T) {
	forEachSystem(t, func(t *testing.T, f *fixture) {
		f.seedNetwork("10.9.0.0/24")
		secretName := "netbox-" + f.ns
		f.createSystemSecret(managerNamespace, secretName)
		pool := f.sys.newPool("", "global-"+f.ns, "10.9.0.0/24", secretName, true)
		pool.SetLabels(f.labels())
		require.NoError(t, k8s.Create(f.ctx, pool))
		t.Cleanup(func() { _ = k8s.Delete(f.ctx, pool) })
		f.waitPoolReady(pool)

		claim := f.createClaim("machine", pool.GetName(), poolRef(f.sys.poolKind(true), pool.GetName()))
		address := f.waitBound(claim)
		assert.Equal(t, f.sys.poolKind(true), address.Spec.PoolRef.Kind)

		t.Run("a Global pool does not read a Secret from another namespace", func(t *testing.T) {
			// The fixture's Secret exists only in the test namespace.
			other := f.sys.newPool("", "global-bad-"+f.ns, "10.9.0.0/24", f.secret, true)
			other.SetLabels(f.labels())
			require.NoError(t, k8s.Create(f.ctx, other))
			t.Cleanup(func() { _ = k8s.Delete(f.ctx, other) })
			cond := f.waitPoolReason(other, metav1.ConditionFalse, v1alpha1.CredentialsSecretNotFoundReason)
			assert.Contains(t, cond.Message, managerNamespace)
		})
	})
}

func TestNamespacedPoolReadsItsSecretOnlyFromItsNamespace(t *testing.T) {
	forEachSystem(t, func(t *testing.T, f *fixture) {
		f.seedNetwork("10.10.0.0/24")
		f.createSystemSecret(managerNamespace, "only-in-manager-ns-"+f.ns)
		pool := f.sys.newPool(f.ns, "pool", "10.10.0.0/24", "only-in-manager-ns-"+f.ns, false)
		pool.SetLabels(f.labels())
		require.NoError(t, k8s.Create(f.ctx, pool))
		cond := f.waitPoolReason(pool, metav1.ConditionFalse, v1alpha1.CredentialsSecretNotFoundReason)
		assert.Contains(t, cond.Message, f.ns)
	})
}

func controllerRef(o metav1.Object) *metav1.OwnerReference {
	for i, r := range o.GetOwnerReferences() {
		if ptr.Deref(r.Controller, false) {
			return &o.GetOwnerReferences()[i]
		}
	}
	return nil
}
