package integration

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/api/v1alpha1"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/reasons"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/pkg/poolkind"
)

// createPlannedPool creates a namespaced pool over cidr that adopts the
// records the IPAM team planned for its claims (see system.plan).
func (f *fixture) createPlannedPool(name, cidr string) poolkind.Pool {
	f.t.Helper()
	pool := f.sys.newPool(f.ns, name, cidr, f.secret, false)
	f.sys.plannedPool(pool)
	pool.SetLabels(f.labels())
	require.NoError(f.t, k8s.Create(f.ctx, pool))
	return pool
}

// plannedName is the name a planned pool renders for a machine.
func (f *fixture) plannedName(machine string) string {
	return machine + "." + f.ns + ".planned.example"
}

// forMachine names the claim's Machine, as the provider records it.
func forMachine(machine string) claimOption {
	return func(c *ipamv1.IPAddressClaim) {
		if c.Annotations == nil {
			c.Annotations = map[string]string{}
		}
		c.Annotations[v1alpha1.MachineNameAnnotation] = machine
	}
}

// TestPlannedRecordIsAdoptedAndReturnedOnRelease: a claim of a pool that
// adopts planned records takes the one the IPAM team planned for its
// machine: its IPAddress has the planned address, and the record carries
// the claim's marker and nothing else new. Deleting the claim leaves the
// record exactly as planned, also when the manager that adopted it
// stopped and another released it.
func TestPlannedRecordIsAdoptedAndReturnedOnRelease(t *testing.T) {
	for _, tc := range []struct {
		name    string
		restart bool
		// addr differs between the cases: a real NetBox is shared by them.
		addr string
	}{
		{name: "one manager", addr: "10.170.0.40/24"},
		{name: "a manager restart in between", restart: true, addr: "10.170.0.41/24"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			forEachSystem(t, func(t *testing.T, f *fixture) {
				f.seedNetwork("10.170.0.0/24")
				var stop func()
				if tc.restart {
					// A manager of the test's own, to stop.
					f.filter = "planned-" + f.ns
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
				pool := f.createPlannedPool("pool", "10.170.0.0/24")
				f.waitPoolReady(pool)
				at := netip.MustParsePrefix(tc.addr)
				ref := f.sys.plan(at, f.plannedName("db-0"))
				planned := f.sys.snapshot(ref)
				require.NotNil(t, planned)

				claim := f.createClaim("db-0", pool.GetName(), forMachine("db-0"))
				address := f.waitBound(claim)
				assert.Equal(t, at.Addr().String(), address.Spec.Address, "the planned address")
				assert.Equal(t, ref, address.Annotations[v1alpha1.ReservationRecordAnnotation], "the planned record, no new one")
				records := f.markedRecords()
				require.Len(t, records, 1, "nothing else was reserved")
				assert.Equal(t, f.marker(claim.Name), records[0].Marker)
				assert.True(t, records[0].Planned, "the record says it was planned")
				other := f.createClaim("web-0", pool.GetName(), forMachine("web-0"))
				assert.NotEqual(t, at.Addr().String(), f.waitBound(other).Spec.Address, "a machine planned nothing for gets the next free address")

				if tc.restart {
					stop()
					_, err := startManager(f.ctx, f.filter, "", nil)
					require.NoError(t, err)
				}
				f.deleteClaim(claim)
				assert.Equal(t, planned, f.sys.snapshot(ref), "released, the record is as the IPAM team planned it")
				assert.Empty(t, f.recordsWithMarker(f.marker(claim.Name)))

				again := f.createClaim("db-0-again", pool.GetName(), forMachine("db-0"))
				assert.Equal(t, at.Addr().String(), f.waitBound(again).Spec.Address, "the plan survives the machine")
				f.deleteClaim(again)
				f.deleteClaim(other)
				assert.Equal(t, planned, f.sys.snapshot(ref))
			})
		})
	}
}

// TestTwoClaimsRaceForOnePlannedRecord: two claims whose machines render
// one planned record's name, created at once: one binds to it, the other
// is PlannedRecordConflict, its message and event naming the record and
// the claim that holds it, and gets no other address. Once the first is
// deleted, the second adopts the record.
func TestTwoClaimsRaceForOnePlannedRecord(t *testing.T) {
	forEachSystem(t, func(t *testing.T, f *fixture) {
		f.seedNetwork("10.171.0.0/24")
		pool := f.createPlannedPool("pool", "10.171.0.0/24")
		f.waitPoolReady(pool)
		at := netip.MustParsePrefix("10.171.0.30/24")
		ref := f.sys.plan(at, f.plannedName("m-race"))
		planned := f.sys.snapshot(ref)

		claims := []*ipamv1.IPAddressClaim{
			f.newClaim("racer-a", pool.GetName(), forMachine("m-race")),
			f.newClaim("racer-b", pool.GetName(), forMachine("m-race")),
		}
		done := make(chan struct{})
		for _, c := range claims {
			go func() {
				defer func() { done <- struct{}{} }()
				assert.NoError(t, k8s.Create(f.ctx, c))
			}()
		}
		<-done
		<-done

		var winner, loser *ipamv1.IPAddressClaim
		var cond *metav1.Condition
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			winner, loser, cond = nil, nil, nil
			for _, claim := range claims {
				got := &ipamv1.IPAddressClaim{}
				require.NoError(c, k8s.Get(f.ctx, client.ObjectKeyFromObject(claim), got))
				switch ready := conditions.Get(got, ipamv1.IPAddressClaimReadyCondition); {
				case got.Status.AddressRef.Name != "":
					winner = claim
				case ready != nil && ready.Reason == reasons.PlannedRecordConflictReason:
					loser, cond = claim, ready
				}
			}
			require.NotNil(c, winner, "one claim binds")
			require.NotNil(c, loser, "the other reports the conflict")
		}, waitTimeout, pollInterval)
		address := f.waitBound(winner)
		assert.Equal(t, at.Addr().String(), address.Spec.Address)
		assert.Equal(t, metav1.ConditionFalse, cond.Status)
		t.Logf("%s", cond.Message)
		assert.Contains(t, cond.Message, at.Addr().String(), "the message names the record")
		assert.Contains(t, cond.Message, f.marker(winner.Name), "and the claim that holds it")
		e := f.waitEvent(f.ns, loser.Name, reasons.PlannedRecordConflictReason)
		assert.Contains(t, e.Note, f.marker(winner.Name))
		records := f.markedRecords()
		require.Len(t, records, 1, "the loser got no other address")
		assert.Equal(t, f.marker(winner.Name), records[0].Marker)

		f.deleteClaim(winner)
		assert.Equal(t, at.Addr().String(), f.waitBound(loser).Spec.Address, "released, the plan goes to the other claim")
		f.deleteClaim(loser)
		assert.Equal(t, planned, f.sys.snapshot(ref))
	})
}

// TestPlannedIsValidatedByTheAPIServer: a NetBox pool's planned records
// need a tag or a status, and the DNS name pattern that finds them; an
// Infoblox pool's extensible attribute cannot be the marker's.
func TestPlannedIsValidatedByTheAPIServer(t *testing.T) {
	f := newFixture(t)
	netboxSpec := func(planned *v1alpha1.NetboxPlanned, pattern string) v1alpha1.NetboxIPPoolSpec {
		s := f.poolSpec("10.172.0.0/24")
		s.Planned = planned
		s.Reservation.DNSNamePattern = pattern
		return s
	}
	infobloxSpec := func(ea string) v1alpha1.InfobloxIPPoolSpec {
		return v1alpha1.InfobloxIPPoolSpec{
			Connection: v1alpha1.InfobloxConnection{Host: "gm.example.com", CredentialsSecretRef: v1alpha1.SecretReference{Name: "infoblox"}},
			Sources:    []v1alpha1.InfobloxAddressSource{{Network: &v1alpha1.InfobloxNetworkSource{CIDR: "10.172.0.0/24"}}},
			Planned:    &v1alpha1.InfobloxPlanned{ExtensibleAttribute: ea},
		}
	}
	for i, tc := range []struct {
		name    string
		pool    client.Object
		message string
	}{
		{name: "NetBox: a tag", pool: &v1alpha1.NetboxIPPool{Spec: netboxSpec(&v1alpha1.NetboxPlanned{Tag: "planned"}, "{{ .MachineName }}.example.com")}},
		{name: "NetBox: a status", pool: &v1alpha1.GlobalNetboxIPPool{Spec: netboxSpec(&v1alpha1.NetboxPlanned{Status: "reserved"}, "{{ .MachineName }}.example.com")}},
		{name: "NetBox: neither", pool: &v1alpha1.NetboxIPPool{Spec: netboxSpec(&v1alpha1.NetboxPlanned{}, "{{ .MachineName }}.example.com")},
			message: "planned needs a tag or a status"},
		{name: "NetBox: no DNS name pattern", pool: &v1alpha1.NetboxIPPool{Spec: netboxSpec(&v1alpha1.NetboxPlanned{Tag: "planned"}, "")},
			message: "set it"},
		{name: "NetBox: a status NetBox lacks", pool: &v1alpha1.NetboxIPPool{Spec: netboxSpec(&v1alpha1.NetboxPlanned{Status: "planned"}, "x")},
			message: "Unsupported value"},
		{name: "Infoblox: by name", pool: &v1alpha1.InfobloxIPPool{Spec: infobloxSpec("")}},
		{name: "Infoblox: by an attribute", pool: &v1alpha1.GlobalInfobloxIPPool{Spec: infobloxSpec("VM Name")}},
		{name: "Infoblox: by the marker's attribute", pool: &v1alpha1.InfobloxIPPool{Spec: infobloxSpec("CAPI-IPAM-Claim")},
			message: "holds the provider's claim marker"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.pool.SetName(f.ns + "-planned-" + string(rune('a'+i)))
			f.assertAdmitted(t, tc.pool, tc.message)
		})
	}
}
