package integration

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/api/v1alpha1"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/pkg/poolkind"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/netboxsim"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/netboxtarget"
)

func (f *fixture) waitCounts(pool poolkind.Pool, want v1alpha1.AddressCounts) {
	f.t.Helper()
	require.EventuallyWithT(f.t, func(c *assert.CollectT) {
		got := pool.DeepCopyObject().(poolkind.Pool)
		require.NoError(c, k8s.Get(f.ctx, client.ObjectKeyFromObject(pool), got))
		status := got.GetPoolStatus()
		require.NotNil(c, status.Addresses)
		assert.Equal(c, want, *status.Addresses)
		assert.Equal(c, got.GetGeneration(), status.ObservedGeneration)
	}, waitTimeout, pollInterval)
}

func TestPoolReportsNetBoxCounts(t *testing.T) {
	f := newFixture(t)
	f.seedNetwork("10.50.0.0/24")
	f.sim.AddIPAddress("10.50.0.200/24", netboxsim.IPOptions{Description: "a printer"})
	pool := f.createPool("pool", "10.50.0.0/24")
	f.waitCounts(pool, v1alpha1.AddressCounts{Total: 254, Used: 2, Free: 252})

	for _, name := range []string{"a", "b", "c"} {
		f.waitBound(f.createClaim(name, "pool"))
	}
	f.waitCounts(pool, v1alpha1.AddressCounts{Total: 254, Used: 5, Free: 249})
}

func TestPoolIsKeptWhileIPAddressesFromItExist(t *testing.T) {
	forEachSystem(t, func(t *testing.T, f *fixture) {
		f.seedNetwork("10.51.0.0/24")
		pool := f.createPool("pool", "10.51.0.0/24")
		claim := f.createClaim("machine", "pool")
		f.waitBound(claim)

		require.NoError(t, k8s.Delete(f.ctx, pool))
		cond := f.waitPoolReason(pool, metav1.ConditionFalse, v1alpha1.DeletingReason)
		assert.Contains(t, cond.Message, "1 IPAddresses")

		// The claim can still release through the pool being deleted.
		f.deleteClaim(claim)
		assert.Empty(t, f.markedRecords())
		f.waitGone(pool)
	})
}

func TestRangeInAVRFWithEveryStampAndAV2Token(t *testing.T) {
	f := newFixture(t)
	v2 := "nbt_k8sprovider1." + strings.Repeat("Q", 40)
	f.sim.AddToken(v2, true)
	f.createSecret(f.ns, "netbox-v2", v2)
	prod := f.sim.AddVRF("prod", "65000:1")
	f.sim.AddIPRange("10.52.0.10/24", "10.52.0.19/24", netboxsim.RangeOptions{VRF: prod})
	f.sim.AddIPRange("10.52.0.10/24", "10.52.0.19/24", netboxsim.RangeOptions{}) // the same range in the global table
	f.sim.AddTenant("Platform", "platform")
	f.sim.AddTag("Kubernetes", "kubernetes")
	f.sim.AddCustomField("cost_center", "exact")
	pool := f.createNetboxPool("pool", "", func(s *v1alpha1.NetboxIPPoolSpec) {
		s.Connection.CredentialsSecretRef.Name = "netbox-v2"
		s.Sources = []v1alpha1.NetboxAddressSource{{IPRange: &v1alpha1.NetboxIPRangeSource{
			Start: "10.52.0.10", End: "10.52.0.19", VRF: "prod",
		}}}
		s.Reservation = v1alpha1.NetboxReservation{
			Status: "reserved", Role: "vip", Tenant: "platform",
			DNSNamePattern:     "{{ .ClaimName }}.{{ .ClusterName }}.example.com",
			DescriptionPattern: "k8s {{ .Namespace }}/{{ .ClaimName }}",
			Tags:               []string{"kubernetes"},
			CustomFields:       map[string]string{"cost_center": "4711"},
		}
	})
	f.waitCounts(pool, v1alpha1.AddressCounts{Total: 10, Used: 0, Free: 10})
	f.createCluster("edge")

	address := f.waitBound(f.createClaim("lb", "pool", inCluster("edge")))

	assert.Equal(t, "10.52.0.10", address.Spec.Address)
	assert.Equal(t, "10.52.0.1", address.Spec.Gateway, "first usable address of the range's network; outside the range, so not checked in NetBox")
	records := f.netboxRecords()
	require.Len(t, records, 1)
	record := records[0]
	assert.Equal(t, prod, record.VRF)
	assert.Equal(t, "reserved", record.Status)
	assert.Equal(t, "vip", record.Role)
	assert.NotZero(t, record.Tenant)
	assert.Equal(t, "lb.edge.example.com", record.DNSName)
	assert.Equal(t, "k8s "+f.ns+"/lb", record.Description)
	assert.ElementsMatch(t, []string{"cluster-api-ipam", "kubernetes"}, record.Tags)
	assert.Equal(t, "4711", record.CustomFields["cost_center"])
}

func TestNetBoxOverTLSWithACABundle(t *testing.T) {
	netboxtarget.SimOnly(t, "the real NetBox of the test run is served over plain HTTP")
	f := newFixture(t)
	sim := netboxsim.NewTLS()
	t.Cleanup(sim.Close)
	sim.AddToken(f.token, true)
	sim.AddPrefixWithGateway("10.54.0.0/24", netboxsim.PrefixOptions{})
	f.createSecretData(f.ns, "netbox-tls", map[string][]byte{v1alpha1.NetboxTokenKey: []byte(f.token), v1alpha1.CABundleKey: sim.CACertPEM()})
	trusted := f.createNetboxPool("trusted", "10.54.0.0/24", func(s *v1alpha1.NetboxIPPoolSpec) {
		s.Connection = v1alpha1.NetboxConnection{URL: sim.URL(), CredentialsSecretRef: v1alpha1.SecretReference{Name: "netbox-tls"}}
	})
	untrusted := f.createNetboxPool("untrusted", "10.54.0.0/24", func(s *v1alpha1.NetboxIPPoolSpec) {
		s.Connection = v1alpha1.NetboxConnection{URL: sim.URL(), CredentialsSecretRef: v1alpha1.SecretReference{Name: "netbox"}}
	})

	f.waitPoolReady(trusted)
	cond := f.waitPoolReason(untrusted, metav1.ConditionFalse, v1alpha1.InvalidConfigurationReason)
	assert.Contains(t, cond.Message, "certificate is not trusted")
	address := f.waitBound(f.createClaim("machine", "trusted"))
	assert.Equal(t, "10.54.0.2", address.Spec.Address)
}

func TestClaimWaitsForItsPool(t *testing.T) {
	f := newFixture(t)
	f.seedNetwork("10.53.0.0/24")
	claim := f.createClaim("early", "late-pool")
	cond := f.waitClaimReason(claim, ipamv1.IPAddressClaimReadyPoolNotReadyReason)
	assert.Contains(t, cond.Message, "NetboxIPPool late-pool not found")

	f.createPool("late-pool", "10.53.0.0/24")
	f.waitBound(claim)
	got := &ipamv1.IPAddressClaim{}
	require.NoError(t, k8s.Get(f.ctx, client.ObjectKeyFromObject(claim), got))
	assert.True(t, conditions.IsTrue(got, ipamv1.IPAddressClaimReadyCondition))
}
