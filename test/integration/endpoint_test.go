package integration

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/api/v1alpha1"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/endpoint"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/reasons"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/pkg/poolkind"
)

// createPoolDescribed creates a ready pool of the fixture's system whose
// records' description (NetBox) or comment (Infoblox) renders pattern.
func (f *fixture) createPoolDescribed(name, cidr, pattern string) poolkind.Pool {
	f.t.Helper()
	f.seedNetwork(cidr)
	pool := f.sys.newPool(f.ns, name, cidr, f.secret, false)
	switch p := pool.(type) {
	case *v1alpha1.NetboxIPPool:
		p.Spec.Reservation.DescriptionPattern = pattern
	case *v1alpha1.InfobloxIPPool:
		p.Spec.Reservation.CommentPattern = pattern
	default:
		f.t.Fatalf("no pattern for %T", pool)
	}
	pool.SetLabels(f.labels())
	require.NoError(f.t, k8s.Create(f.ctx, pool))
	f.waitPoolReady(pool)
	return pool
}

// optIn sets the annotations of the control-plane endpoint's opt-in (kv:
// key, value, …) and the suite's watch-filter label on a Cluster.
func (f *fixture) optIn(kv ...string) func(*clusterv1.Cluster) {
	return func(c *clusterv1.Cluster) {
		c.Labels = f.labels()
		c.Annotations = map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			c.Annotations[kv[i]] = kv[i+1]
		}
	}
}

func (f *fixture) endpointClaim(cluster string) *ipamv1.IPAddressClaim {
	return &ipamv1.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: cluster + endpoint.ClaimSuffix}}
}

// assertNoClaim checks that the Cluster has no endpoint claim; called once
// a Warning shows its reconcile ended without creating one.
func (f *fixture) assertNoClaim(t *testing.T, cluster string) {
	t.Helper()
	err := k8s.Get(f.ctx, client.ObjectKeyFromObject(f.endpointClaim(cluster)), &ipamv1.IPAddressClaim{})
	assert.True(t, apierrors.IsNotFound(err), "the Cluster's endpoint claim exists (err %v)", err)
}

// A Cluster that opts in gets its endpoint from the pool, through a claim
// it owns and that is in the Cluster, whose record carries the Cluster's
// name. Deleting the claim while the Cluster lives keeps the VIP reserved:
// no machine claim is given it. The Cluster's deletion releases it (this
// suite runs no garbage collector, so the claim deleted by hand stands for
// the one the collector deletes; test/gc runs it), and the endpoint stays.
func TestControlPlaneEndpointFromPool(t *testing.T) {
	forEachSystem(t, func(t *testing.T, f *fixture) {
		f.createPoolDescribed("vips", "10.150.0.0/24", "{{ .MachineName }} of cluster {{ .Namespace }}/{{ .ClusterName }}")
		cluster := f.createCluster("prod", f.optIn(
			v1alpha1.ControlPlaneEndpointPoolAnnotation, f.sys.poolKind(false)+"/vips",
			v1alpha1.ControlPlaneEndpointPortAnnotation, "8443"))

		claim := f.endpointClaim(cluster.Name)
		address := f.waitBound(claim)
		require.NoError(t, k8s.Get(f.ctx, client.ObjectKeyFromObject(claim), claim))
		assert.True(t, metav1.IsControlledBy(claim, cluster), "the Cluster controls its endpoint's claim")
		assert.Equal(t, cluster.Name, claim.Spec.ClusterName)
		assert.Equal(t, cluster.Name, claim.Labels[clusterv1.ClusterNameLabel])
		assert.Equal(t, "prod-api", claim.Annotations[v1alpha1.MachineNameAnnotation])

		require.EventuallyWithT(t, func(c *assert.CollectT) {
			got := &clusterv1.Cluster{}
			require.NoError(c, k8s.Get(f.ctx, client.ObjectKeyFromObject(cluster), got))
			assert.Equal(c, clusterv1.APIEndpoint{Host: address.Spec.Address, Port: 8443}, got.Spec.ControlPlaneEndpoint)
		}, waitTimeout, pollInterval)
		f.waitEvent(f.ns, cluster.Name, endpoint.ControlPlaneEndpointSetReason)

		records := f.recordsWithMarker(f.marker(claim.Name))
		require.Len(t, records, 1)
		assert.Equal(t, address.Spec.Address, records[0].Address.Addr().String())
		assert.Equal(t, "prod-api of cluster "+f.ns+"/prod", records[0].Description, "the namespace tells same-named Clusters apart")

		require.NoError(t, k8s.Delete(f.ctx, claim))
		e := f.waitEvent(f.ns, cluster.Name, endpoint.ControlPlaneEndpointKeptReason)
		assert.Equal(t, corev1.EventTypeWarning, e.Type)
		assert.Contains(t, e.Note, address.Spec.Address)
		f.waitClaimReason(claim, reasons.AddressKeptReason)
		kept := f.recordsWithMarker(f.marker(claim.Name))
		assert.Len(t, kept, 1, "a live Cluster's VIP stays reserved when its claim is deleted")
		for _, r := range kept {
			t.Logf("%s: the endpoint's claim deleted while Cluster %s lives; its record %s (%s) is kept, marked %s", f.sys.name(), cluster.Name, r.Address, r.name(), r.Marker)
		}
		require.NoError(t, k8s.Get(f.ctx, client.ObjectKeyFromObject(address), &ipamv1.IPAddress{}), "and its IPAddress stays")
		machine := f.waitBound(f.createClaim("machine-0", "vips"))
		assert.NotEqual(t, address.Spec.Address, machine.Spec.Address, "no machine is given the VIP")
		got := &clusterv1.Cluster{}
		require.NoError(t, k8s.Get(f.ctx, client.ObjectKeyFromObject(cluster), got))
		assert.Equal(t, address.Spec.Address, got.Spec.ControlPlaneEndpoint.Host, "a running cluster's endpoint is never rewritten")

		require.NoError(t, k8s.Delete(f.ctx, cluster))
		f.waitGone(claim)
		assert.Empty(t, f.recordsWithMarker(f.marker(claim.Name)), "the VIP's record is released once its Cluster is gone")
	})
}

// A VIP picked by hand inside the pool (CAPV's quick-start asks for one) is
// reserved for the Cluster, exactly that address: no machine claim is given
// it, and the endpoint is never rewritten.
func TestControlPlaneEndpointSetByHandIsReserved(t *testing.T) {
	forEachSystem(t, func(t *testing.T, f *fixture) {
		f.seedNetwork("10.153.0.0/24")
		pool := f.createPool("vips", "10.153.0.0/24")
		f.waitPoolReady(pool)
		// The address the pool would give the next machine.
		set := clusterv1.APIEndpoint{Host: "10.153.0.2", Port: 6443}
		cluster := f.createCluster("prod", f.optIn(v1alpha1.ControlPlaneEndpointPoolAnnotation, f.sys.poolKind(false)+"/vips"),
			func(c *clusterv1.Cluster) { c.Spec.ControlPlaneEndpoint = set })

		claim := f.endpointClaim(cluster.Name)
		address := f.waitBound(claim)
		assert.Equal(t, set.Host, address.Spec.Address, "exactly the address set by hand")
		records := f.recordsWithMarker(f.marker(claim.Name))
		require.Len(t, records, 1)
		assert.Equal(t, set.Host, records[0].Address.Addr().String())
		machine := f.waitBound(f.createClaim("machine-0", "vips"))
		assert.NotEqual(t, set.Host, machine.Spec.Address, "no machine is given the VIP")
		t.Logf("%s: the hand-picked VIP %s is reserved as %s (%s), marked %s; the next machine got %s",
			f.sys.name(), set.Host, records[0].Address, records[0].name(), records[0].Marker, machine.Spec.Address)
		got := &clusterv1.Cluster{}
		require.NoError(t, k8s.Get(f.ctx, client.ObjectKeyFromObject(cluster), got))
		assert.Equal(t, set, got.Spec.ControlPlaneEndpoint)
	})
}

// A Cluster whose endpoint waits (the pool is exhausted) says so itself,
// with the claim's reason: the claim is an object the user never made.
func TestControlPlaneEndpointWaitIsSaidOnTheCluster(t *testing.T) {
	forEachSystem(t, func(t *testing.T, f *fixture) {
		// A /30: the gateway and one address, which a machine takes.
		f.seedNetwork("10.154.0.0/30")
		pool := f.createPool("vips", "10.154.0.0/30")
		f.waitPoolReady(pool)
		f.waitBound(f.createClaim("machine-0", "vips"))
		cluster := f.createCluster("prod", f.optIn(v1alpha1.ControlPlaneEndpointPoolAnnotation, f.sys.poolKind(false)+"/vips"))

		e := f.waitEvent(f.ns, cluster.Name, endpoint.ControlPlaneEndpointWaitingReason)
		assert.Equal(t, corev1.EventTypeWarning, e.Type)
		assert.Contains(t, e.Note, ipamv1.IPAddressClaimReadyPoolExhaustedReason)
		assert.Contains(t, e.Note, cluster.Name+endpoint.ClaimSuffix)
	})
}

// An endpoint a user set is never overwritten, and no address is claimed
// for it: a Warning says so.
func TestControlPlaneEndpointSetByUser(t *testing.T) {
	forEachSystem(t, func(t *testing.T, f *fixture) {
		f.seedNetwork("10.151.0.0/24")
		pool := f.createPool("vips", "10.151.0.0/24")
		f.waitPoolReady(pool)
		set := clusterv1.APIEndpoint{Host: "api.prod.example.com", Port: 443}
		cluster := f.createCluster("prod", f.optIn(v1alpha1.ControlPlaneEndpointPoolAnnotation, f.sys.poolKind(false)+"/vips"),
			func(c *clusterv1.Cluster) { c.Spec.ControlPlaneEndpoint = set })

		e := f.waitEvent(f.ns, cluster.Name, endpoint.ControlPlaneEndpointAlreadySetReason)
		assert.Equal(t, corev1.EventTypeWarning, e.Type)
		assert.Contains(t, e.Note, "api.prod.example.com")
		f.assertNoClaim(t, cluster.Name)
		got := &clusterv1.Cluster{}
		require.NoError(t, k8s.Get(f.ctx, client.ObjectKeyFromObject(cluster), got))
		assert.Equal(t, set, got.Spec.ControlPlaneEndpoint)
		assert.Empty(t, f.markedRecords(), "nothing was reserved")
	})
}

// A ClusterClass cluster gets the address in the variable its opt-in
// names, as a JSON string, when its ClusterClass defines it; otherwise a
// Warning, and nothing is claimed.
func TestControlPlaneEndpointVariable(t *testing.T) {
	f := newFixture(t)
	f.seedNetwork("10.152.0.0/24")
	pool := f.createPool("vips", "10.152.0.0/24")
	f.waitPoolReady(pool)
	class := f.createClusterClass("quick-start", nil)
	topology := func(c *clusterv1.Cluster) {
		c.Spec.Topology = clusterv1.Topology{ClassRef: clusterv1.ClusterClassRef{Name: class.Name}, Version: "v1.33.0"}
	}

	cluster := f.createCluster("prod", f.optIn(v1alpha1.ControlPlaneEndpointPoolAnnotation, "NetboxIPPool/vips",
		v1alpha1.ControlPlaneEndpointVariableAnnotation, "controlPlaneIpAddr"), topology)
	address := f.waitBound(f.endpointClaim(cluster.Name))
	want, err := json.Marshal(address.Spec.Address)
	require.NoError(t, err)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		got := &clusterv1.Cluster{}
		require.NoError(c, k8s.Get(f.ctx, client.ObjectKeyFromObject(cluster), got))
		assert.Equal(c, []clusterv1.ClusterVariable{{Name: "controlPlaneIpAddr", Value: apiextensionsv1.JSON{Raw: want}}},
			got.Spec.Topology.Variables)
		assert.Empty(c, got.Spec.ControlPlaneEndpoint.Host, "only the variable is written")
	}, waitTimeout, pollInterval)

	undefined := f.createCluster("other", f.optIn(v1alpha1.ControlPlaneEndpointPoolAnnotation, "NetboxIPPool/vips",
		v1alpha1.ControlPlaneEndpointVariableAnnotation, "vip"), topology)
	e := f.waitEvent(f.ns, undefined.Name, endpoint.ControlPlaneEndpointVariableUndefinedReason)
	assert.Contains(t, e.Note, "defines no variable vip")
	f.assertNoClaim(t, undefined.Name)

	classless := f.createCluster("classless", f.optIn(v1alpha1.ControlPlaneEndpointPoolAnnotation, "NetboxIPPool/vips",
		v1alpha1.ControlPlaneEndpointVariableAnnotation, "controlPlaneIpAddr"), func(c *clusterv1.Cluster) {
		c.Spec.Topology = clusterv1.Topology{ClassRef: clusterv1.ClusterClassRef{Name: "missing"}, Version: "v1.33.0"}
	})
	e = f.waitEvent(f.ns, classless.Name, endpoint.ControlPlaneEndpointVariableUndefinedReason)
	assert.Contains(t, e.Note, "ClusterClass "+f.ns+"/missing does not exist")
	f.assertNoClaim(t, classless.Name)
}

// Bad input gives a Warning that says what is wrong, and no claim.
func TestControlPlaneEndpointBadInput(t *testing.T) {
	f := newFixture(t)
	f.seedNetwork("10.153.0.0/24")
	pool := f.createPool("vips", "10.153.0.0/24")
	f.waitPoolReady(pool)
	tests := []struct {
		cluster     string
		annotations []string
		reason      string
		note        string
	}{
		{"malformed", []string{v1alpha1.ControlPlaneEndpointPoolAnnotation, "vips"},
			endpoint.InvalidControlPlaneEndpointConfigReason, "want <Kind>/<name>"},
		{"port", []string{v1alpha1.ControlPlaneEndpointPoolAnnotation, "NetboxIPPool/vips", v1alpha1.ControlPlaneEndpointPortAnnotation, "70000"},
			endpoint.InvalidControlPlaneEndpointConfigReason, "from 1 to 65535"},
		{"no-topology", []string{v1alpha1.ControlPlaneEndpointPoolAnnotation, "NetboxIPPool/vips", v1alpha1.ControlPlaneEndpointVariableAnnotation, "vip"},
			endpoint.InvalidControlPlaneEndpointConfigReason, "has no spec.topology"},
		{"missing-pool", []string{v1alpha1.ControlPlaneEndpointPoolAnnotation, "NetboxIPPool/missing"},
			endpoint.ControlPlaneEndpointPoolNotFoundReason, "does not exist"},
		{"unknown-kind", []string{v1alpha1.ControlPlaneEndpointPoolAnnotation, "NoSuchIPPool/vips"},
			endpoint.ControlPlaneEndpointPoolNotFoundReason, "serves no pool kind NoSuchIPPool.ipam-bridge.github.io"},
	}
	for _, tt := range tests {
		t.Run(tt.cluster, func(t *testing.T) {
			cluster := f.createCluster(tt.cluster, f.optIn(tt.annotations...))
			e := f.waitEvent(f.ns, cluster.Name, tt.reason)
			assert.Equal(t, corev1.EventTypeWarning, e.Type)
			assert.Contains(t, e.Note, tt.note)
			f.assertNoClaim(t, cluster.Name)
		})
	}
	assert.Empty(t, f.markedRecords(), "nothing was reserved")
}

// A paused Cluster gets nothing claimed or written until it is unpaused.
func TestControlPlaneEndpointPaused(t *testing.T) {
	f := newFixture(t)
	f.seedNetwork("10.154.0.0/24")
	pool := f.createPool("vips", "10.154.0.0/24")
	f.waitPoolReady(pool)
	cluster := f.createCluster("prod", f.optIn(v1alpha1.ControlPlaneEndpointPoolAnnotation, "NetboxIPPool/vips"), paused)
	// The reconciler, one worker taking Clusters in turn, has looked at the
	// paused Cluster by the time it reports one created after it.
	later := f.createCluster("later", f.optIn(v1alpha1.ControlPlaneEndpointPoolAnnotation, "later"))
	f.waitEvent(f.ns, later.Name, endpoint.InvalidControlPlaneEndpointConfigReason)
	f.assertNoClaim(t, cluster.Name)

	f.update(cluster, func() { cluster.Spec.Paused = ptr.To(false) })
	address := f.waitBound(f.endpointClaim(cluster.Name))
	f.waitEndpointHost(cluster, address.Spec.Address)
}

// A pool created after the Cluster named it is noticed at once: its
// creation brings the Cluster back, not a recheck a minute later (longer
// than waitTimeout).
func TestControlPlaneEndpointPoolCreatedAfterTheCluster(t *testing.T) {
	forEachSystem(t, func(t *testing.T, f *fixture) {
		cluster := f.createCluster("prod", f.optIn(v1alpha1.ControlPlaneEndpointPoolAnnotation, f.sys.poolKind(false)+"/later"))
		e := f.waitEvent(f.ns, cluster.Name, endpoint.ControlPlaneEndpointPoolNotFoundReason)
		assert.Contains(t, e.Note, "does not exist")
		f.assertNoClaim(t, cluster.Name)

		f.seedNetwork("10.155.0.0/24")
		f.createPool("later", "10.155.0.0/24")
		address := f.waitBound(f.endpointClaim(cluster.Name))
		f.waitEndpointHost(cluster, address.Spec.Address)
	})
}

// A claim of the endpoint's name that is not the Cluster's (made by hand,
// or by another tool) is left alone: the Cluster says so, nothing is
// claimed, and the claim gets neither an owner nor the provider's
// finalizer.
func TestControlPlaneEndpointClaimOfAnotherIsLeftAlone(t *testing.T) {
	f := newFixture(t)
	f.seedNetwork("10.156.0.0/24")
	pool := f.createPool("vips", "10.156.0.0/24")
	f.waitPoolReady(pool)
	other := f.createClaim("prod"+endpoint.ClaimSuffix, "vips")
	otherAddress := f.waitBound(other)

	cluster := f.createCluster("prod", f.optIn(v1alpha1.ControlPlaneEndpointPoolAnnotation, "NetboxIPPool/vips"))
	e := f.waitEvent(f.ns, cluster.Name, endpoint.ControlPlaneEndpointClaimConflictReason)
	assert.Equal(t, corev1.EventTypeWarning, e.Type)
	assert.Contains(t, e.Note, other.Name)

	got := &ipamv1.IPAddressClaim{}
	require.NoError(t, k8s.Get(f.ctx, client.ObjectKeyFromObject(other), got))
	assert.Empty(t, got.OwnerReferences, "the provider makes no other's claim the Cluster's")
	assert.NotContains(t, got.Finalizers, v1alpha1.KeepAddressFinalizer)
	gotCluster := &clusterv1.Cluster{}
	require.NoError(t, k8s.Get(f.ctx, client.ObjectKeyFromObject(cluster), gotCluster))
	assert.Empty(t, gotCluster.Spec.ControlPlaneEndpoint.Host, "another's address is not written into the Cluster")
	assert.Len(t, f.markedRecords(), 1, "only the other claim's record: nothing was reserved for the Cluster")
	assert.NotEmpty(t, otherAddress.Spec.Address)
}

// A fleet opts in once, on its ClusterClass: every Cluster made from it
// gets its VIP in the class's variable, a Cluster's own annotations win,
// and annotating the class later reaches the Clusters it already has.
func TestControlPlaneEndpointOptInOnTheClusterClass(t *testing.T) {
	f := newFixture(t)
	f.seedNetwork("10.157.0.0/24")
	f.waitPoolReady(f.createPool("vips", "10.157.0.0/24"))
	f.seedNetwork("10.158.0.0/24")
	f.waitPoolReady(f.createPool("other", "10.158.0.0/24"))
	optIn := map[string]string{
		v1alpha1.ControlPlaneEndpointPoolAnnotation:     "NetboxIPPool/vips",
		v1alpha1.ControlPlaneEndpointVariableAnnotation: "controlPlaneIpAddr",
	}
	fleet := f.createClusterClass("fleet", optIn)
	ofClass := func(class string) func(*clusterv1.Cluster) {
		return func(c *clusterv1.Cluster) {
			c.Labels = f.labels()
			c.Spec.Topology = clusterv1.Topology{ClassRef: clusterv1.ClusterClassRef{Name: class}, Version: "v1.33.0"}
		}
	}
	variable := func(cluster *clusterv1.Cluster) func() string {
		return func() string {
			got := &clusterv1.Cluster{}
			if err := k8s.Get(f.ctx, client.ObjectKeyFromObject(cluster), got); err != nil {
				return err.Error()
			}
			for _, v := range got.Spec.Topology.Variables {
				if v.Name == "controlPlaneIpAddr" {
					var s string
					_ = json.Unmarshal(v.Value.Raw, &s)
					return s
				}
			}
			return ""
		}
	}

	a := f.createCluster("a", ofClass(fleet.Name))
	addressA := f.waitBound(f.endpointClaim(a.Name))
	assert.Equal(t, "vips", f.claimPool(f.endpointClaim(a.Name)), "the class's pool")
	require.Eventually(t, func() bool { return variable(a)() == addressA.Spec.Address }, waitTimeout, pollInterval,
		"the class's variable gets the VIP")

	// A Cluster that carries an opt-in of its own uses it, whole.
	b := f.createCluster("b", ofClass(fleet.Name), func(c *clusterv1.Cluster) {
		c.Annotations = map[string]string{v1alpha1.ControlPlaneEndpointPoolAnnotation: "NetboxIPPool/other"}
	})
	addressB := f.waitBound(f.endpointClaim(b.Name))
	assert.Equal(t, "other", f.claimPool(f.endpointClaim(b.Name)), "the Cluster's own pool wins")
	f.waitEndpointHost(b, addressB.Spec.Address)
	assert.Empty(t, variable(b)(), "not the class's variable: the Cluster's own opt-in names none")

	late := f.createClusterClass("late", nil)
	c := f.createCluster("c", ofClass(late.Name))
	// A Cluster of a class without the opt-in is not the provider's.
	f.createCluster("marker", f.optIn(v1alpha1.ControlPlaneEndpointPoolAnnotation, "invalid"))
	f.waitEvent(f.ns, "marker", endpoint.InvalidControlPlaneEndpointConfigReason)
	f.assertNoClaim(t, c.Name)
	f.update(late, func() { late.Annotations = optIn })
	addressC := f.waitBound(f.endpointClaim(c.Name))
	require.Eventually(t, func() bool { return variable(c)() == addressC.Spec.Address }, waitTimeout, pollInterval,
		"annotating the class reaches the Clusters it has")
}

// claimPool is the name of the pool a claim names.
func (f *fixture) claimPool(claim *ipamv1.IPAddressClaim) string {
	f.t.Helper()
	got := &ipamv1.IPAddressClaim{}
	require.NoError(f.t, k8s.Get(f.ctx, client.ObjectKeyFromObject(claim), got))
	return got.Spec.PoolRef.Name
}

// reference is the record's reference as the backend gives it
// (backends.Record.Reference), which an IPAddress's record note holds.
func (r record) reference() string {
	if r.ref != "" {
		return r.ref
	}
	return fmt.Sprintf("ipam/ip-addresses/%d", r.id)
}

// name is how the IPAM system names a record: its reference, or NetBox's
// IP address ID.
func (r record) name() string {
	if r.ref != "" {
		return r.ref
	}
	return fmt.Sprintf("IP address %d", r.id)
}

// A VIP picked by hand that another record already holds is reserved for
// no one: the Cluster says which record holds it, nothing is reserved,
// and the endpoint is never rewritten.
func TestControlPlaneEndpointSetByHandHeldByAnotherIsSaid(t *testing.T) {
	forEachSystem(t, func(t *testing.T, f *fixture) {
		f.seedNetwork("10.160.0.0/24")
		pool := f.createPool("vips", "10.160.0.0/24")
		f.waitPoolReady(pool)
		set := clusterv1.APIEndpoint{Host: "10.160.0.9", Port: 6443}
		// Another management cluster's record, say.
		holder := "someone-else/" + f.ns + "/vip"
		f.sys.reserveForeign(netip.MustParsePrefix("10.160.0.9/24"), holder)
		cluster := f.createCluster("prod", f.optIn(v1alpha1.ControlPlaneEndpointPoolAnnotation, f.sys.poolKind(false)+"/vips"),
			func(c *clusterv1.Cluster) { c.Spec.ControlPlaneEndpoint = set })

		e := f.waitEvent(f.ns, cluster.Name, endpoint.ControlPlaneEndpointWaitingReason)
		assert.Equal(t, corev1.EventTypeWarning, e.Type)
		assert.Contains(t, e.Note, reasons.RequestedAddressUnavailableReason)
		assert.Contains(t, e.Note, holder, "the Cluster names the record that holds its VIP")
		assert.Empty(t, f.recordsWithMarker(f.marker(cluster.Name+endpoint.ClaimSuffix)), "nothing was reserved")
		holders := f.recordsWithMarker(holder)
		require.Len(t, holders, 1, "the holder's record is left as it is")
		got := &clusterv1.Cluster{}
		require.NoError(t, k8s.Get(f.ctx, client.ObjectKeyFromObject(cluster), got))
		assert.Equal(t, set, got.Spec.ControlPlaneEndpoint, "the endpoint is never rewritten")
	})
}

// createClusterClass creates a ClusterClass, with annotations, that defines
// the string variable controlPlaneIpAddr, as CAPV's quick-start does.
func (f *fixture) createClusterClass(name string, annotations map[string]string) *clusterv1.ClusterClass {
	f.t.Helper()
	class := &clusterv1.ClusterClass{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: name, Annotations: annotations},
		Spec: clusterv1.ClusterClassSpec{
			Infrastructure: clusterv1.InfrastructureClass{TemplateRef: clusterv1.ClusterClassTemplateReference{
				APIVersion: "infrastructure.cluster.x-k8s.io/v1beta1", Kind: "VSphereClusterTemplate", Name: name}},
			ControlPlane: clusterv1.ControlPlaneClass{TemplateRef: clusterv1.ClusterClassTemplateReference{
				APIVersion: "controlplane.cluster.x-k8s.io/v1beta2", Kind: "KubeadmControlPlaneTemplate", Name: name}},
			Variables: []clusterv1.ClusterClassVariable{{Name: "controlPlaneIpAddr", Required: ptr.To(true),
				Schema: clusterv1.VariableSchema{OpenAPIV3Schema: clusterv1.JSONSchemaProps{Type: "string"}}}},
		},
	}
	require.NoError(f.t, k8s.Create(f.ctx, class))
	return class
}

// waitEndpointHost waits for the Cluster's spec.controlPlaneEndpoint.host
// to be host.
func (f *fixture) waitEndpointHost(cluster *clusterv1.Cluster, host string) {
	f.t.Helper()
	require.EventuallyWithT(f.t, func(c *assert.CollectT) {
		got := &clusterv1.Cluster{}
		require.NoError(c, k8s.Get(f.ctx, client.ObjectKeyFromObject(cluster), got))
		assert.Equal(c, host, got.Spec.ControlPlaneEndpoint.Host)
	}, waitTimeout, pollInterval)
}

// A Cluster whose opt-in is taken off (its annotation, or its class's)
// claims nothing more, but the VIP it already has stays reserved while it
// names it: deleting the claim then keeps the address.
func TestControlPlaneEndpointOptInRemovedKeepsTheVIP(t *testing.T) {
	f := newFixture(t)
	f.seedNetwork("10.161.0.0/24")
	f.waitPoolReady(f.createPool("vips", "10.161.0.0/24"))
	cluster := f.createCluster("prod", f.optIn(v1alpha1.ControlPlaneEndpointPoolAnnotation, "NetboxIPPool/vips"))
	claim := f.endpointClaim(cluster.Name)
	address := f.waitBound(claim)
	f.waitEndpointHost(cluster, address.Spec.Address)

	f.update(cluster, func() { delete(cluster.Annotations, v1alpha1.ControlPlaneEndpointPoolAnnotation) })
	require.NoError(t, k8s.Delete(f.ctx, claim))
	f.waitClaimReason(claim, reasons.AddressKeptReason)
	f.waitEvent(f.ns, cluster.Name, endpoint.ControlPlaneEndpointKeptReason)
	assert.Len(t, f.recordsWithMarker(f.marker(claim.Name)), 1, "the VIP the Cluster still names stays reserved")
}
