package capve2e

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	infrav1 "sigs.k8s.io/cluster-api-provider-vsphere/api/govmomi/v1beta2"
)

// subnetParentCIDR is the container the clusters' subnets are carved from;
// no other test uses it.
const subnetParentCIDR = "10.180.0.0/16"

// subnetClassYAML is a ClusterClass whose control-plane machines take their
// first device's address from the Cluster's nodes pool, named from the
// Cluster's name as docs/subnets.md shows.
const subnetClassYAML = classTemplatesYAML + `---
apiVersion: cluster.x-k8s.io/v1beta2
kind: ClusterClass
metadata: {name: NAME}
spec:
  infrastructure:
    templateRef: {apiVersion: infrastructure.cluster.x-k8s.io/v1beta2, kind: VSphereClusterTemplate, name: NAME}
  controlPlane:
    templateRef: {apiVersion: controlplane.cluster.x-k8s.io/v1beta2, kind: KubeadmControlPlaneTemplate, name: NAME}
    machineInfrastructure:
      templateRef: {apiVersion: infrastructure.cluster.x-k8s.io/v1beta2, kind: VSphereMachineTemplate, name: NAME}
  patches:
  - name: nodesSubnet
    definitions:
    - selector:
        apiVersion: infrastructure.cluster.x-k8s.io/v1beta2
        kind: VSphereMachineTemplate
        matchResources: {controlPlane: true}
      jsonPatches:
      - op: add
        path: /spec/template/spec/network/devices/0/addressesFromPools
        valueFrom:
          template: |
            - apiGroup: ipam-bridge.github.io
              kind: NetboxIPPool
              name: {{ .builtin.cluster.name }}-nodes
      - op: replace
        path: /spec/template/spec/network/devices/0/dhcp4
        value: false
`

// TestClusterClassClusterGetsItsSubnet: a ClusterClass Cluster and its
// ClusterSubnet. The provider carves the Cluster's /24 from the parent
// container in NetBox, with the subnet's marker, holds its gateway and
// makes the nodes pool <cluster>-nodes; Cluster API's topology reconciler
// writes that pool, through the class's patch, into the control plane's
// VSphereMachineTemplate; CAPV claims the machine's address from it, inside
// the subnet, with its gateway. Deleting the machine, the Cluster and (as
// the garbage collector would) the ClusterSubnet releases the machine's
// address, then the gateway, then the child: the parent is whole again.
func TestClusterClassClusterGetsItsSubnet(t *testing.T) {
	ctx := t.Context()
	ns := "capv-sn-" + randomHex(4)
	require.NoError(t, k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	showLogsOnFailure(t)
	if sims.ep.NetboxReal {
		t.Logf("NetBox: the real NetBox of NETBOX_URL, through %s", sims.ep.NetboxURL)
	}

	token := randomHex(20)
	require.NoError(t, sims.addNetboxToken(token))
	require.NoError(t, sims.addNetboxContainer(subnetParentCIDR))
	createSecret(t, ns, netboxSecretName+"-"+ns, map[string][]byte{"token": []byte(token)})
	parent := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{
		"connection":    map[string]any{"url": sims.ep.NetboxURL, "credentialsSecretRef": map[string]any{"name": netboxSecretName + "-" + ns}},
		"sources":       []any{map[string]any{"prefix": map[string]any{"cidr": subnetParentCIDR}}},
		"childPrefixes": map[string]any{"length": int64(24)},
		"reservation":   map[string]any{"descriptionPattern": "subnet of cluster {{ .ClusterName }}"},
	}}}
	parent.SetGroupVersionKind(schema.GroupVersionKind{Group: poolGroup, Version: poolVersion, Kind: "NetboxIPPool"})
	parent.SetNamespace(ns)
	parent.SetName("cluster-subnets")
	require.NoError(t, k8s.Create(ctx, parent))
	waitPoolsReady(t, []*unstructured.Unstructured{parent})

	const name = "snc"
	createClusterClassFrom(t, ns, name, subnetClassYAML)
	cluster := &clusterv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: clusterv1.ClusterSpec{Topology: clusterv1.Topology{
			ClassRef: clusterv1.ClusterClassRef{Name: name}, Version: "v1.35.0",
			ControlPlane: clusterv1.ControlPlaneTopology{Replicas: ptr.To[int32](1)},
		}},
	}
	require.NoError(t, k8s.Create(ctx, cluster))
	subnet := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{
		"clusterName":   name,
		"parentPoolRef": map[string]any{"kind": "NetboxIPPool", "name": "cluster-subnets"},
	}}}
	subnet.SetGroupVersionKind(schema.GroupVersionKind{Group: poolGroup, Version: poolVersion, Kind: "ClusterSubnet"})
	subnet.SetNamespace(ns)
	subnet.SetName(name)
	require.NoError(t, k8s.Create(ctx, subnet))

	var child netip.Prefix
	var gateway string
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.NoError(c, k8s.Get(ctx, client.ObjectKeyFromObject(subnet), subnet))
		conds, _, _ := unstructured.NestedSlice(subnet.Object, "status", "conditions")
		require.NotEmpty(c, conds, "the ClusterSubnet has no condition yet")
		ready := conds[0].(map[string]any)
		require.Equal(c, "True", ready["status"], "%s: %s", ready["reason"], ready["message"])
		prefix, _, _ := unstructured.NestedString(subnet.Object, "status", "prefix")
		gateway, _, _ = unstructured.NestedString(subnet.Object, "status", "gateway")
		var err error
		child, err = netip.ParsePrefix(prefix)
		require.NoError(c, err)
	}, waitTimeout, pollInterval)
	t.Logf("ClusterSubnet %s: %s, gateway %s, pool %s-nodes", name, child, gateway, name)
	assert.Equal(t, 24, child.Bits())
	assert.True(t, netip.MustParsePrefix(subnetParentCIDR).Contains(child.Addr()))
	assert.Equal(t, child.Addr().Next().String(), gateway)
	children := func() []netboxPrefix {
		t.Helper()
		out, err := sims.netboxPrefixesWithin(subnetParentCIDR)
		require.NoError(t, err)
		return out
	}
	got := children()
	require.Len(t, got, 1)
	assert.Equal(t, child.String(), got[0].Prefix)
	assert.Equal(t, marker(ns, name), got[0].CustomFields[netboxMarkerField], "the child carries the subnet's marker")
	assert.Equal(t, "subnet of cluster "+name, got[0].Description, "the IPAM team sees which cluster holds it")
	t.Logf("NetBox: prefix %s, %q, %s=%v", got[0].Prefix, got[0].Description, netboxMarkerField, got[0].CustomFields[netboxMarkerField])

	// The topology reconciler's control-plane machine template names the
	// nodes pool; a machine made from it, as the KubeadmControlPlane
	// controller (not run here) would make it, gets its address from it.
	var devices []infrav1.NetworkDeviceSpec
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.NoError(c, k8s.Get(ctx, client.ObjectKeyFromObject(cluster), cluster))
		require.True(c, cluster.Spec.ControlPlaneRef.IsDefined() && cluster.Spec.InfrastructureRef.IsDefined(),
			"the topology reconciler has not run: %+v", conditions.Get(cluster, clusterv1.ClusterTopologyReconciledCondition))
		kcp := &unstructured.Unstructured{}
		kcp.SetGroupVersionKind(schema.GroupVersionKind{Group: "controlplane.cluster.x-k8s.io", Version: "v1beta2", Kind: "KubeadmControlPlane"})
		require.NoError(c, k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: cluster.Spec.ControlPlaneRef.Name}, kcp))
		template, _, _ := unstructured.NestedString(kcp.Object, "spec", "machineTemplate", "spec", "infrastructureRef", "name")
		vmt := &infrav1.VSphereMachineTemplate{}
		require.NoError(c, k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: template}, vmt))
		devices = vmt.Spec.Template.Spec.Network.Devices
		require.Len(c, devices, 1)
		assert.Equal(c, []infrav1.IPPoolReference{{APIGroup: poolGroup, Kind: "NetboxIPPool", Name: name + "-nodes"}}, devices[0].AddressesFromPools)
	}, waitTimeout, pollInterval)
	cluster.Status.Initialization.InfrastructureProvisioned = ptr.To(true)
	require.NoError(t, k8s.Status().Update(ctx, cluster))
	names := machineNames{cluster: name, machine: name + "-cp-4tq8z", vsphereMachine: name + "-cp-infra-4tq8z", bootstrap: name + "-cp-bootstrap-4tq8z"}
	createMachineOf(t, ns, names, devices)

	claim := &ipamv1.IPAddressClaim{}
	claimKey := client.ObjectKey{Namespace: ns, Name: names.machine + "-vm-0-0"}
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.NoError(c, k8s.Get(ctx, claimKey, claim), "CAPV has not created claim %s", claimKey.Name)
		require.NotEmpty(c, claim.Status.AddressRef.Name, "claim %s is not bound: %+v", claim.Name, conditions.Get(claim, ipamv1.IPAddressClaimReadyCondition))
	}, 2*waitTimeout, pollInterval)
	address := &ipamv1.IPAddress{}
	require.NoError(t, k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: claim.Status.AddressRef.Name}, address))
	addr := netip.MustParseAddr(address.Spec.Address)
	assert.True(t, child.Contains(addr), "the machine's %s inside %s", addr, child)
	assert.NotEqual(t, gateway, addr.String(), "never the router's address")
	assert.Equal(t, gateway, address.Spec.Gateway)
	assert.Equal(t, int32(24), ptr.Deref(address.Spec.Prefix, 0))
	recorded, _, found := findRecord(t, pool{kind: "NetboxIPPool"}, marker(ns, claim.Name))
	require.True(t, found)
	assert.Equal(t, addr, recorded)
	t.Logf("VSphereVM %s-vm: claim %s bound to %s/%d, gateway %s, recorded in NetBox", names.machine, claim.Name, addr, *address.Spec.Prefix, address.Spec.Gateway)

	// The Cluster goes, as Cluster API deletes it: its machines first (the
	// VSphereMachine, whose VSphereVM lets go of its claim), then the
	// Cluster; the garbage collector, which this test does not run, then
	// deletes what they owned (the claim, the ClusterSubnet): the test does
	// what it would, the ClusterSubnet first, which waits for the machine's
	// address before its child.
	require.NoError(t, k8s.Delete(ctx, &infrav1.VSphereMachine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: names.vsphereMachine}}))
	waitGone(t, &infrav1.VSphereVM{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: names.machine + "-vm"}}, 2*waitTimeout)
	require.NoError(t, k8s.Delete(ctx, cluster))
	waitGone(t, cluster, waitTimeout)
	assert.Contains(t, subnet.GetOwnerReferences(), metav1.OwnerReference{APIVersion: clusterv1.GroupVersion.String(), Kind: "Cluster",
		Name: name, UID: cluster.UID}, "the Cluster owns its ClusterSubnet, which the garbage collector deletes with it")
	require.NoError(t, k8s.Delete(ctx, subnet), "the garbage collector's deletion of the Cluster's ClusterSubnet")
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.NoError(c, k8s.Get(ctx, client.ObjectKeyFromObject(subnet), subnet))
		conds, _, _ := unstructured.NestedSlice(subnet.Object, "status", "conditions")
		require.NotEmpty(c, conds)
		assert.Equal(c, "SubnetDeleting", conds[0].(map[string]any)["reason"])
	}, waitTimeout, pollInterval)
	assert.Len(t, children(), 1, "the child stays while the machine's claim holds an address in it")
	require.NoError(t, client.IgnoreNotFound(k8s.Delete(ctx, claim)), "the garbage collector's deletion")
	waitGone(t, subnet, 2*waitTimeout)
	assert.Empty(t, children(), "the parent is whole again")
	_, _, found = findRecordFor(t, pool{kind: "NetboxIPPool"}, marker(ns, claim.Name))
	assert.False(t, found, "the machine's record was released")
	_, _, found = findRecordFor(t, pool{kind: "NetboxIPPool"}, marker(ns, name+"-gateway"))
	assert.False(t, found, "the gateway's record was released")
	t.Logf("Cluster %s deleted: NetBox holds nothing inside %s", name, subnetParentCIDR)
}
