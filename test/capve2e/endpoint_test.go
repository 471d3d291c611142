package capve2e

import (
	"context"
	"encoding/json"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/yaml"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	infrav1 "sigs.k8s.io/cluster-api-provider-vsphere/api/govmomi/v1beta2"
)

// The provider's control-plane endpoint opt-in, spelled out: this module
// does not import the provider.
const (
	endpointPoolAnnot     = "ipam-bridge.github.io/control-plane-endpoint-pool"
	endpointVariableAnnot = "ipam-bridge.github.io/control-plane-endpoint-variable"
	endpointClaimSuffix   = "-control-plane-endpoint"
	endpointNameSuffix    = "-api"

	netboxVIPCIDR   = "10.129.0.0/24"
	infobloxVIPCIDR = "10.130.0.0/24"
	vipZone         = "vip.example.com"
	vipVariable     = "controlPlaneIpAddr"
)

// vipPool is a pool of VIPs, and how its record names a cluster.
type vipPool struct {
	pool
	// recordName is the record's name for the cluster.
	recordName func(cluster string) string
}

// TestControlPlaneEndpoint: a Cluster that opts in gets its VIP from a
// NetboxIPPool (the simulator, or the real NetBox of NETBOX_URL) and from
// an InfobloxIPPool (the WAPI simulator), with a record named after the
// Cluster; the address reaches spec.controlPlaneEndpoint, and CAPV's
// VSphereCluster controller provisions the cluster's VSphereCluster with
// it. A ClusterClass cluster gets the address in its variable, which
// Cluster API's own ClusterClass and topology reconcilers carry, through
// the class's patches, into the VSphereCluster's spec.controlPlaneEndpoint
// and the kube-vip manifest of the KubeadmControlPlane they generate. An
// endpoint a user set is never overwritten. Deleting the Cluster releases
// the record.
func TestControlPlaneEndpoint(t *testing.T) {
	ns := "capv-ep-" + randomHex(4)
	require.NoError(t, k8s.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	showLogsOnFailure(t)
	pools := []vipPool{
		{pool: pool{kind: "NetboxIPPool", name: "vips-nb", cidr: netboxVIPCIDR},
			recordName: func(cluster string) string { return cluster + endpointNameSuffix + "." + vipZone }},
		{pool: pool{kind: "InfobloxIPPool", name: "vips-ib", cidr: infobloxVIPCIDR},
			recordName: func(cluster string) string { return cluster + endpointNameSuffix + "." + vipZone }},
	}
	createVIPPools(t, ns, pools)

	for _, p := range pools {
		t.Run(p.kind, func(t *testing.T) {
			short := map[string]string{"NetboxIPPool": "nb", "InfobloxIPPool": "ib"}[p.kind]

			t.Run("plain Cluster", func(t *testing.T) {
				name := "plain-" + short
				cluster := &clusterv1.Cluster{
					ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
						Annotations: map[string]string{endpointPoolAnnot: p.kind + "/" + p.name}},
					Spec: clusterv1.ClusterSpec{InfrastructureRef: clusterv1.ContractVersionedObjectReference{
						APIGroup: infrav1.GroupVersion.Group, Kind: "VSphereCluster", Name: name,
					}},
				}
				require.NoError(t, k8s.Create(t.Context(), cluster))
				createVSphereCluster(t, cluster)
				t.Logf("Cluster %s/%s created with %s=%s", ns, name, endpointPoolAnnot, cluster.Annotations[endpointPoolAnnot])

				vip := waitEndpointClaim(t, p, ns, name)
				require.EventuallyWithT(t, func(c *assert.CollectT) {
					require.NoError(c, k8s.Get(t.Context(), client.ObjectKeyFromObject(cluster), cluster))
					assert.Equal(c, clusterv1.APIEndpoint{Host: vip.String(), Port: 6443}, cluster.Spec.ControlPlaneEndpoint)
				}, waitTimeout, pollInterval)
				t.Logf("Cluster %s: spec.controlPlaneEndpoint is %s:%d", name, cluster.Spec.ControlPlaneEndpoint.Host, cluster.Spec.ControlPlaneEndpoint.Port)

				// CAPV's VSphereCluster controller (govmomi mode) provisions
				// the VSphereCluster of a Cluster whose endpoint is set. It
				// copies no endpoint from the Cluster (only CAPV's
				// supervisor mode does): Cluster API reads the endpoint from
				// the Cluster, and a plain Cluster's kube-vip is given the
				// address by whoever writes its KubeadmControlPlane.
				vsc := &infrav1.VSphereCluster{}
				require.EventuallyWithT(t, func(c *assert.CollectT) {
					require.NoError(c, k8s.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, vsc))
					assert.True(c, ptr.Deref(vsc.Status.Initialization.Provisioned, false), "CAPV has not provisioned VSphereCluster %s: %+v",
						name, vsc.Status.Conditions)
				}, waitTimeout, pollInterval)
				assert.Empty(t, vsc.Spec.ControlPlaneEndpoint.Host, "CAPV's govmomi VSphereCluster controller copies no endpoint from the Cluster")

				deleteClusterReleases(t, p, ns, name, vip)
			})

			t.Run("ClusterClass Cluster", func(t *testing.T) {
				name := "topo-" + short
				createClusterClass(t, ns, name)
				cluster := &clusterv1.Cluster{
					ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: map[string]string{
						endpointPoolAnnot: p.kind + "/" + p.name, endpointVariableAnnot: vipVariable}},
					Spec: clusterv1.ClusterSpec{Topology: clusterv1.Topology{
						ClassRef: clusterv1.ClusterClassRef{Name: name}, Version: "v1.35.0",
						ControlPlane: clusterv1.ControlPlaneTopology{Replicas: ptr.To[int32](1)},
					}},
				}
				require.NoError(t, k8s.Create(t.Context(), cluster))
				t.Logf("Cluster %s/%s created with %s=%s and %s=%s", ns, name, endpointPoolAnnot, cluster.Annotations[endpointPoolAnnot],
					endpointVariableAnnot, vipVariable)

				vip := waitEndpointClaim(t, p, ns, name)
				require.EventuallyWithT(t, func(c *assert.CollectT) {
					require.NoError(c, k8s.Get(t.Context(), client.ObjectKeyFromObject(cluster), cluster))
					var got []string
					for _, v := range cluster.Spec.Topology.Variables {
						got = append(got, v.Name+"="+string(v.Value.Raw))
					}
					assert.Equal(c, []string{vipVariable + "=" + strconv.Quote(vip.String())}, got)
				}, waitTimeout, pollInterval)
				assert.Empty(t, cluster.Spec.ControlPlaneEndpoint.Host, "the provider writes the variable only")

				// Cluster API's topology reconciler generates the
				// VSphereCluster and the KubeadmControlPlane, through the
				// class's patches, with the address.
				require.EventuallyWithT(t, func(c *assert.CollectT) {
					require.NoError(c, k8s.Get(t.Context(), client.ObjectKeyFromObject(cluster), cluster))
					require.True(c, cluster.Spec.InfrastructureRef.IsDefined(), "the topology reconciler has not set the infrastructureRef: %+v",
						conditions.Get(cluster, clusterv1.ClusterTopologyReconciledCondition))
					vsc := &infrav1.VSphereCluster{}
					require.NoError(c, k8s.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: cluster.Spec.InfrastructureRef.Name}, vsc))
					assert.Equal(c, infrav1.APIEndpoint{Host: vip.String(), Port: 6443}, vsc.Spec.ControlPlaneEndpoint)
					if !slices.ContainsFunc(vsc.OwnerReferences, func(r metav1.OwnerReference) bool { return r.Kind == "Cluster" }) {
						// Cluster API's Cluster controller, which this test
						// does not run, would own it by the Cluster.
						before := vsc.DeepCopy()
						require.NoError(c, controllerutil.SetOwnerReference(cluster, vsc, k8s.Scheme()))
						require.NoError(c, k8s.Patch(t.Context(), vsc, client.MergeFrom(before)))
					}
					assert.True(c, ptr.Deref(vsc.Status.Initialization.Provisioned, false), "CAPV has not provisioned VSphereCluster %s (owners %+v): %+v",
						vsc.Name, vsc.OwnerReferences, vsc.Status.Conditions)

					require.True(c, cluster.Spec.ControlPlaneRef.IsDefined())
					kcp := &unstructured.Unstructured{}
					kcp.SetGroupVersionKind(schema.GroupVersionKind{Group: "controlplane.cluster.x-k8s.io", Version: "v1beta2", Kind: "KubeadmControlPlane"})
					require.NoError(c, k8s.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: cluster.Spec.ControlPlaneRef.Name}, kcp))
					files, _, _ := unstructured.NestedSlice(kcp.Object, "spec", "kubeadmConfigSpec", "files")
					require.Len(c, files, 1)
					content, _ := files[0].(map[string]any)["content"].(string)
					assert.Contains(c, content, "value: "+vip.String(), "kube-vip's address")
				}, waitTimeout, pollInterval)
				t.Logf("Cluster %s: variable %s is %s; the topology reconciler wrote it into VSphereCluster %s and KubeadmControlPlane %s",
					name, vipVariable, vip, cluster.Spec.InfrastructureRef.Name, cluster.Spec.ControlPlaneRef.Name)

				deleteClusterReleases(t, p, ns, name, vip)
			})

			t.Run("set by the user", func(t *testing.T) {
				name := "user-" + short
				cluster := &clusterv1.Cluster{
					ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
						Annotations: map[string]string{endpointPoolAnnot: p.kind + "/" + p.name}},
					Spec: clusterv1.ClusterSpec{ControlPlaneEndpoint: clusterv1.APIEndpoint{Host: "192.0.2.10", Port: 443}},
				}
				require.NoError(t, k8s.Create(t.Context(), cluster))
				e := waitClusterEvent(t, ns, name, "ControlPlaneEndpointAlreadySet")
				assert.Equal(t, corev1.EventTypeWarning, e.Type)
				assert.Contains(t, e.Note, "192.0.2.10")
				require.NoError(t, k8s.Get(t.Context(), client.ObjectKeyFromObject(cluster), cluster))
				assert.Equal(t, clusterv1.APIEndpoint{Host: "192.0.2.10", Port: 443}, cluster.Spec.ControlPlaneEndpoint)
				err := k8s.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name + endpointClaimSuffix}, &ipamv1.IPAddressClaim{})
				assert.True(t, client.IgnoreNotFound(err) == nil && err != nil, "no claim for a Cluster whose endpoint is set (%v)", err)
				_, _, found := findRecordFor(t, p.pool, marker(ns, name+endpointClaimSuffix))
				assert.False(t, found, "nothing reserved")
			})
		})
	}
}

// waitEndpointClaim waits until the Cluster's endpoint claim is bound, and
// checks its record names the Cluster: the VIP.
func waitEndpointClaim(t *testing.T, p vipPool, ns, cluster string) netip.Addr {
	t.Helper()
	claim := &ipamv1.IPAddressClaim{}
	key := client.ObjectKey{Namespace: ns, Name: cluster + endpointClaimSuffix}
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.NoError(c, k8s.Get(t.Context(), key, claim), "no endpoint claim %s", key.Name)
		require.True(c, conditions.IsTrue(claim, ipamv1.IPAddressClaimReadyCondition), "claim %s is not Ready: %+v", key.Name,
			conditions.Get(claim, ipamv1.IPAddressClaimReadyCondition))
	}, waitTimeout, pollInterval)
	owner := metav1.GetControllerOf(claim)
	require.NotNil(t, owner, "the Cluster owns its endpoint's claim")
	assert.Equal(t, "Cluster", owner.Kind)
	assert.Equal(t, cluster, owner.Name)
	assert.True(t, ptr.Deref(owner.BlockOwnerDeletion, false))
	assert.Equal(t, cluster, claim.Spec.ClusterName)
	address := &ipamv1.IPAddress{}
	require.NoError(t, k8s.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: claim.Status.AddressRef.Name}, address))
	vip := netip.MustParseAddr(address.Spec.Address)
	assert.True(t, netip.MustParsePrefix(p.cidr).Contains(vip), "%s is not in %s", vip, p.cidr)

	got, name, desc, found := findRecordDescribed(t, p.pool, marker(ns, key.Name))
	require.True(t, found, "no %s record for claim %s", p.kind, key.Name)
	assert.Equal(t, vip, got)
	assert.Equal(t, p.recordName(cluster), name)
	assert.Equal(t, "API server of cluster "+cluster, desc)
	t.Logf("%s record: address %s, name %q, description %q, marker %s", recordSystem(p.pool), got, name, desc, marker(ns, key.Name))
	return vip
}

// deleteClusterReleases deletes the Cluster and checks that its claim, and
// then its record, go. Kubernetes' garbage collector, which envtest does
// not run, deletes the claim the Cluster owns once the Cluster is gone:
// the test does that deletion.
func deleteClusterReleases(t *testing.T, p vipPool, ns, cluster string, vip netip.Addr) {
	t.Helper()
	require.NoError(t, k8s.Delete(t.Context(), &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: cluster}}))
	waitGone(t, &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: cluster}}, waitTimeout)
	t.Logf("Cluster %s deleted", cluster)
	claim := &ipamv1.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: cluster + endpointClaimSuffix}}
	_, _, found := findRecordFor(t, p.pool, marker(ns, claim.Name))
	assert.True(t, found, "the record went before its claim")
	require.NoError(t, client.IgnoreNotFound(k8s.Delete(t.Context(), claim)), "the garbage collector's deletion")
	waitGone(t, claim, waitTimeout)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		_, _, found := findRecordFor(t, p.pool, marker(ns, claim.Name))
		assert.False(c, found, "the record of %s was not released", claim.Name)
	}, waitTimeout, pollInterval)
	for _, r := range recordsAt(t, p.pool, vip) {
		t.Errorf("%s still holds a record: %s", vip, r)
	}
	t.Logf("%s: no record holds %s any more", recordSystem(p.pool), vip)
}

// createVIPPools seeds a network of each IPAM system and creates a pool of
// each that names the record <cluster>-api.<zone> and describes it.
func createVIPPools(t *testing.T, ns string, pools []vipPool) {
	token := randomHex(20)
	require.NoError(t, sims.addNetboxToken(token))
	require.NoError(t, sims.addNetboxPrefix(netboxVIPCIDR))
	user, password := "capi-"+ns, "pw-"+randomHex(8)
	require.NoError(t, sims.addWAPIUser(user, password))
	require.NoError(t, sims.addWAPINetwork("default", infobloxVIPCIDR))
	require.NoError(t, sims.addWAPIFixedAddress("default", netip.MustParsePrefix(infobloxVIPCIDR).Addr().Next().String()))
	require.NoError(t, sims.addWAPIZone("default", vipZone))
	createSecret(t, ns, netboxSecretName, map[string][]byte{"token": []byte(token)})
	createSecret(t, ns, infobloxSecretName, map[string][]byte{
		"username": []byte(user), "password": []byte(password), "ca.crt": []byte(sims.ep.WAPICA),
	})
	port, err := strconv.Atoi(sims.ep.WAPIPort)
	require.NoError(t, err)
	specs := map[string]map[string]any{
		"NetboxIPPool": {
			"connection": map[string]any{"url": sims.ep.NetboxURL, "credentialsSecretRef": map[string]any{"name": netboxSecretName}},
			"sources":    []any{map[string]any{"prefix": map[string]any{"cidr": netboxVIPCIDR}}},
			"reservation": map[string]any{
				"dnsNamePattern":     "{{ .MachineName }}." + vipZone,
				"descriptionPattern": "API server of cluster {{ .ClusterName }}",
			},
		},
		"InfobloxIPPool": {
			"connection": map[string]any{"host": sims.ep.WAPIHost, "port": int64(port),
				"credentialsSecretRef": map[string]any{"name": infobloxSecretName}},
			"sources": []any{map[string]any{"network": map[string]any{"cidr": infobloxVIPCIDR}}},
			"reservation": map[string]any{
				"objectType": "HostRecord", "namePattern": "{{ .MachineName }}", "dns": map[string]any{"zone": vipZone},
				"commentPattern": "API server of cluster {{ .ClusterName }}",
			},
		},
	}
	var objs []*unstructured.Unstructured
	for _, p := range pools {
		u := &unstructured.Unstructured{Object: map[string]any{"spec": specs[p.kind]}}
		u.SetGroupVersionKind(schema.GroupVersionKind{Group: poolGroup, Version: poolVersion, Kind: p.kind})
		u.SetNamespace(ns)
		u.SetName(p.name)
		require.NoError(t, k8s.Create(t.Context(), u), "creating %s %s", p.kind, p.name)
		objs = append(objs, u)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
		defer cancel()
		for _, u := range objs {
			assert.NoError(t, client.IgnoreNotFound(k8s.Delete(ctx, u)), "deleting %s %s", u.GetKind(), u.GetName())
		}
	})
	waitPoolsReady(t, objs)
}

// createVSphereCluster creates what the user's template would, the
// VSphereCluster of a plain Cluster, with no endpoint, owned by the
// Cluster as Cluster API's Cluster controller would make it.
func createVSphereCluster(t *testing.T, cluster *clusterv1.Cluster) {
	vsc := &infrav1.VSphereCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: cluster.Namespace, Name: cluster.Name,
			Labels: map[string]string{clusterv1.ClusterNameLabel: cluster.Name}},
		Spec: infrav1.VSphereClusterSpec{Server: vc.url.Host},
	}
	require.NoError(t, controllerutil.SetOwnerReference(cluster, vsc, k8s.Scheme()))
	require.NoError(t, k8s.Create(t.Context(), vsc))
}

// classTemplatesYAML are the templates of the tests' ClusterClasses: a
// VSphereCluster, a control-plane VSphereMachine with one DHCP device, and
// a KubeadmControlPlane.
const classTemplatesYAML = `
apiVersion: infrastructure.cluster.x-k8s.io/v1beta2
kind: VSphereClusterTemplate
metadata: {name: NAME}
spec:
  template:
    spec: {server: SERVER}
---
apiVersion: infrastructure.cluster.x-k8s.io/v1beta2
kind: VSphereMachineTemplate
metadata: {name: NAME}
spec:
  template:
    spec: {template: TEMPLATE, server: SERVER, network: {devices: [{networkName: VM Network, dhcp4: true}]}}
---
apiVersion: controlplane.cluster.x-k8s.io/v1beta2
kind: KubeadmControlPlaneTemplate
metadata: {name: NAME}
spec:
  template:
    spec:
      kubeadmConfigSpec: {format: cloud-config}
`

// clusterClassYAML is a ClusterClass as CAPV's quick-start writes it, cut
// to what the endpoint needs: the variable, not required (the provider
// writes it after the Cluster is created), patched into the
// VSphereClusterTemplate's endpoint and kube-vip's manifest once set.
const clusterClassYAML = classTemplatesYAML + `---
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
  variables:
  - name: controlPlaneIpAddr
    required: false
    schema:
      openAPIV3Schema: {type: string, description: The control-plane endpoint's VIP; written by the IPAM provider when empty.}
  patches:
  - name: controlPlaneEndpoint
    enabledIf: '{{ if .controlPlaneIpAddr }}true{{ end }}'
    definitions:
    - selector:
        apiVersion: infrastructure.cluster.x-k8s.io/v1beta2
        kind: VSphereClusterTemplate
        matchResources: {infrastructureCluster: true}
      jsonPatches:
      - op: add
        path: /spec/template/spec/controlPlaneEndpoint
        valueFrom:
          template: |
            host: '{{ .controlPlaneIpAddr }}'
            port: 6443
    - selector:
        apiVersion: controlplane.cluster.x-k8s.io/v1beta2
        kind: KubeadmControlPlaneTemplate
        matchResources: {controlPlane: true}
      jsonPatches:
      - op: add
        path: /spec/template/spec/kubeadmConfigSpec/files
        valueFrom:
          template: |
            - path: /etc/kubernetes/manifests/kube-vip.yaml
              owner: root:root
              content: |
                env:
                - name: address
                  value: {{ .controlPlaneIpAddr }}
`

// createClusterClass creates the ClusterClass and its templates, and
// waits until Cluster API's ClusterClass reconciler has read its
// variables.
func createClusterClass(t *testing.T, ns, name string) {
	t.Helper()
	createClusterClassFrom(t, ns, name, clusterClassYAML)
}

// createClusterClassFrom is createClusterClass with the manifest given.
func createClusterClassFrom(t *testing.T, ns, name, manifest string) {
	t.Helper()
	manifest = strings.NewReplacer("NAME", name, "SERVER", vc.url.Host, "TEMPLATE", templateName).Replace(manifest)
	for _, doc := range strings.Split(manifest, "\n---\n") {
		u := &unstructured.Unstructured{}
		require.NoError(t, yaml.Unmarshal([]byte(doc), &u.Object))
		u.SetNamespace(ns)
		require.NoError(t, k8s.Create(t.Context(), u), "creating %s %s", u.GetKind(), u.GetName())
	}
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		class := &clusterv1.ClusterClass{}
		require.NoError(c, k8s.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, class))
		assert.Equal(c, class.Generation, class.Status.ObservedGeneration)
		assert.True(c, conditions.IsTrue(class, clusterv1.ClusterClassVariablesReadyCondition), "%+v",
			conditions.Get(class, clusterv1.ClusterClassVariablesReadyCondition))
	}, waitTimeout, pollInterval)
}

// clusterEvent is the part of an events.k8s.io Event the tests read.
type clusterEvent struct {
	Type, Reason, Note string
}

// waitClusterEvent waits for an event of the reason on the Cluster.
func waitClusterEvent(t *testing.T, ns, cluster, reason string) clusterEvent {
	t.Helper()
	return waitEventOn(t, ns, "Cluster", cluster, reason)
}

// findRecordFor is findRecord for tests that run after the claim may have
// gone: it never fails for a missing record.
func findRecordFor(t *testing.T, p pool, marker string) (netip.Addr, string, bool) {
	addr, name, _, found := findRecordDescribed(t, p, marker)
	return addr, name, found
}

// findRecordDescribed finds the reservation of a marker: its address, its
// name and its description (NetBox) or comment (Infoblox).
func findRecordDescribed(t *testing.T, p pool, marker string) (netip.Addr, string, string, bool) {
	t.Helper()
	if p.netbox() {
		ips, err := sims.netboxIPAddresses()
		require.NoError(t, err)
		for _, ip := range ips {
			if ip.CustomFields[netboxMarkerField] == marker {
				return netip.MustParsePrefix(ip.Address).Addr(), ip.DNSName, ip.Description, true
			}
		}
		return netip.Addr{}, "", "", false
	}
	for _, objtype := range []string{"record:host", "fixedaddress"} {
		objs, err := sims.wapiObjects(objtype)
		require.NoError(t, err)
		for _, o := range objs {
			if o.EAs[infobloxMarkerEA] == marker && len(o.Addresses) == 1 {
				return netip.MustParseAddr(o.Addresses[0]), o.Name, o.Comment, true
			}
		}
	}
	return netip.Addr{}, "", "", false
}

// recordsAt lists the records, of any marker, that hold an address.
func recordsAt(t *testing.T, p pool, addr netip.Addr) []string {
	t.Helper()
	var out []string
	if p.netbox() {
		ips, err := sims.netboxIPAddresses()
		require.NoError(t, err)
		for _, ip := range ips {
			if netip.MustParsePrefix(ip.Address).Addr() == addr {
				b, _ := json.Marshal(ip)
				out = append(out, string(b))
			}
		}
		return out
	}
	for _, objtype := range []string{"record:host", "fixedaddress"} {
		objs, err := sims.wapiObjects(objtype)
		require.NoError(t, err)
		for _, o := range objs {
			for _, a := range o.Addresses {
				if a == addr.String() {
					b, _ := json.Marshal(o)
					out = append(out, string(b))
				}
			}
		}
	}
	return out
}

func recordSystem(p pool) string {
	switch {
	case p.netbox() && sims.ep.NetboxReal:
		return "real NetBox"
	case p.netbox():
		return "NetBox simulator"
	}
	return "WAPI simulator"
}

// showLogsOnFailure prints the manager's and CAPV's logs when the test
// fails, or when SHOW_MANAGER_LOGS is set.
func showLogsOnFailure(t *testing.T) {
	t.Cleanup(func() {
		if t.Failed() || showLogs() {
			t.Logf("manager log (tail):\n%s", manager.tail(200))
			t.Logf("CAPV and Cluster API log (tail):\n%s", capvLog.tail(120))
		}
	})
}
