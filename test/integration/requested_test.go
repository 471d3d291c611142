package integration

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/api/v1alpha1"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends/netbox"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/reasons"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/reservation"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/pkg/poolkind"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/netboxsim"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/wapisim"
)

// requesting annotates a claim with the address it requests.
func requesting(addr string) claimOption {
	return func(c *ipamv1.IPAddressClaim) {
		if c.Annotations == nil {
			c.Annotations = map[string]string{}
		}
		c.Annotations[v1alpha1.RequestedAddressAnnotation] = addr
	}
}

// createPoolWithPreAllocations creates a namespaced pool of the fixture's
// system over cidr that pre-allocates addresses to claims by name.
func (f *fixture) createPoolWithPreAllocations(name, cidr string, pre v1alpha1.PreAllocations) poolkind.Pool {
	f.t.Helper()
	pool := f.sys.newPool(f.ns, name, cidr, f.secret, false)
	switch p := pool.(type) {
	case *v1alpha1.NetboxIPPool:
		p.Spec.PreAllocations = pre
	case *v1alpha1.InfobloxIPPool:
		p.Spec.PreAllocations = pre
	}
	pool.SetLabels(f.labels())
	require.NoError(f.t, k8s.Create(f.ctx, pool))
	return pool
}

// requestedCreates makes the system apply the next creation of a record
// at a requested address with fault kind: losing its answer, or slowing it
// down by latency.
func (f *fixture) requestedCreates(lose bool, latency time.Duration) {
	f.t.Helper()
	switch s := f.sys.(type) {
	case *netboxSystem:
		fault := netboxsim.Fault{Kind: netboxsim.FaultLatency, Latency: latency, Method: "POST", PathContains: "/api/ipam/ip-addresses/"}
		if lose {
			fault.Kind = netboxsim.FaultLoseResponse
		}
		s.target.InjectFault(fault)
	case *infobloxSystem:
		fault := wapisim.Fault{Kind: wapisim.FaultLatency, Latency: latency, Method: "POST", PathContains: "fixedaddress"}
		if lose {
			fault.Kind = wapisim.FaultLoseResponse
		}
		s.sim.InjectFault(fault)
	default:
		f.t.Fatalf("no faults for %s", f.sys.name())
	}
}

// TestRequestedAddress: a claim that requests an address, by its
// annotation or by its pool's pre-allocations, is bound to exactly that
// address, or stays unbound with RequestedAddressUnavailable, a message
// naming whoever holds the address, and an event; it never gets another.
// Once bound it is a claim like any other: its record carries its marker,
// and deleting it releases the record.
func TestRequestedAddress(t *testing.T) {
	for _, tc := range []struct {
		name string
		// pre are the pool's pre-allocations.
		pre v1alpha1.PreAllocations
		// setUp prepares the IPAM system and the cluster; it returns the
		// options of the requesting claim "wants".
		setUp func(f *fixture, pool poolkind.Pool) []claimOption
		// bound is the address the claim gets; "" when it gets none.
		bound string
		// says is what the message of a claim that gets none says.
		says []string
	}{
		{name: "a free address", bound: "10.160.0.50",
			setUp: func(f *fixture, _ poolkind.Pool) []claimOption { return []claimOption{requesting("10.160.0.50")} }},
		{name: "the last usable address", bound: "10.160.0.254",
			setUp: func(f *fixture, _ poolkind.Pool) []claimOption { return []claimOption{requesting("10.160.0.254")} }},
		{name: "a pre-allocation", pre: v1alpha1.PreAllocations{"wants": "10.160.0.77"}, bound: "10.160.0.77",
			setUp: func(*fixture, poolkind.Pool) []claimOption { return nil }},
		{name: "a pre-allocation for the namespace, over the name alone", bound: "10.160.0.78",
			pre:   v1alpha1.PreAllocations{"wants": "10.160.0.79", namespaceKey + "/wants": "10.160.0.78"},
			setUp: func(*fixture, poolkind.Pool) []claimOption { return nil }},
		{name: "a pre-allocation the annotation agrees with", pre: v1alpha1.PreAllocations{"wants": "10.160.0.80"}, bound: "10.160.0.80",
			setUp: func(*fixture, poolkind.Pool) []claimOption { return []claimOption{requesting("10.160.0.80")} }},
		{name: "a pre-allocation the annotation contradicts", pre: v1alpha1.PreAllocations{"wants": "10.160.0.81"},
			setUp: func(*fixture, poolkind.Pool) []claimOption { return []claimOption{requesting("10.160.0.82")} },
			says:  []string{"10.160.0.81", "10.160.0.82", "the claim gets neither"}},
		{name: "held by a record without a marker",
			setUp: func(f *fixture, _ poolkind.Pool) []claimOption {
				f.sys.holdGateway(netip.MustParseAddr("10.160.0.60"))
				return []claimOption{requesting("10.160.0.60")}
			},
			says: []string{"10.160.0.60", "held by", "carries no marker", "gets no other address"}},
		{name: "held by another claim's record",
			setUp: func(f *fixture, pool poolkind.Pool) []claimOption {
				holder := f.waitBound(f.createClaim("holder", pool.GetName()))
				return []claimOption{requesting(holder.Spec.Address)}
			},
			says: []string{"held by", "/holder"}},
		{name: "held by another claim's IPAddress, its record deleted",
			setUp: func(f *fixture, pool poolkind.Pool) []claimOption {
				holder := f.waitBound(f.createClaim("holder", pool.GetName()))
				for _, r := range f.recordsWithMarker(f.marker("holder")) {
					f.sys.deleteRecord(r)
				}
				return []claimOption{requesting(holder.Spec.Address)}
			},
			// The in-cluster guard names the IPAddress; should the audit
			// have restored the record first, the record names the claim.
			says: []string{"holder", "gets no other address"}},
		{name: "outside the sources",
			setUp: func(*fixture, poolkind.Pool) []claimOption { return []claimOption{requesting("10.169.9.9")} },
			says:  []string{"10.169.9.9", "none of the pool's sources"}},
		{name: "the gateway",
			setUp: func(*fixture, poolkind.Pool) []claimOption { return []claimOption{requesting("10.160.0.1")} },
			says:  []string{"10.160.0.1", "gateway"}},
		{name: "not an address",
			setUp: func(*fixture, poolkind.Pool) []claimOption { return []claimOption{requesting("10.160.0.300")} },
			says:  []string{"10.160.0.300", "not an IPv4 or IPv6 address"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			forEachSystem(t, func(t *testing.T, f *fixture) {
				f.seedNetwork("10.160.0.0/24")
				pre := v1alpha1.PreAllocations{}
				for k, v := range tc.pre {
					pre[strings.Replace(k, namespaceKey, f.ns, 1)] = v
				}
				pool := f.createPoolWithPreAllocations("pool", "10.160.0.0/24", pre)
				f.waitPoolReady(pool)
				claim := f.createClaim("wants", pool.GetName(), tc.setUp(f, pool)...)

				if tc.bound == "" {
					cond := f.waitClaimReason(claim, reasons.RequestedAddressUnavailableReason)
					assert.Equal(t, metav1.ConditionFalse, cond.Status)
					t.Logf("%s", cond.Message)
					for _, s := range tc.says {
						assert.Contains(t, cond.Message, s)
					}
					e := f.waitEvent(f.ns, claim.Name, reasons.RequestedAddressUnavailableReason)
					assert.Contains(t, e.Note, tc.says[0])
					assert.Empty(t, f.recordsWithMarker(f.marker(claim.Name)), "nothing is reserved for the claim")
					err := k8s.Get(f.ctx, client.ObjectKeyFromObject(claim), &ipamv1.IPAddress{})
					assert.True(t, client.IgnoreNotFound(err) == nil && err != nil, "the claim has no IPAddress")
					return
				}
				address := f.waitBound(claim)
				assert.Equal(t, tc.bound, address.Spec.Address)
				assert.Equal(t, ptr.To[int32](24), address.Spec.Prefix)
				assert.Equal(t, "10.160.0.1", address.Spec.Gateway)
				records := f.recordsWithMarker(f.marker(claim.Name))
				require.Len(t, records, 1)
				assert.Equal(t, tc.bound, records[0].Address.Addr().String())

				f.deleteClaim(claim)
				assert.Empty(t, f.recordsWithMarker(f.marker(claim.Name)), "released like any other")
				assert.False(t, f.sys.holds(netip.MustParseAddr(tc.bound)), "the address is free again")
			})
		})
	}
}

// namespaceKey stands for the test's namespace in a pre-allocation's key.
const namespaceKey = "$namespace"

// TestRequestedAddressSurvivesALostAnswerAndARestart: the create of a
// requested address whose answer is lost is resent, and a manager that
// stops while the create is on the wire leaves it to the next one: either
// way the claim is bound to its address with one record, found by its
// marker, never a second.
func TestRequestedAddressSurvivesALostAnswerAndARestart(t *testing.T) {
	for _, tc := range []struct {
		name    string
		restart bool
		// want differs between the cases: a real NetBox is shared by them.
		want string
	}{
		{name: "a lost answer", want: "10.161.0.40"},
		{name: "a manager restart", restart: true, want: "10.161.0.41"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			forEachSystem(t, func(t *testing.T, f *fixture) {
				want := tc.want
				f.seedNetwork("10.161.0.0/24")
				if tc.restart {
					// A manager of the test's own, to stop.
					f.filter = "requested-" + f.ns
				}
				pool := f.createPool("pool", "10.161.0.0/24")
				stop := func() {}
				if tc.restart {
					ctx, cancel := context.WithCancel(f.ctx)
					done, err := startManager(ctx, f.filter, "", nil)
					require.NoError(t, err)
					stop = func() {
						cancel()
						select {
						case <-done:
						case <-time.After(waitTimeout):
							t.Fatal("the manager did not stop")
						}
					}
				}
				f.waitPoolReady(pool)

				const slow = 2 * time.Second
				f.requestedCreates(!tc.restart, slow)
				claim := f.createClaim("vip", pool.GetName(), requesting(want))
				if tc.restart {
					require.EventuallyWithT(t, func(c *assert.CollectT) {
						got := &ipamv1.IPAddressClaim{}
						require.NoError(c, k8s.Get(f.ctx, client.ObjectKeyFromObject(claim), got))
						assert.True(c, controllerutil.ContainsFinalizer(got, reservation.ClaimFinalizer))
					}, waitTimeout, pollInterval)
					time.Sleep(slow / 4)
					stop()
					err := k8s.Get(f.ctx, client.ObjectKeyFromObject(claim), &ipamv1.IPAddress{})
					require.True(t, client.IgnoreNotFound(err) == nil && err != nil, "the first manager wrote no IPAddress")
					// The abandoned create completes in the IPAM system.
					require.Eventually(t, func() bool { return len(f.recordsWithMarker(f.marker(claim.Name))) == 1 }, waitTimeout, pollInterval)
					_, err = startManager(f.ctx, f.filter, "", nil)
					require.NoError(t, err)
				}

				address := f.waitBound(claim)
				assert.Equal(t, want, address.Spec.Address)
				records := f.markedRecords()
				require.Len(t, records, 1, "one record")
				assert.Equal(t, want, records[0].Address.Addr().String())
				assert.Equal(t, f.marker(claim.Name), records[0].Marker)
				f.deleteClaim(claim)
				assert.Empty(t, f.markedRecords(), "released")
			})
		})
	}
}

// TestRequestedAddressOfABoundClaimIsRebuiltFromItsMarker: a bound claim
// whose IPAddress is deleted gets it back at the same address, from its
// record, as any claim does; and a claim whose IPAM record was reserved
// before it requested another address (say, an annotation added while the
// claim waited) releases that record and takes the address it requests.
func TestRequestedAddressOfABoundClaimIsRebuiltFromItsMarker(t *testing.T) {
	forEachSystem(t, func(t *testing.T, f *fixture) {
		f.seedNetwork("10.162.0.0/24")
		pool := f.createPool("pool", "10.162.0.0/24")
		f.waitPoolReady(pool)

		vip := f.createClaim("vip", pool.GetName(), requesting("10.162.0.30"))
		first := f.waitBound(vip)
		require.NoError(t, k8s.Delete(f.ctx, first))
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			again := &ipamv1.IPAddress{}
			require.NoError(c, k8s.Get(f.ctx, client.ObjectKeyFromObject(vip), again))
			assert.NotEqual(c, first.UID, again.UID, "the IPAddress is written again")
			assert.Equal(c, "10.162.0.30", again.Spec.Address)
		}, waitTimeout, pollInterval)
		require.Len(t, f.recordsWithMarker(f.marker(vip.Name)), 1)

		// A record made for a claim before it requested its address.
		switch s := f.sys.(type) {
		case *netboxSystem:
			// The pool made the tag and the marker field.
			s.target.AddIPAddress("10.162.0.90/24", netboxsim.IPOptions{
				Tags: []string{netbox.DefaultTag}, CustomFields: map[string]any{netbox.DefaultMarkerField: f.marker("late")}})
		default:
			f.sys.reserveForeign(netip.MustParsePrefix("10.162.0.90/24"), f.marker("late"))
		}
		late := f.createClaim("late", pool.GetName(), requesting("10.162.0.31"))
		assert.Equal(t, "10.162.0.31", f.waitBound(late).Spec.Address)
		records := f.recordsWithMarker(f.marker(late.Name))
		require.Len(t, records, 1, "the earlier record was released")
		assert.Equal(t, "10.162.0.31", records[0].Address.Addr().String())

		f.deleteClaim(vip)
		f.deleteClaim(late)
		assert.Empty(t, f.markedRecords(), "both released")
	})
}

// TestPreAllocationsAreValidatedByTheAPIServer: a pool's pre-allocations
// must be addresses, lie in one of its sources where the spec says where
// they are (a prefix's or network's CIDR, a range's family), differ from
// each other and from the gateway.
func TestPreAllocationsAreValidatedByTheAPIServer(t *testing.T) {
	f := newFixture(t)
	netboxSpec := func(sources ...v1alpha1.NetboxAddressSource) v1alpha1.NetboxIPPoolSpec {
		s := f.poolSpec("10.163.0.0/24")
		if len(sources) > 0 {
			s.Sources = sources
		}
		return s
	}
	infobloxSpec := func(sources ...v1alpha1.InfobloxAddressSource) v1alpha1.InfobloxIPPoolSpec {
		return v1alpha1.InfobloxIPPoolSpec{
			Connection: v1alpha1.InfobloxConnection{Host: "gm.example.com", CredentialsSecretRef: v1alpha1.SecretReference{Name: "infoblox"}},
			Sources:    sources,
		}
	}
	network := v1alpha1.InfobloxAddressSource{Network: &v1alpha1.InfobloxNetworkSource{CIDR: "10.163.0.0/24"}}
	v6Range := v1alpha1.InfobloxAddressSource{Range: &v1alpha1.InfobloxRangeSource{Start: "2001:db8:163::10", End: "2001:db8:163::20"}}
	for i, tc := range []struct {
		name string
		pool client.Object
		// message is the refusal; "" when the pool is accepted.
		message string
	}{
		{name: "NetBox: in the prefix", pool: &v1alpha1.NetboxIPPool{Spec: func() v1alpha1.NetboxIPPoolSpec {
			s := netboxSpec()
			s.PreAllocations = v1alpha1.PreAllocations{"vip": "10.163.0.10", "ns/other": "10.163.0.11"}
			return s
		}()}},
		{name: "NetBox: a prefix given by id is checked later", pool: &v1alpha1.NetboxIPPool{Spec: func() v1alpha1.NetboxIPPoolSpec {
			s := netboxSpec(v1alpha1.NetboxAddressSource{Prefix: &v1alpha1.NetboxPrefixSource{ID: ptr.To[int32](7)}})
			s.PreAllocations = v1alpha1.PreAllocations{"vip": "192.0.2.10"}
			return s
		}()}},
		{name: "NetBox: a range of the family", pool: &v1alpha1.GlobalNetboxIPPool{Spec: func() v1alpha1.NetboxIPPoolSpec {
			s := netboxSpec(v1alpha1.NetboxAddressSource{IPRange: &v1alpha1.NetboxIPRangeSource{Start: "10.163.1.10", End: "10.163.1.20"}})
			s.PreAllocations = v1alpha1.PreAllocations{"vip": "10.163.1.15"}
			return s
		}()}},
		{name: "NetBox: not an address", pool: &v1alpha1.NetboxIPPool{Spec: func() v1alpha1.NetboxIPPoolSpec {
			s := netboxSpec()
			s.PreAllocations = v1alpha1.PreAllocations{"vip": "10.163.0.10/24"}
			return s
		}()}, message: "must be an IPv4 or IPv6 address without prefix length"},
		{name: "NetBox: outside the prefix", pool: &v1alpha1.NetboxIPPool{Spec: func() v1alpha1.NetboxIPPoolSpec {
			s := netboxSpec()
			s.PreAllocations = v1alpha1.PreAllocations{"vip": "10.163.9.10"}
			return s
		}()}, message: "must lie in one of the sources"},
		{name: "NetBox: of another family than the range", pool: &v1alpha1.NetboxIPPool{Spec: func() v1alpha1.NetboxIPPoolSpec {
			s := netboxSpec(v1alpha1.NetboxAddressSource{IPRange: &v1alpha1.NetboxIPRangeSource{Start: "10.163.1.10", End: "10.163.1.20"}})
			s.PreAllocations = v1alpha1.PreAllocations{"vip": "2001:db8::10"}
			return s
		}()}, message: "must lie in one of the sources"},
		{name: "NetBox: the gateway", pool: &v1alpha1.NetboxIPPool{Spec: func() v1alpha1.NetboxIPPoolSpec {
			s := netboxSpec()
			s.Gateway.Address = "10.163.0.254"
			s.PreAllocations = v1alpha1.PreAllocations{"vip": "10.163.0.254"}
			return s
		}()}, message: "cannot be the gateway"},
		{name: "NetBox: one address twice", pool: &v1alpha1.NetboxIPPool{Spec: func() v1alpha1.NetboxIPPoolSpec {
			s := netboxSpec()
			s.PreAllocations = v1alpha1.PreAllocations{"vip": "10.163.0.10", "other": "10.163.0.10"}
			return s
		}()}, message: "cannot request the same address"},
		{name: "Infoblox: in the network and the range", pool: &v1alpha1.InfobloxIPPool{Spec: func() v1alpha1.InfobloxIPPoolSpec {
			s := infobloxSpec(network, v6Range)
			s.PreAllocations = v1alpha1.PreAllocations{"vip": "10.163.0.10", "vip6": "2001:db8:163::15"}
			return s
		}()}},
		{name: "Infoblox: outside the network", pool: &v1alpha1.GlobalInfobloxIPPool{Spec: func() v1alpha1.InfobloxIPPoolSpec {
			s := infobloxSpec(network)
			s.PreAllocations = v1alpha1.PreAllocations{"vip": "10.164.0.10"}
			return s
		}()}, message: "must lie in one of the sources"},
		{name: "Infoblox: not an address", pool: &v1alpha1.InfobloxIPPool{Spec: func() v1alpha1.InfobloxIPPoolSpec {
			s := infobloxSpec(network)
			s.PreAllocations = v1alpha1.PreAllocations{"vip": "vip.example.com"}
			return s
		}()}, message: "must be an IPv4 or IPv6 address"},
		{name: "Infoblox: the gateway", pool: &v1alpha1.InfobloxIPPool{Spec: func() v1alpha1.InfobloxIPPoolSpec {
			s := infobloxSpec(network)
			s.Gateway.Address = "10.163.0.1"
			s.PreAllocations = v1alpha1.PreAllocations{"vip": "10.163.0.1"}
			return s
		}()}, message: "cannot be the gateway"},
		{name: "Infoblox: one address twice, written two ways", pool: &v1alpha1.InfobloxIPPool{Spec: func() v1alpha1.InfobloxIPPoolSpec {
			s := infobloxSpec(v6Range)
			s.PreAllocations = v1alpha1.PreAllocations{"vip": "2001:db8:163::15", "other": "2001:DB8:163:0::15"}
			return s
		}()}, message: "cannot request the same address"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.pool.SetName(fmt.Sprintf("pre-%s-%d", f.ns, i))
			// Namespaced and Global twins share the spec and its rules.
			f.assertAdmitted(t, tc.pool, tc.message)
		})
	}
}
