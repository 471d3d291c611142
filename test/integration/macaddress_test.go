package integration

import (
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/api/v1alpha1"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/reasons"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/wapisim"
)

// The Metal3 and CAPV objects between a claim and its machine's MAC, on the
// suite's stand-in CRDs (testdata/crds).

func (f *fixture) createObject(apiVersion, kind, name string, owner *unstructured.Unstructured, annotations map[string]string,
	content map[string]any) *unstructured.Unstructured {
	f.t.Helper()
	u := &unstructured.Unstructured{Object: content}
	if u.Object == nil {
		u.Object = map[string]any{}
	}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	u.SetNamespace(f.ns)
	u.SetName(name)
	u.SetAnnotations(annotations)
	if owner != nil {
		u.SetOwnerReferences([]metav1.OwnerReference{ownerRefTo(owner)})
	}
	require.NoError(f.t, k8s.Create(f.ctx, u))
	return u
}

func ownerRefTo(o *unstructured.Unstructured) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: o.GetAPIVersion(), Kind: o.GetKind(), Name: o.GetName(), UID: o.GetUID()}
}

// ownedBy makes the claim's owner o, as CAPM3 and CAPV own theirs.
func ownedBy(o *unstructured.Unstructured) claimOption {
	return func(c *ipamv1.IPAddressClaim) { c.OwnerReferences = []metav1.OwnerReference{ownerRefTo(o)} }
}

// createMetal3Host creates what CAPM3 has made when it creates a claim: a
// BareMetalHost (with bootMACAddress mac unless empty), the Metal3Machine
// on it, and the Metal3Data it owns, which owns the claim.
func (f *fixture) createMetal3Host(name, mac string) (host, data *unstructured.Unstructured) {
	f.t.Helper()
	spec := map[string]any{"online": true}
	if mac != "" {
		spec["bootMACAddress"] = mac
	}
	host = f.createObject("metal3.io/v1alpha1", "BareMetalHost", name, nil, nil, map[string]any{"spec": spec})
	m3m := f.createObject("infrastructure.cluster.x-k8s.io/v1beta1", "Metal3Machine", name, nil,
		map[string]string{"metal3.io/BareMetalHost": f.ns + "/" + name}, nil)
	data = f.createObject("infrastructure.cluster.x-k8s.io/v1beta1", "Metal3Data", name+"-data", m3m, nil, nil)
	return host, data
}

// setBootMAC sets the host's bootMACAddress, as an operator does.
func (f *fixture) setBootMAC(host *unstructured.Unstructured, mac string) {
	f.t.Helper()
	f.update(host, func() { require.NoError(f.t, unstructured.SetNestedField(host.Object, mac, "spec", "bootMACAddress")) })
}

// setVMStatusMAC reports a MAC for the VSphereVM's first device, as CAPV
// does once the VM is ready.
func (f *fixture) setVMStatusMAC(vm *unstructured.Unstructured, mac string) {
	f.t.Helper()
	require.NoError(f.t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := k8s.Get(f.ctx, client.ObjectKeyFromObject(vm), vm); err != nil {
			return err
		}
		if err := unstructured.SetNestedSlice(vm.Object, []any{map[string]any{"macAddr": mac, "connected": true}}, "status", "network"); err != nil {
			return err
		}
		return k8s.Status().Update(f.ctx, vm)
	}))
}

func (f *fixture) fixedAddressOf(claim string) []wapisim.Object {
	var out []wapisim.Object
	for _, o := range f.wapi().Objects("fixedaddress") {
		if o.EAs["CAPI-IPAM-Claim"] == f.marker(claim) {
			out = append(out, o)
		}
	}
	return out
}

// TestFixedAddressCarriesTheMachinesMAC: on a pool whose fixed addresses
// carry the machine's MAC, a Metal3 claim waits for its BareMetalHost's
// bootMACAddress, is woken when the host has one, and its fixed address is
// a DHCP reservation for it. A MAC that changes afterwards is reported, not
// written; a MAC the grid finds on another fixed address fails that claim
// alone, naming the MAC and the holder, and binds once its host's MAC is
// corrected; the audit restores a deleted
// reservation with its MAC. A CAPV claim takes its device's MAC from the
// VSphereVM's spec, and without one is reserved at once without a MAC
// (CAPV reports vSphere's MAC only after the addresses are bound), which is
// written into the fixed address once the VSphereVM's status reports it,
// and never rewritten when it changes.
func TestFixedAddressCarriesTheMachinesMAC(t *testing.T) {
	f := newInfobloxFixture(t)
	f.seedNetwork("10.66.0.0/24")
	pool := f.createInfobloxPool("pool", "10.66.0.0/24", func(s *v1alpha1.InfobloxIPPoolSpec) {
		s.Reservation.MACAddress = v1alpha1.InfobloxMACMachine
	})
	f.waitPoolReady(pool)

	hostA, dataA := f.createMetal3Host("host-a", "")
	claimA := f.createClaim("host-a-data-pool", pool.Name, ownedBy(dataA))

	t.Run("waits for the MAC, woken when it appears", func(t *testing.T) {
		cond := f.waitClaimReason(claimA, reasons.MACAddressUnknownReason)
		assert.Contains(t, cond.Message, "BareMetalHost "+f.ns+"/host-a has no spec.bootMACAddress yet")
		f.waitEvent(f.ns, claimA.Name, reasons.MACAddressUnknownReason)
		assert.Empty(t, f.fixedAddressOf(claimA.Name), "nothing is reserved without the MAC")

		// Past the first retries of the claim's backoff (1s, 2s, 4s, 8s),
		// the next is seconds away: binding sooner is the watch's doing.
		time.Sleep(8 * time.Second)
		f.setBootMAC(hostA, "52:54:00:AA:BB:01")
		f.waitBoundWithin(claimA, 4*time.Second)

		fixed := f.fixedAddressOf(claimA.Name)
		require.Len(t, fixed, 1)
		assert.Equal(t, "52:54:00:aa:bb:01", fixed[0].MAC)
		assert.Equal(t, "MAC_ADDRESS", fixed[0].MatchClient, "the grid's DHCP serves the address to that MAC")
		got := f.getClaim(claimA)
		assert.Equal(t, "52:54:00:aa:bb:01", got.Annotations[v1alpha1.MACAddressAnnotation])
		assert.Equal(t, "BareMetalHost.metal3.io/"+f.ns+"/host-a", got.Annotations[v1alpha1.MACAddressSourceAnnotation])
		f.waitClaimCondition(claimA, v1alpha1.MACAddressCurrentCondition, v1alpha1.MACAddressMatchesReason)
	})

	t.Run("a MAC that changes is reported, not written", func(t *testing.T) {
		f.setBootMAC(hostA, "52:54:00:aa:bb:02")
		cond := f.waitClaimCondition(claimA, v1alpha1.MACAddressCurrentCondition, v1alpha1.MACAddressChangedReason)
		assert.Equal(t, metav1.ConditionFalse, cond.Status)
		assert.Contains(t, cond.Message, "carries MAC 52:54:00:aa:bb:01, but BareMetalHost "+f.ns+"/host-a now gives 52:54:00:aa:bb:02")
		f.waitEvent(f.ns, claimA.Name, v1alpha1.MACAddressChangedReason)
		assert.True(t, conditions.IsTrue(f.getClaim(claimA), ipamv1.IPAddressClaimReadyCondition), "the claim keeps its address")
		fixed := f.fixedAddressOf(claimA.Name)
		require.Len(t, fixed, 1)
		assert.Equal(t, "52:54:00:aa:bb:01", fixed[0].MAC, "the record keeps the MAC it was made with")
	})

	t.Run("a MAC another fixed address holds fails that claim alone", func(t *testing.T) {
		// The NIC moved to host-b; host-a's record still holds its MAC.
		hostB, dataB := f.createMetal3Host("host-b", "52:54:00:aa:bb:01")
		claimB := f.createClaim("host-b-data-pool", pool.Name, ownedBy(dataB))
		_, dataC := f.createMetal3Host("host-c", "52:54:00:aa:bb:03")
		claimC := f.createClaim("host-c-data-pool", pool.Name, ownedBy(dataC))

		cond := f.waitClaimReason(claimB, reasons.MACAddressInUseReason)
		assert.Contains(t, cond.Message, "MAC address 52:54:00:aa:bb:01 is held by fixedaddress/")
		assert.Contains(t, cond.Message, `CAPI-IPAM-Claim="`+f.marker(claimA.Name)+`"`, "the holder is named")
		f.waitEvent(f.ns, claimB.Name, reasons.MACAddressInUseReason)
		assert.Empty(t, f.fixedAddressOf(claimB.Name), "nothing is reserved for the refused claim")

		assert.Contains(t, cond.Message, "the MAC was read from BareMetalHost "+f.ns+"/host-b, and is read again at the claim's next attempt")

		f.waitBound(claimC)
		assert.Len(t, f.fixedAddressOf(claimC.Name), 1)
		assert.Len(t, f.fixedAddressOf(claimA.Name), 1)
		f.waitPoolReady(pool)

		// The refused claim drops the MAC it read and reads it again at
		// each attempt, which writes the claim twice: those writes bring
		// no attempt on before its backoff (1s, 2s, 4s...).
		f.wapi().ResetCalls()
		time.Sleep(4 * time.Second)
		assert.LessOrEqual(t, f.wapi().CountObjectCalls("POST", "fixedaddress"), 3, "the refused claim retries at its backoff's pace")

		// The host's MAC was wrong: corrected, the claim reads it again
		// and binds with it.
		f.setBootMAC(hostB, "52:54:00:aa:bb:04")
		f.waitBound(claimB)
		fixed := f.fixedAddressOf(claimB.Name)
		require.Len(t, fixed, 1)
		assert.Equal(t, "52:54:00:aa:bb:04", fixed[0].MAC)
		got := f.getClaim(claimB)
		assert.Equal(t, "52:54:00:aa:bb:04", got.Annotations[v1alpha1.MACAddressAnnotation])
		assert.Equal(t, "BareMetalHost.metal3.io/"+f.ns+"/host-b", got.Annotations[v1alpha1.MACAddressSourceAnnotation])
	})

	t.Run("the audit restores a deleted DHCP reservation with its MAC", func(t *testing.T) {
		f.audit(pool) // the one the pool's readiness started is over
		records := f.recordsWithMarker(f.marker("host-c-data-pool"))
		require.Len(t, records, 1)
		f.sys.deleteRecord(records[0])
		require.Empty(t, f.fixedAddressOf("host-c-data-pool"))

		report := f.audit(pool)
		require.Len(t, findings(report, v1alpha1.FindingRestored), 1, "%+v", report)
		fixed := f.fixedAddressOf("host-c-data-pool")
		require.Len(t, fixed, 1)
		assert.Equal(t, records[0].Address.Addr(), fixed[0].Addresses[0], "at the same address")
		assert.Equal(t, "52:54:00:aa:bb:03", fixed[0].MAC, "with the MAC it was made with")
		assert.Equal(t, "MAC_ADDRESS", fixed[0].MatchClient)
	})

	t.Run("CAPV: the device's MAC from the VSphereVM's spec, else no wait and the MAC written once the VM reports it", func(t *testing.T) {
		device := func(mac string) map[string]any {
			d := map[string]any{"networkName": "vm-network"}
			if mac != "" {
				d["macAddr"] = mac
			}
			return map[string]any{"spec": map[string]any{"network": map[string]any{"devices": []any{d}}}}
		}
		withMAC := f.createObject("infrastructure.cluster.x-k8s.io/v1beta1", "VSphereVM", "vm-a", nil, nil, device("00:50:56:AB:CD:01"))
		without := f.createObject("infrastructure.cluster.x-k8s.io/v1beta1", "VSphereVM", "vm-b", nil, nil, device(""))
		claimWith := f.createClaim("vm-a-0-0", pool.Name, ownedBy(withMAC))
		claimWithout := f.createClaim("vm-b-0-0", pool.Name, ownedBy(without))

		f.waitBound(claimWith)
		fixed := f.fixedAddressOf(claimWith.Name)
		require.Len(t, fixed, 1)
		assert.Equal(t, "00:50:56:ab:cd:01", fixed[0].MAC)
		assert.Equal(t, "MAC_ADDRESS", fixed[0].MatchClient)

		f.waitBound(claimWithout)
		event := f.waitEvent(f.ns, claimWithout.Name, reasons.MACAddressDeferredReason)
		assert.Contains(t, event.Note, "VSphereVM "+f.ns+"/vm-b sets no spec.network.devices[0].macAddr")
		fixed = f.fixedAddressOf(claimWithout.Name)
		require.Len(t, fixed, 1)
		assert.Equal(t, "RESERVED", fixed[0].MatchClient, "a reservation, as without the setting")
		assert.NotContains(t, f.getClaim(claimWithout).Annotations, v1alpha1.MACAddressAnnotation)
		cond := conditions.Get(f.getClaim(claimWithout), v1alpha1.MACAddressCurrentCondition)
		require.NotNil(t, cond)
		assert.Equal(t, reasons.MACAddressDeferredReason, cond.Reason, "the claim says its record waits for the MAC")

		// CAPV reports the MAC vSphere gave the device once the VM is
		// ready: it is written into the fixed address, once.
		f.setVMStatusMAC(without, "00:50:56:AB:CD:02")
		got := f.waitMACAnnotation(claimWithout, "00:50:56:ab:cd:02")
		assert.Equal(t, "VSphereVM.infrastructure.cluster.x-k8s.io/"+f.ns+"/vm-b", got.Annotations[v1alpha1.MACAddressSourceAnnotation])
		fixed = f.fixedAddressOf(claimWithout.Name)
		require.Len(t, fixed, 1)
		assert.Equal(t, "00:50:56:ab:cd:02", fixed[0].MAC)
		assert.Equal(t, "MAC_ADDRESS", fixed[0].MatchClient)
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			cond := conditions.Get(f.getClaim(claimWithout), v1alpha1.MACAddressCurrentCondition)
			require.NotNil(c, cond)
			assert.Equal(c, metav1.ConditionTrue, cond.Status)
			assert.Equal(c, reasons.MACAddressWrittenReason, cond.Reason)
		}, waitTimeout, pollInterval)
		f.waitEvent(f.ns, claimWithout.Name, reasons.MACAddressWrittenReason)

		// A MAC that changes later is reported, never written.
		f.wapi().ResetCalls()
		f.update(without, func() {
			require.NoError(t, unstructured.SetNestedSlice(without.Object, []any{map[string]any{"networkName": "vm-network", "macAddr": "00:50:56:AB:CD:03"}},
				"spec", "network", "devices"))
		})
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			cond := conditions.Get(f.getClaim(claimWithout), v1alpha1.MACAddressCurrentCondition)
			require.NotNil(c, cond)
			assert.Equal(c, v1alpha1.MACAddressChangedReason, cond.Reason)
		}, waitTimeout, pollInterval)
		fixed = f.fixedAddressOf(claimWithout.Name)
		require.Len(t, fixed, 1)
		assert.Equal(t, "00:50:56:ab:cd:02", fixed[0].MAC, "the record keeps the MAC written")
		// A write goes by reference, or guarded in a request object.
		assert.Zero(t, f.wapi().CountObjectCalls("PUT", "fixedaddress")+f.wapi().CountObjectCalls("POST", "request"), "nothing was written to the grid")
	})

	t.Run("CAPV: a MAC reported late that another fixed address holds is said, not forced", func(t *testing.T) {
		device := map[string]any{"spec": map[string]any{"network": map[string]any{"devices": []any{map[string]any{"networkName": "vm-network"}}}}}
		vm := f.createObject("infrastructure.cluster.x-k8s.io/v1beta1", "VSphereVM", "vm-c", nil, nil, device)
		claim := f.createClaim("vm-c-0-0", pool.Name, ownedBy(vm))
		f.waitBound(claim)
		f.waitEvent(f.ns, claim.Name, reasons.MACAddressDeferredReason)
		before := f.fixedAddressOf(claim.Name)
		require.Len(t, before, 1)
		require.Equal(t, "RESERVED", before[0].MatchClient)

		// vSphere reports a MAC that vm-a's fixed address already holds (a
		// copied VM, say): the grid refuses it at write time.
		f.setVMStatusMAC(vm, "00:50:56:AB:CD:01")
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			cond := conditions.Get(f.getClaim(claim), v1alpha1.MACAddressCurrentCondition)
			require.NotNil(c, cond)
			assert.Equal(c, metav1.ConditionFalse, cond.Status)
			assert.Equal(c, reasons.MACAddressNotWrittenReason, cond.Reason)
			assert.Contains(c, cond.Message, "00:50:56:ab:cd:01")
		}, waitTimeout, pollInterval)
		event := f.waitEvent(f.ns, claim.Name, reasons.MACAddressNotWrittenReason)
		assert.Equal(t, corev1.EventTypeWarning, event.Type)
		assert.Contains(t, event.Note, "00:50:56:ab:cd:01")

		after := f.fixedAddressOf(claim.Name)
		require.Len(t, after, 1, "the claim keeps its reservation")
		assert.Equal(t, before[0].Addresses, after[0].Addresses)
		assert.Equal(t, "RESERVED", after[0].MatchClient, "the refused MAC is not forced onto it")
		holder := f.fixedAddressOf("vm-a-0-0")
		require.Len(t, holder, 1)
		assert.Equal(t, "00:50:56:ab:cd:01", holder[0].MAC, "and the holder keeps it")
		assert.True(t, conditions.IsTrue(f.getClaim(claim), ipamv1.IPAddressClaimReadyCondition), "the claim stays Ready")
	})

	t.Run("a reservation kept for the grace period serves no machine", func(t *testing.T) {
		f.setAuditSpec(pool, v1alpha1.Orphans{}, v1alpha1.ReleaseSettings{GracePeriod: &metav1.Duration{Duration: time.Hour}})
		fixed := f.fixedAddressOf(claimA.Name)
		require.Len(t, fixed, 1)
		require.Equal(t, "MAC_ADDRESS", fixed[0].MatchClient)
		f.deleteClaim(claimA)

		retired, ok := f.wapi().Object(fixed[0].Ref)
		require.True(t, ok, "kept for the grace period")
		_, _, tombstone := backends.ParseTombstone(retired.EAs["CAPI-IPAM-Claim"])
		assert.True(t, tombstone, "%v", retired.EAs)
		assert.Equal(t, "RESERVED", retired.MatchClient, "the grid's DHCP serves it to no one")
		assert.Equal(t, "00:00:00:00:00:00", retired.MAC)
	})
}

// waitMACAnnotation waits for the claim's MAC annotation to be want, or
// to be absent when want is "": the claim's metadata is written just after
// its bound status.
func (f *fixture) waitMACAnnotation(claim *ipamv1.IPAddressClaim, want string) *ipamv1.IPAddressClaim {
	f.t.Helper()
	var got *ipamv1.IPAddressClaim
	require.EventuallyWithT(f.t, func(c *assert.CollectT) {
		got = f.getClaim(claim)
		mac, ok := got.Annotations[v1alpha1.MACAddressAnnotation]
		assert.Equal(c, want != "", ok, "annotated: %v", got.Annotations)
		assert.Equal(c, want, mac)
	}, waitTimeout, pollInterval)
	return got
}

// TestClaimSaysTheMACItsRecordCarries: on a pool whose fixed addresses
// carry the machine's MAC, a bound claim's MAC annotation, and so its
// MACAddressCurrent condition, describe the MAC its record really carries.
// A plan the IPAM team made with a MAC of their own keeps it, and the
// claim compares its machine's MAC with that one; a plan without a MAC and
// an IPv6 fixed address carry none, and the claim names none.
func TestClaimSaysTheMACItsRecordCarries(t *testing.T) {
	f := newInfobloxFixture(t)
	f.seedNetwork("10.67.0.0/24")
	pool := f.createInfobloxPool("pool", "10.67.0.0/24", func(s *v1alpha1.InfobloxIPPoolSpec) {
		s.Reservation.MACAddress = v1alpha1.InfobloxMACMachine
		s.Reservation.NamePattern = plannedNamePattern
		s.Planned = &v1alpha1.InfobloxPlanned{}
	})
	f.waitPoolReady(pool)
	plan := func(addr, machine, mac string) string {
		ref := f.wapi().AddFixedAddress("default", addr, nil)
		f.wapi().SetName(ref, f.plannedName(machine))
		if mac != "" {
			f.wapi().SetMAC(ref, mac)
		}
		return ref
	}

	t.Run("a plan with the IPAM team's MAC", func(t *testing.T) {
		ref := plan("10.67.0.40", "db-0", "52:54:00:aa:cc:99")
		_, data := f.createMetal3Host("db-0", "52:54:00:aa:cc:01")
		claim := f.createClaim("db-0-data-pool", pool.Name, ownedBy(data), forMachine("db-0"))
		assert.Equal(t, "10.67.0.40", f.waitBound(claim).Spec.Address, "the plan is adopted")

		got := f.waitMACAnnotation(claim, "52:54:00:aa:cc:99")
		assert.Equal(t, "BareMetalHost.metal3.io/"+f.ns+"/db-0", got.Annotations[v1alpha1.MACAddressSourceAnnotation])
		cond := f.waitClaimCondition(claim, v1alpha1.MACAddressCurrentCondition, v1alpha1.MACAddressChangedReason)
		assert.Contains(t, cond.Message, "carries MAC 52:54:00:aa:cc:99, but BareMetalHost "+f.ns+"/db-0 now gives 52:54:00:aa:cc:01")
		planned, _ := f.wapi().Object(ref)
		assert.Equal(t, "52:54:00:aa:cc:99", planned.MAC, "the plan keeps the IPAM team's MAC")
	})

	t.Run("a plan without a MAC", func(t *testing.T) {
		plan("10.67.0.41", "db-1", "")
		_, data := f.createMetal3Host("db-1", "52:54:00:aa:cc:02")
		claim := f.createClaim("db-1-data-pool", pool.Name, ownedBy(data), forMachine("db-1"))
		assert.Equal(t, "10.67.0.41", f.waitBound(claim).Spec.Address)
		got := f.waitMACAnnotation(claim, "")
		assert.NotContains(t, got.Annotations, v1alpha1.MACAddressSourceAnnotation)
		assert.Nil(t, conditions.Get(got, v1alpha1.MACAddressCurrentCondition), "nothing to compare the machine's MAC with")
	})

	t.Run("an IPv6 fixed address", func(t *testing.T) {
		f.seedNetwork("fd00:67::/64")
		pool6 := f.createInfobloxPool("pool6", "fd00:67::/64", func(s *v1alpha1.InfobloxIPPoolSpec) {
			s.Reservation.MACAddress = v1alpha1.InfobloxMACMachine
		})
		f.waitPoolReady(pool6)
		_, data := f.createMetal3Host("v6-0", "52:54:00:aa:cc:03")
		claim := f.createClaim("v6-0-data-pool", pool6.Name, ownedBy(data))
		f.waitBound(claim)
		got := f.waitMACAnnotation(claim, "")
		assert.NotContains(t, got.Annotations, v1alpha1.MACAddressSourceAnnotation)
		assert.Nil(t, conditions.Get(got, v1alpha1.MACAddressCurrentCondition))
	})
}

// apiRequests records the requests a manager sends to the API server.
type apiRequests struct {
	mu       sync.Mutex
	requests []*http.Request
}

// count counts the requests of method whose path, split at "/", ends with
// suffix: ("GET", "baremetalhosts") counts the lists and watches of
// BareMetalHosts, ("GET", "baremetalhosts", "host-0") the reads of host-0.
func (a *apiRequests) count(method string, suffix ...string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := 0
	for _, r := range a.requests {
		parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
		if r.Method == method && len(parts) >= len(suffix) && slices.Equal(parts[len(parts)-len(suffix):], suffix) {
			n++
		}
	}
	return n
}

// startRecordedManager gives the test a manager of its own, whose requests
// to the API server it records.
func (f *fixture) startRecordedManager() *apiRequests {
	f.t.Helper()
	f.filter = "recorded-" + f.ns
	recorded := &apiRequests{}
	cfg := rest.CopyConfig(restConfig)
	cfg.Wrap(func(next http.RoundTripper) http.RoundTripper {
		return roundTripper(func(r *http.Request) (*http.Response, error) {
			recorded.mu.Lock()
			recorded.requests = append(recorded.requests, r)
			recorded.mu.Unlock()
			return next.RoundTrip(r)
		})
	})
	_, err := startManagerWith(f.ctx, cfg, f.filter, "", nil)
	require.NoError(f.t, err)
	return recorded
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestMACSourceStatusChurnReadsNothing: a bound claim compares its MAC
// again when the object it was read from changes its spec, where the MAC
// is; the status and metadata churn of a BareMetalHost (provisioning
// states, annotations) wakes no claim and reads nothing past the cache.
func TestMACSourceStatusChurnReadsNothing(t *testing.T) {
	f := newInfobloxFixture(t)
	requests := f.startRecordedManager()
	f.seedNetwork("10.68.0.0/24")
	pool := f.createInfobloxPool("pool", "10.68.0.0/24", func(s *v1alpha1.InfobloxIPPoolSpec) {
		s.Reservation.MACAddress = v1alpha1.InfobloxMACMachine
	})
	f.waitPoolReady(pool)
	host, data := f.createMetal3Host("host-0", "52:54:00:aa:dd:01")
	claim := f.createClaim("host-0-data-pool", pool.Name, ownedBy(data))
	f.waitBound(claim)
	f.waitClaimCondition(claim, v1alpha1.MACAddressCurrentCondition, v1alpha1.MACAddressMatchesReason)
	reads := func() int { return requests.count(http.MethodGet, "baremetalhosts", "host-0") }
	before := reads()
	require.Positive(t, before, "the MAC was read from the host")

	for i, state := range []string{"inspecting", "available", "provisioning", "provisioned"} {
		require.NoError(t, unstructured.SetNestedField(host.Object, state, "status", "provisioning", "state"))
		require.NoError(t, k8s.Status().Update(f.ctx, host))
		f.update(host, func() {
			host.SetAnnotations(map[string]string{"churn": strconv.Itoa(i)})
		})
	}
	time.Sleep(2 * time.Second)
	assert.Equal(t, before, reads(), "status and metadata changes read nothing")

	f.setBootMAC(host, "52:54:00:aa:dd:02")
	f.waitClaimCondition(claim, v1alpha1.MACAddressCurrentCondition, v1alpha1.MACAddressChangedReason)
	assert.Greater(t, reads(), before, "a spec change compares the MAC again")
}

// TestMACSourcesAreWatchedOnlyOnceAPoolNeedsThem: a manager whose pools
// do not want the machine's MAC keeps no informer of BareMetalHosts or
// VSphereVMs (which would hold the metadata of every one in the cluster):
// it never lists or watches them. Once a pool opts in, the kind its
// claim's MAC comes from is watched, and only that kind: the claim that
// waits for its host's MAC is woken when the host gets one.
func TestMACSourcesAreWatchedOnlyOnceAPoolNeedsThem(t *testing.T) {
	f := newInfobloxFixture(t)
	requests := f.startRecordedManager()
	informers := func(plural string) int { return requests.count(http.MethodGet, plural) }
	f.seedNetwork("10.69.0.0/24")
	f.seedNetwork("10.70.0.0/24")
	plain := f.createInfobloxPool("plain", "10.69.0.0/24", nil)
	f.waitPoolReady(plain)
	_, data := f.createMetal3Host("host-0", "52:54:00:aa:ee:01")
	f.waitBound(f.createClaim("host-0-data-plain", plain.Name, ownedBy(data)))
	vm := f.createObject("infrastructure.cluster.x-k8s.io/v1beta1", "VSphereVM", "vm-0", nil, nil, nil)
	f.waitBound(f.createClaim("vm-0-0-0", plain.Name, ownedBy(vm)))
	assert.Zero(t, informers("baremetalhosts"), "no pool wants a MAC: BareMetalHosts are not listed or watched")
	assert.Zero(t, informers("vspherevms"), "nor VSphereVMs")

	machine := f.createInfobloxPool("machine", "10.70.0.0/24", func(s *v1alpha1.InfobloxIPPoolSpec) {
		s.Reservation.MACAddress = v1alpha1.InfobloxMACMachine
	})
	f.waitPoolReady(machine)
	host, data := f.createMetal3Host("host-1", "")
	claim := f.createClaim("host-1-data-machine", machine.Name, ownedBy(data))
	f.waitClaimReason(claim, reasons.MACAddressUnknownReason)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Positive(c, informers("baremetalhosts"), "BareMetalHosts are watched once a claim reads its MAC from one")
	}, waitTimeout, pollInterval)
	assert.Zero(t, informers("vspherevms"), "no claim reads a VSphereVM's MAC")

	// Past the first retries of the claim's backoff (1s, 2s, 4s, 8s),
	// the next is seconds away: binding sooner is the watch's doing.
	time.Sleep(8 * time.Second)
	f.setBootMAC(host, "52:54:00:aa:ee:02")
	f.waitBoundWithin(claim, 4*time.Second)
	assert.Equal(t, "52:54:00:aa:ee:02", f.fixedAddressOf(claim.Name)[0].MAC)
}
