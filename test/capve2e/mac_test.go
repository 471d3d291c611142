package capve2e

import (
	"context"
	"net/netip"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	infrav1 "sigs.k8s.io/cluster-api-provider-vsphere/api/govmomi/v1beta2"
)

// The provider's MAC annotations and condition, spelled out.
const (
	macAnnot          = "ipam-bridge.github.io/mac-address"
	macSourceAnnot    = "ipam-bridge.github.io/mac-address-source"
	macCurrentCond    = "MACAddressCurrent"
	macDeferredReason = "MACAddressDeferred"
	macWrittenReason  = "MACAddressWritten"

	deferredMACCIDR = "10.131.0.0/24"
)

// TestCAPVVMsMACWrittenLate: a VSphereMachine's device without a macAddr
// names an InfobloxIPPool whose fixed addresses carry the machine's MAC.
// vSphere gives the device its MAC only once CAPV has cloned the VM, which
// needs the address: the fixed address is reserved without one (the claim
// says MACAddressDeferred). Once CAPV's VSphereVM reports the MAC vcsim
// gave the NIC (status.network[0].macAddr), the provider writes it into
// the fixed address with match_client MAC_ADDRESS, and the claim says so
// (MACAddressCurrent True, MACAddressWritten).
func TestCAPVVMsMACWrittenLate(t *testing.T) {
	ctx := t.Context()
	ns := "capv-mac-" + randomHex(4)
	require.NoError(t, k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	showLogsOnFailure(t)

	user, password := "capi-"+ns, "pw-"+randomHex(8)
	require.NoError(t, sims.addWAPIUser(user, password))
	require.NoError(t, sims.addWAPINetwork("default", deferredMACCIDR))
	require.NoError(t, sims.addWAPIFixedAddress("default", netip.MustParsePrefix(deferredMACCIDR).Addr().Next().String()))
	createSecret(t, ns, infobloxSecretName, map[string][]byte{
		"username": []byte(user), "password": []byte(password), "ca.crt": []byte(sims.ep.WAPICA),
	})
	port, err := strconv.Atoi(sims.ep.WAPIPort)
	require.NoError(t, err)
	p := pool{kind: "InfobloxIPPool", name: "dhcp", cidr: deferredMACCIDR}
	u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{
		"connection": map[string]any{"host": sims.ep.WAPIHost, "port": int64(port),
			"credentialsSecretRef": map[string]any{"name": infobloxSecretName}},
		"sources":     []any{map[string]any{"network": map[string]any{"cidr": deferredMACCIDR}}},
		"reservation": map[string]any{"objectType": "FixedAddress", "namePattern": "{{ .MachineName }}", "macAddress": "Machine"},
	}}}
	u.SetGroupVersionKind(schema.GroupVersionKind{Group: poolGroup, Version: poolVersion, Kind: p.kind})
	u.SetNamespace(ns)
	u.SetName(p.name)
	require.NoError(t, k8s.Create(ctx, u))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
		defer cancel()
		assert.NoError(t, client.IgnoreNotFound(k8s.Delete(ctx, u)))
	})
	waitPoolsReady(t, []*unstructured.Unstructured{u})

	names := machineNames{cluster: "capv-mac", machine: "capv-mac-md-0-4fj2k-x7wq9", vsphereMachine: "capv-mac-md-0-infra-x7wq9",
		bootstrap: "capv-mac-md-0-bootstrap-x7wq9"}
	vmName := names.machine + "-vm"
	createMachineNamed(t, ns, names, []infrav1.NetworkDeviceSpec{{NetworkName: "VM Network",
		AddressesFromPools: []infrav1.IPPoolReference{{APIGroup: poolGroup, Kind: p.kind, Name: p.name}}}})
	claimKey := client.ObjectKey{Namespace: ns, Name: vmName + "-0-0"}

	// CAPV's claim is bound without a MAC, and says why.
	claim := &ipamv1.IPAddressClaim{}
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.NoError(c, k8s.Get(ctx, claimKey, claim), "CAPV has not created the claim")
		require.True(c, conditions.IsTrue(claim, ipamv1.IPAddressClaimReadyCondition), "%+v",
			conditions.Get(claim, ipamv1.IPAddressClaimReadyCondition))
	}, waitTimeout, pollInterval)
	marker := marker(ns, claimKey.Name)

	// CAPV clones the VM with the address, and reports the MAC vSphere
	// gave its NIC once the VM is ready.
	vm := &infrav1.VSphereVM{}
	var vmMAC string
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.NoError(c, k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: vmName}, vm))
		require.NotEmpty(c, vm.Status.Network, "CAPV reports no network status yet (VM ready: %v)", vm.Status.Ready)
		vmMAC = strings.ToLower(vm.Status.Network[0].MACAddr)
		require.NotEmpty(c, vmMAC)
	}, 2*waitTimeout, pollInterval)
	assert.Empty(t, vm.Spec.Network.Devices[0].MACAddr, "the MAC is vSphere's, not the spec's")
	t.Logf("VSphereVM %s reports MAC %s for its device 0", vmName, vmMAC)

	// The fixed address then carries it, matched by MAC, and the claim
	// says so.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		objs, err := sims.wapiObjects("fixedaddress")
		require.NoError(c, err)
		var fixed []wapiObject
		for _, o := range objs {
			if o.EAs[infobloxMarkerEA] == marker {
				fixed = append(fixed, o)
			}
		}
		require.Len(c, fixed, 1)
		assert.Equal(c, vmMAC, fixed[0].MAC)
		assert.Equal(c, "MAC_ADDRESS", fixed[0].MatchClient)
		assert.Equal(c, names.machine, fixed[0].Name)
	}, waitTimeout, pollInterval)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.NoError(c, k8s.Get(ctx, claimKey, claim))
		cond := conditions.Get(claim, macCurrentCond)
		require.NotNil(c, cond)
		assert.Equal(c, metav1.ConditionTrue, cond.Status)
		assert.Equal(c, macWrittenReason, cond.Reason, cond.Message)
		assert.Equal(c, vmMAC, claim.Annotations[macAnnot])
		assert.Equal(c, "VSphereVM.infrastructure.cluster.x-k8s.io/"+ns+"/"+vmName, claim.Annotations[macSourceAnnot])
	}, waitTimeout, pollInterval)
	t.Logf("claim %s: %s %s: %s", claimKey.Name, macCurrentCond, conditions.Get(claim, macCurrentCond).Reason,
		conditions.Get(claim, macCurrentCond).Message)
	e := waitEventOn(t, ns, "IPAddressClaim", claimKey.Name, macDeferredReason)
	assert.Contains(t, e.Note, "reserved without a MAC")
}

// waitEventOn waits for an event of the reason on an object.
func waitEventOn(t *testing.T, ns, kind, name, reason string) clusterEvent {
	t.Helper()
	var found clusterEvent
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(schema.GroupVersionKind{Group: "events.k8s.io", Version: "v1", Kind: "EventList"})
		require.NoError(c, k8s.List(t.Context(), list, client.InNamespace(ns)))
		for _, e := range list.Items {
			n, _, _ := unstructured.NestedString(e.Object, "regarding", "name")
			k, _, _ := unstructured.NestedString(e.Object, "regarding", "kind")
			r, _, _ := unstructured.NestedString(e.Object, "reason")
			if k == kind && n == name && r == reason {
				found.Reason = r
				found.Type, _, _ = unstructured.NestedString(e.Object, "type")
				found.Note, _, _ = unstructured.NestedString(e.Object, "note")
				return
			}
		}
		assert.Fail(c, "no event", "no %s event on %s %s", reason, kind, name)
	}, waitTimeout, pollInterval)
	return found
}
