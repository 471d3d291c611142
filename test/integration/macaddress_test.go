package integration

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/api/v1alpha1"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/wapisim"
)

// createVSphereVM creates a VSphereVM with one network device, and no MAC
// until setVMMAC gives it one, as CAPV's before vSphere cloned the VM.
func (f *fixture) createVSphereVM(name string) *unstructured.Unstructured {
	f.t.Helper()
	vm := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
		"kind":       "VSphereVM",
		"metadata":   map[string]any{"namespace": f.ns, "name": name},
		"spec":       map[string]any{"network": map[string]any{"devices": []any{map[string]any{"networkName": "vm-network"}}}},
	}}
	require.NoError(f.t, k8s.Create(f.ctx, vm))
	return vm
}

// setVMMAC reports the MAC vSphere gave the VM's first device, as CAPV
// writes it in the VSphereVM's status.
func (f *fixture) setVMMAC(vm *unstructured.Unstructured, mac string) {
	f.t.Helper()
	require.NoError(f.t, k8s.Get(f.ctx, client.ObjectKeyFromObject(vm), vm))
	require.NoError(f.t, unstructured.SetNestedSlice(vm.Object, []any{map[string]any{"connected": true, "macAddr": mac}}, "status", "network"))
	require.NoError(f.t, k8s.Status().Update(f.ctx, vm))
}

// claimOfVM is the claim CAPV makes for the VM's first device and first
// pool: named <vm>-0-0, owned by the VSphereVM.
func claimOfVM(vm *unstructured.Unstructured) claimOption {
	return func(c *ipamv1.IPAddressClaim) {
		c.OwnerReferences = []metav1.OwnerReference{{APIVersion: vm.GetAPIVersion(), Kind: vm.GetKind(), Name: vm.GetName(), UID: vm.GetUID()}}
	}
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
// carry the machine's MAC, a CAPV claim waits for its VSphereVM's device
// to have a MAC, is woken when it has one, and its fixed address is a DHCP
// reservation for it. A MAC that changes afterwards is reported, not
// written; a MAC the grid finds on another fixed address fails that claim
// alone, naming the MAC and the holder.
func TestFixedAddressCarriesTheMachinesMAC(t *testing.T) {
	f := newInfobloxFixture(t)
	f.seedNetwork("10.66.0.0/24")
	pool := f.createInfobloxPool("pool", "10.66.0.0/24", func(s *v1alpha1.InfobloxIPPoolSpec) {
		s.Reservation.MACAddress = v1alpha1.InfobloxMACMachine
	})
	f.waitPoolReady(pool)

	vmA := f.createVSphereVM("vm-a")
	claimA := f.createClaim("vm-a-0-0", pool.Name, claimOfVM(vmA))

	t.Run("waits for the MAC, woken when it appears", func(t *testing.T) {
		cond := f.waitClaimReason(claimA, controllers.MACAddressUnknownReason)
		assert.Contains(t, cond.Message, "VSphereVM "+f.ns+"/vm-a has no status.network[0].macAddr yet")
		f.waitEvent(f.ns, claimA.Name, controllers.MACAddressUnknownReason)
		assert.Empty(t, f.fixedAddressOf(claimA.Name), "nothing is reserved without the MAC")

		// Past the first retries of the claim's backoff (1s, 2s, 4s, 8s),
		// the next is seconds away: binding sooner is the watch's doing.
		time.Sleep(8 * time.Second)
		f.setVMMAC(vmA, "00:50:56:AA:BB:01")
		f.waitBoundWithin(claimA, 4*time.Second)

		fixed := f.fixedAddressOf(claimA.Name)
		require.Len(t, fixed, 1)
		assert.Equal(t, "00:50:56:aa:bb:01", fixed[0].MAC)
		assert.Equal(t, "MAC_ADDRESS", fixed[0].MatchClient, "the grid's DHCP serves the address to that MAC")
		got := f.getClaim(claimA)
		assert.Equal(t, "00:50:56:aa:bb:01", got.Annotations[v1alpha1.MACAddressAnnotation])
		f.waitClaimCondition(claimA, v1alpha1.MACAddressCurrentCondition, v1alpha1.MACAddressMatchesReason)
	})

	t.Run("a MAC that changes is reported, not written", func(t *testing.T) {
		f.setVMMAC(vmA, "00:50:56:aa:bb:02")
		cond := f.waitClaimCondition(claimA, v1alpha1.MACAddressCurrentCondition, v1alpha1.MACAddressChangedReason)
		assert.Equal(t, metav1.ConditionFalse, cond.Status)
		assert.Contains(t, cond.Message, "made with MAC 00:50:56:aa:bb:01, but VSphereVM "+f.ns+"/vm-a now gives 00:50:56:aa:bb:02")
		f.waitEvent(f.ns, claimA.Name, v1alpha1.MACAddressChangedReason)
		assert.True(t, conditions.IsTrue(f.getClaim(claimA), ipamv1.IPAddressClaimReadyCondition), "the claim keeps its address")
		fixed := f.fixedAddressOf(claimA.Name)
		require.Len(t, fixed, 1)
		assert.Equal(t, "00:50:56:aa:bb:01", fixed[0].MAC, "the record keeps the MAC it was made with")
	})

	t.Run("a MAC another fixed address holds fails that claim alone", func(t *testing.T) {
		// The NIC moved to vm-b; vm-a's record still holds its MAC.
		vmB := f.createVSphereVM("vm-b")
		f.setVMMAC(vmB, "00:50:56:aa:bb:01")
		claimB := f.createClaim("vm-b-0-0", pool.Name, claimOfVM(vmB))
		vmC := f.createVSphereVM("vm-c")
		f.setVMMAC(vmC, "00:50:56:aa:bb:03")
		claimC := f.createClaim("vm-c-0-0", pool.Name, claimOfVM(vmC))

		cond := f.waitClaimReason(claimB, controllers.MACAddressInUseReason)
		assert.Contains(t, cond.Message, "MAC address 00:50:56:aa:bb:01 is held by fixedaddress/")
		assert.Contains(t, cond.Message, `CAPI-IPAM-Claim="`+f.marker(claimA.Name)+`"`, "the holder is named")
		f.waitEvent(f.ns, claimB.Name, controllers.MACAddressInUseReason)
		assert.Empty(t, f.fixedAddressOf(claimB.Name), "nothing is reserved for the refused claim")

		f.waitBound(claimC)
		assert.Len(t, f.fixedAddressOf(claimC.Name), 1)
		assert.Len(t, f.fixedAddressOf(claimA.Name), 1)
		f.waitPoolReady(pool)
	})

	t.Run("the audit restores a deleted DHCP reservation with its MAC", func(t *testing.T) {
		f.audit(pool) // the one the pool's readiness started is over
		records := f.recordsWithMarker(f.marker("vm-c-0-0"))
		require.Len(t, records, 1)
		f.sys.deleteRecord(records[0])
		require.Empty(t, f.fixedAddressOf("vm-c-0-0"))

		report := f.audit(pool)
		require.Len(t, findings(report, v1alpha1.FindingRestored), 1, "%+v", report)
		fixed := f.fixedAddressOf("vm-c-0-0")
		require.Len(t, fixed, 1)
		assert.Equal(t, records[0].Address.Addr(), fixed[0].Addresses[0], "at the same address")
		assert.Equal(t, "00:50:56:aa:bb:03", fixed[0].MAC, "with the MAC it was made with")
		assert.Equal(t, "MAC_ADDRESS", fixed[0].MatchClient)
	})
}
