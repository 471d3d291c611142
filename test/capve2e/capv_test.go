package capve2e

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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

const (
	waitTimeout  = 60 * time.Second
	pollInterval = 200 * time.Millisecond

	// The provider's API, spelled out: this module does not import it.
	poolGroup          = "ipam-bridge.github.io"
	poolVersion        = "v1alpha1"
	credentialsLabel   = "ipam-bridge.github.io/credentials"
	machineNameAnnot   = "ipam-bridge.github.io/machine-name"
	netboxMarkerField  = "capi_ipam_claim"
	infobloxMarkerEA   = "CAPI-IPAM-Claim"
	netboxSecretName   = "netbox"
	infobloxSecretName = "infoblox"
)

// The CIDRs of this test, which no other test uses: a real NetBox's
// database is shared by every test of a run.
const (
	netboxCIDR         = "10.125.0.0/24"
	globalNetboxCIDR   = "10.126.0.0/24"
	infobloxCIDR       = "2001:db8:127::/64"
	globalInfobloxCIDR = "10.128.0.0/24"
	infobloxZone       = "ib.example.com"
)

// The CAPI and CAPV objects, named as a MachineDeployment would name them:
// the Machine, its VSphereMachine and the VSphereVM (named by the
// VSphereMachine's naming template, by default the Machine's name) all have
// different names, so that the records show which one they carry.
const (
	clusterName        = "capv"
	machineName        = "capv-md-0-7xk2p-ghs8d"
	vsphereMachineName = "capv-md-0-infra-ghs8d"
	vmNamingTemplate   = "{{ .machine.name }}-vm"
	vmName             = machineName + "-vm"
	bootstrapSecret    = "capv-md-0-bootstrap-ghs8d"
	// deviceMAC is the third network device's MAC, set in the
	// VSphereMachine (VMware's OUI, as CAPV asks).
	deviceMAC = "00:50:56:3F:00:07"
)

// pool is one pool a network device names, and what the test expects of
// its claim.
type pool struct {
	kind, name, cidr string
	// device and index place the pool in the VSphereMachine's network
	// devices; CAPV names the claim <vm>-<device>-<index>.
	device, index int
	// wantName is the record's name: NetBox's DNS name, Infoblox's host
	// record or fixed address name.
	wantName string
}

func (p pool) claimName() string {
	return vmName + "-" + strconv.Itoa(p.device) + "-" + strconv.Itoa(p.index)
}

func (p pool) netbox() bool { return strings.HasSuffix(p.kind, "NetboxIPPool") }

// TestCAPVDrivesOurPools: a VSphereMachine's first network device names a
// NetboxIPPool, its second a GlobalNetboxIPPool and an (IPv6)
// InfobloxIPPool, its third a GlobalInfobloxIPPool whose fixed addresses
// carry the device's MAC (set in the VSphereMachine). CAPV's VSphereMachine
// controller makes the VSphereVM, its VSphereVM controller creates one
// claim per pool reference, our manager binds them with records named after
// the Machine, CAPV clones the VM in vCenter and writes our addresses,
// prefixes and gateways into its guest metadata; the VSphereVM's deletion
// destroys the VM and releases every record.
func TestCAPVDrivesOurPools(t *testing.T) {
	ctx := t.Context()
	ns := "capv-" + randomHex(4)
	require.NoError(t, k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	showLogsOnFailure(t)

	globalNetbox, globalInfoblox := "nb-global-"+ns, "ib-global-"+ns
	want := []pool{
		{kind: "NetboxIPPool", name: "nb", cidr: netboxCIDR, device: 0, index: 0,
			wantName: machineName + ".example.com"},
		{kind: "GlobalNetboxIPPool", name: globalNetbox, cidr: globalNetboxCIDR, device: 1, index: 0,
			wantName: machineName + ".example.com"},
		{kind: "InfobloxIPPool", name: "ib", cidr: infobloxCIDR, device: 1, index: 1,
			wantName: machineName + "." + infobloxZone},
		{kind: "GlobalInfobloxIPPool", name: globalInfoblox, cidr: globalInfobloxCIDR, device: 2, index: 0,
			wantName: machineName},
	}
	createPools(t, ns, want)

	// What CAPI would have made: the Cluster, its VSphereCluster, the
	// Machine with its bootstrap data, and the VSphereMachine it owns.
	createMachine(t, ns, want)

	// CAPV's VSphereMachine controller makes the VSphereVM.
	vm := &infrav1.VSphereVM{}
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.NoError(c, k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: vmName}, vm), "CAPV has not created the VSphereVM")
	}, waitTimeout, pollInterval)

	// CAPV's VSphereVM controller creates one claim per pool reference,
	// owned by the VSphereVM; ours fulfil them and record the Machine's name.
	addresses := map[string]*ipamv1.IPAddress{}
	for _, p := range want {
		claim := &ipamv1.IPAddressClaim{}
		key := client.ObjectKey{Namespace: ns, Name: p.claimName()}
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			require.NoError(c, k8s.Get(ctx, key, claim), "CAPV has not created claim %s", key.Name)
			require.True(c, conditions.IsTrue(claim, ipamv1.IPAddressClaimReadyCondition),
				"claim %s is not Ready: %+v", key.Name, conditions.Get(claim, ipamv1.IPAddressClaimReadyCondition))
			require.NotEmpty(c, claim.Status.AddressRef.Name, "claim %s has no addressRef yet", key.Name)
		}, waitTimeout, pollInterval)
		owner := metav1.GetControllerOf(claim)
		if assert.Len(t, claim.OwnerReferences, 1, "claim %s", key.Name) {
			assert.Equal(t, "VSphereVM", claim.OwnerReferences[0].Kind)
			assert.Equal(t, vm.Name, claim.OwnerReferences[0].Name)
		}
		assert.Nil(t, owner, "CAPV's owner reference is not a controller reference")
		assert.Equal(t, poolGroup, claim.Spec.PoolRef.APIGroup)
		assert.Equal(t, p.kind, claim.Spec.PoolRef.Kind)
		assert.Equal(t, p.name, claim.Spec.PoolRef.Name)
		assert.Equal(t, clusterName, claim.Labels[clusterv1.ClusterNameLabel])
		assert.Contains(t, claim.Finalizers, infrav1.IPAddressClaimFinalizer)
		assert.Equal(t, machineName, claim.Annotations[machineNameAnnot],
			"the Machine is found through VSphereVM and VSphereMachine")

		address := &ipamv1.IPAddress{}
		require.NoError(t, k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: claim.Status.AddressRef.Name}, address))
		prefix := netip.MustParsePrefix(p.cidr)
		addr := netip.MustParseAddr(address.Spec.Address)
		assert.True(t, prefix.Contains(addr), "%s is not in %s", addr, prefix)
		assert.Equal(t, int32(prefix.Bits()), ptr.Deref(address.Spec.Prefix, 0))
		assert.Equal(t, prefix.Addr().Next().String(), address.Spec.Gateway, "the prefix's first usable address")
		assert.Equal(t, p.claimName(), address.Spec.ClaimRef.Name)
		addresses[p.name] = address

		// The reservation in the IPAM system carries the claim's marker
		// and the Machine's name.
		got, name, found := findRecord(t, p, marker(ns, p.claimName()))
		require.True(t, found, "no %s record for claim %s", p.kind, p.claimName())
		assert.Equal(t, addr, got)
		assert.Equal(t, p.wantName, name)
	}

	// CAPV gets past WaitingForStaticIPAllocation and the claims, clones
	// the VM, and writes our addresses, prefixes and gateways into its
	// guest metadata, one ethernet per device, matched by MAC address.
	finder := find.NewFinder(vc.client.Client, true)
	var metadata struct {
		Network struct {
			Ethernets map[string]struct {
				Match struct {
					MACAddress string `json:"macaddress"`
				} `json:"match"`
				DHCP4     bool     `json:"dhcp4"`
				DHCP6     bool     `json:"dhcp6"`
				Addresses []string `json:"addresses"`
				Gateway4  string   `json:"gateway4"`
				Gateway6  string   `json:"gateway6"`
			} `json:"ethernets"`
		} `json:"network"`
	}
	var macs []string
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		obj, err := finder.VirtualMachine(ctx, "/DC0/vm/"+vm.Name)
		require.NoError(c, err, "CAPV has not cloned the VM")
		var props mo.VirtualMachine
		require.NoError(c, obj.Properties(ctx, obj.Reference(), []string{"config.extraConfig", "config.hardware.device"}, &props))
		extra := map[string]string{}
		for _, o := range props.Config.ExtraConfig {
			if v := o.GetOptionValue(); v != nil {
				s, _ := v.Value.(string)
				extra[v.Key] = s
			}
		}
		require.NotEmpty(c, extra["guestinfo.metadata"], "CAPV has not written the VM's metadata")
		require.Equal(c, "base64", extra["guestinfo.metadata.encoding"])
		raw, err := base64.StdEncoding.DecodeString(extra["guestinfo.metadata"])
		require.NoError(c, err)
		require.NoError(c, yaml.Unmarshal(raw, &metadata), string(raw))
		macs = nil
		for _, d := range props.Config.Hardware.Device {
			if nic, ok := d.(types.BaseVirtualEthernetCard); ok {
				macs = append(macs, nic.GetVirtualEthernetCard().MacAddress)
			}
		}
	}, waitTimeout, pollInterval)
	require.Len(t, macs, 3, "one NIC per network device")
	require.Len(t, metadata.Network.Ethernets, 3)
	type wantDevice struct {
		addresses          []string
		gateway4, gateway6 string
	}
	devices := make([]wantDevice, 3)
	for _, p := range want {
		a := addresses[p.name]
		d := &devices[p.device]
		d.addresses = append(d.addresses, a.Spec.Address+"/"+strconv.Itoa(int(ptr.Deref(a.Spec.Prefix, 0))))
		if netip.MustParseAddr(a.Spec.Gateway).Is4() {
			d.gateway4 = a.Spec.Gateway
		} else {
			d.gateway6 = a.Spec.Gateway
		}
	}
	for i, d := range devices {
		eth, ok := metadata.Network.Ethernets["id"+strconv.Itoa(i)]
		require.True(t, ok, "no ethernet id%d in the metadata", i)
		assert.Equal(t, macs[i], eth.Match.MACAddress, "device %d", i)
		assert.Equal(t, d.addresses, eth.Addresses, "device %d", i)
		assert.Equal(t, d.gateway4, eth.Gateway4, "device %d", i)
		assert.Equal(t, d.gateway6, eth.Gateway6, "device %d", i)
		assert.False(t, eth.DHCP4 || eth.DHCP6, "device %d", i)
	}

	// The GlobalInfobloxIPPool's fixed address is a DHCP reservation for
	// the MAC its device (the third) has: the one the VSphereMachine sets,
	// which CAPV copies to the VSphereVM and vSphere gives the NIC.
	for _, p := range want {
		if p.kind != "GlobalInfobloxIPPool" {
			continue
		}
		objs, err := sims.wapiObjects("fixedaddress")
		require.NoError(t, err)
		var fixed []wapiObject
		for _, o := range objs {
			if o.EAs[infobloxMarkerEA] == marker(ns, p.claimName()) {
				fixed = append(fixed, o)
			}
		}
		require.Len(t, fixed, 1)
		assert.Equal(t, strings.ToLower(deviceMAC), fixed[0].MAC, "the fixed address carries device %d's MAC", p.device)
		assert.Equal(t, strings.ToLower(deviceMAC), strings.ToLower(macs[p.device]), "vSphere gave the NIC that MAC")
		assert.Equal(t, "MAC_ADDRESS", fixed[0].MatchClient)
	}
	require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(vm), vm))
	assert.True(t, conditions.IsTrue(vm, infrav1.VSphereVMIPAddressClaimsFulfilledCondition), "%+v",
		conditions.Get(vm, infrav1.VSphereVMIPAddressClaimsFulfilledCondition))
	assert.Equal(t, infrav1.FullClone, vm.Status.CloneMode)

	// The Machine goes: CAPI deletes the VSphereMachine, CAPV's
	// VSphereMachine controller the VSphereVM, whose controller destroys
	// the VM and lets go of the claims (removes its finalizer); Kubernetes'
	// garbage collector, which envtest does not run, then deletes the
	// claims the VSphereVM owned; ours release every reservation.
	require.NoError(t, k8s.Delete(ctx, &infrav1.VSphereMachine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: vsphereMachineName}}))
	waitGone(t, &infrav1.VSphereVM{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: vm.Name}}, 2*waitTimeout)
	_, err := finder.VirtualMachine(ctx, "/DC0/vm/"+vm.Name)
	var notFound *find.NotFoundError
	assert.ErrorAs(t, err, &notFound, "CAPV did not destroy the VM")
	for _, p := range want {
		claim := &ipamv1.IPAddressClaim{}
		require.NoError(t, k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: p.claimName()}, claim))
		assert.NotContains(t, claim.Finalizers, infrav1.IPAddressClaimFinalizer, "CAPV still holds claim %s", claim.Name)
		// The records are still there: nothing asked for the claims to go.
		_, _, found := findRecord(t, p, marker(ns, p.claimName()))
		assert.True(t, found, "the %s record of claim %s went before its claim", p.kind, p.claimName())
		require.NoError(t, client.IgnoreNotFound(k8s.Delete(ctx, claim)), "the garbage collector's deletion")
	}
	for _, p := range want {
		waitGone(t, &ipamv1.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: p.claimName()}}, waitTimeout)
		waitGone(t, &ipamv1.IPAddress{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: addresses[p.name].Name}}, waitTimeout)
		_, _, found := findRecord(t, p, marker(ns, p.claimName()))
		assert.False(t, found, "the %s record of claim %s was not released", p.kind, p.claimName())
	}
}

// createPools seeds the IPAM systems and creates the four pools with their
// credentials: a Global pool's Secret is in the manager's namespace.
func createPools(t *testing.T, ns string, pools []pool) {
	ctx := t.Context()

	// NetBox: prefixes, each with its gateway recorded.
	if sims.ep.NetboxReal {
		t.Logf("NetBox: the real NetBox of NETBOX_URL, through %s", sims.ep.NetboxURL)
	}
	token := randomHex(20)
	require.NoError(t, sims.addNetboxToken(token))
	require.NoError(t, sims.addNetboxPrefix(netboxCIDR))
	require.NoError(t, sims.addNetboxPrefix(globalNetboxCIDR))

	// Infoblox: an IPv6 network with a DNS zone for host records, an IPv4
	// network for fixed addresses, each gateway reserved.
	user, password := "capi-"+ns, "pw-"+randomHex(8)
	require.NoError(t, sims.addWAPIUser(user, password))
	for _, cidr := range []string{infobloxCIDR, globalInfobloxCIDR} {
		require.NoError(t, sims.addWAPINetwork("default", cidr))
		require.NoError(t, sims.addWAPIFixedAddress("default", netip.MustParsePrefix(cidr).Addr().Next().String()))
	}
	require.NoError(t, sims.addWAPIZone("default", infobloxZone))

	for _, secretNS := range []string{ns, managerNamespace} {
		createSecret(t, secretNS, netboxSecretName+"-"+ns, map[string][]byte{"token": []byte(token)})
		createSecret(t, secretNS, infobloxSecretName+"-"+ns, map[string][]byte{
			"username": []byte(user), "password": []byte(password), "ca.crt": []byte(sims.ep.WAPICA),
		})
	}
	netboxSpec := func(cidr string) map[string]any {
		return map[string]any{
			"connection":  map[string]any{"url": sims.ep.NetboxURL, "credentialsSecretRef": map[string]any{"name": netboxSecretName + "-" + ns}},
			"sources":     []any{map[string]any{"prefix": map[string]any{"cidr": cidr}}},
			"reservation": map[string]any{"dnsNamePattern": "{{ .MachineName }}.example.com"},
		}
	}
	port, err := strconv.Atoi(sims.ep.WAPIPort)
	require.NoError(t, err)
	infobloxSpec := func(cidr string, reservation map[string]any) map[string]any {
		return map[string]any{
			"connection": map[string]any{
				"host": sims.ep.WAPIHost, "port": int64(port),
				"credentialsSecretRef": map[string]any{"name": infobloxSecretName + "-" + ns},
			},
			"sources":     []any{map[string]any{"network": map[string]any{"cidr": cidr}}},
			"reservation": reservation,
		}
	}
	specs := map[string]map[string]any{
		"NetboxIPPool":       netboxSpec(netboxCIDR),
		"GlobalNetboxIPPool": netboxSpec(globalNetboxCIDR),
		"InfobloxIPPool": infobloxSpec(infobloxCIDR, map[string]any{
			"objectType": "HostRecord", "namePattern": "{{ .MachineName }}", "dns": map[string]any{"zone": infobloxZone},
		}),
		// DHCP reservations for the MAC vSphere gives the device.
		"GlobalInfobloxIPPool": infobloxSpec(globalInfobloxCIDR, map[string]any{
			"objectType": "FixedAddress", "namePattern": "{{ .MachineName }}", "macAddress": "Machine",
		}),
	}
	var objs []*unstructured.Unstructured
	for _, p := range pools {
		u := &unstructured.Unstructured{Object: map[string]any{"spec": specs[p.kind]}}
		u.SetGroupVersionKind(schema.GroupVersionKind{Group: poolGroup, Version: poolVersion, Kind: p.kind})
		u.SetName(p.name)
		if !strings.HasPrefix(p.kind, "Global") {
			u.SetNamespace(ns)
		}
		require.NoError(t, k8s.Create(ctx, u), "creating %s %s", p.kind, p.name)
		objs = append(objs, u)
	}
	t.Cleanup(func() {
		// t.Context() is cancelled before cleanups run.
		ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
		defer cancel()
		for _, u := range objs {
			assert.NoError(t, client.IgnoreNotFound(k8s.Delete(ctx, u)), "deleting %s %s", u.GetKind(), u.GetName())
		}
	})
	waitPoolsReady(t, objs)
}

// waitPoolsReady waits until each pool is Ready.
func waitPoolsReady(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	for _, u := range objs {
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			got := u.DeepCopy()
			require.NoError(c, k8s.Get(t.Context(), client.ObjectKeyFromObject(u), got))
			conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
			ready := false
			for _, cond := range conds {
				m, _ := cond.(map[string]any)
				ready = ready || (m["type"] == "Ready" && m["status"] == "True")
			}
			assert.True(c, ready, "%s %s is not Ready: %v", u.GetKind(), u.GetName(), conds)
		}, waitTimeout, pollInterval)
	}
}

func showLogs() bool { return os.Getenv("SHOW_MANAGER_LOGS") != "" }

// createMachine creates what CAPI and the user would have: the Cluster,
// its VSphereCluster (infrastructure provisioned), the Machine with its
// bootstrap data Secret, and the VSphereMachine the Machine owns, cloned
// from the template, with one network device per pool group.
func createMachine(t *testing.T, ns string, pools []pool) {
	devices := []infrav1.NetworkDeviceSpec{
		{NetworkName: "VM Network"},
		{NetworkName: "DC0_DVPG0"},
		// Its MAC is set: the only one the provider can know before the
		// addresses are bound (CAPV reports vSphere's own once the VM is
		// ready, which needs them).
		{NetworkName: "VM Network", MACAddr: deviceMAC},
	}
	for _, p := range pools {
		devices[p.device].AddressesFromPools = append(devices[p.device].AddressesFromPools,
			infrav1.IPPoolReference{APIGroup: poolGroup, Kind: p.kind, Name: p.name})
	}
	createMachineNamed(t, ns, machineNames{cluster: clusterName, machine: machineName, vsphereMachine: vsphereMachineName,
		bootstrap: bootstrapSecret}, devices)
}

// machineNames names the objects createMachineNamed creates.
type machineNames struct {
	cluster, machine, vsphereMachine, bootstrap string
}

// createMachineNamed creates the Cluster, its VSphereCluster
// (infrastructure provisioned), the Machine with its bootstrap data Secret,
// and the VSphereMachine the Machine owns, cloned from the template, with
// the network devices given (static addresses only).
func createMachineNamed(t *testing.T, ns string, names machineNames, devices []infrav1.NetworkDeviceSpec) {
	ctx := t.Context()
	labels := map[string]string{clusterv1.ClusterNameLabel: names.cluster}
	create := func(obj client.Object) {
		t.Helper()
		require.NoError(t, k8s.Create(ctx, obj), "creating %T %s", obj, obj.GetName())
	}
	cluster := &clusterv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: names.cluster},
		Spec: clusterv1.ClusterSpec{
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: infrav1.GroupVersion.Group, Kind: "VSphereCluster", Name: names.cluster,
			},
		},
	}
	create(cluster)
	cluster.Status.Initialization.InfrastructureProvisioned = ptr.To(true)
	require.NoError(t, k8s.Status().Update(ctx, cluster))
	create(&infrav1.VSphereCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: names.cluster, Labels: labels},
		Spec:       infrav1.VSphereClusterSpec{Server: vc.url.Host},
	})
	createMachineOf(t, ns, names, devices)
}

// createMachineOf creates, for an existing Cluster whose infrastructure is
// provisioned, the Machine with its bootstrap data Secret and the
// VSphereMachine the Machine owns, as createMachineNamed does.
func createMachineOf(t *testing.T, ns string, names machineNames, devices []infrav1.NetworkDeviceSpec) {
	ctx := t.Context()
	labels := map[string]string{clusterv1.ClusterNameLabel: names.cluster}
	create := func(obj client.Object) {
		t.Helper()
		require.NoError(t, k8s.Create(ctx, obj), "creating %T %s", obj, obj.GetName())
	}
	create(&corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: names.bootstrap, Labels: labels},
		Data:       map[string][]byte{"value": []byte("#cloud-config\n"), "format": []byte("cloud-config")},
	})
	machine := &clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: names.machine, Labels: labels},
		Spec: clusterv1.MachineSpec{
			ClusterName: names.cluster,
			Bootstrap:   clusterv1.Bootstrap{DataSecretName: ptr.To(names.bootstrap)},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: infrav1.GroupVersion.Group, Kind: "VSphereMachine", Name: names.vsphereMachine,
			},
		},
	}
	create(machine)

	for i := range devices {
		devices[i].DHCP4, devices[i].DHCP6 = ptr.To(false), ptr.To(false)
	}
	vsphereMachine := &infrav1.VSphereMachine{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: names.vsphereMachine, Labels: labels},
		Spec: infrav1.VSphereMachineSpec{VirtualMachineCloneSpec: infrav1.VirtualMachineCloneSpec{
			Template:     templateName,
			CloneMode:    infrav1.FullClone,
			Server:       vc.url.Host,
			Datacenter:   "DC0",
			Folder:       "/DC0/vm",
			Datastore:    "LocalDS_0",
			ResourcePool: "/DC0/host/DC0_C0/Resources",
			NumCPUs:      2,
			MemoryMiB:    2048,
			DiskGiB:      20,
			Network:      infrav1.NetworkSpec{Devices: devices},
		},
			Naming: infrav1.VSphereVMNamingSpec{Template: vmNamingTemplate},
		},
	}
	require.NoError(t, controllerutil.SetControllerReference(machine, vsphereMachine, k8s.Scheme()))
	create(vsphereMachine)
}

// marker is the reservation marker of a claim.
func marker(ns, claim string) string { return identity + "/" + ns + "/" + claim }

// findRecord finds the reservation of a marker in the pool's IPAM system:
// its address and its name.
func findRecord(t *testing.T, p pool, marker string) (netip.Addr, string, bool) {
	t.Helper()
	if p.netbox() {
		ips, err := sims.netboxIPAddresses()
		require.NoError(t, err)
		for _, ip := range ips {
			if ip.CustomFields[netboxMarkerField] == marker {
				return netip.MustParsePrefix(ip.Address).Addr(), ip.DNSName, true
			}
		}
		return netip.Addr{}, "", false
	}
	for _, objtype := range []string{"record:host", "fixedaddress", "ipv6fixedaddress"} {
		objs, err := sims.wapiObjects(objtype)
		require.NoError(t, err)
		for _, o := range objs {
			if o.EAs[infobloxMarkerEA] == marker && len(o.Addresses) == 1 {
				return netip.MustParseAddr(o.Addresses[0]), o.Name, true
			}
		}
	}
	return netip.Addr{}, "", false
}

func createSecret(t *testing.T, namespace, name string, data map[string][]byte) {
	t.Helper()
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: map[string]string{credentialsLabel: "true"}},
		Data:       data,
	}
	require.NoError(t, k8s.Create(t.Context(), s))
	t.Cleanup(func() {
		// t.Context() is cancelled before cleanups run.
		ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
		defer cancel()
		assert.NoError(t, client.IgnoreNotFound(k8s.Delete(ctx, s)), "deleting Secret %s/%s", namespace, name)
	})
}

// cleanupTimeout bounds a cleanup's deletions.
const cleanupTimeout = 30 * time.Second

func waitGone(t *testing.T, obj client.Object, timeout time.Duration) {
	t.Helper()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		err := k8s.Get(t.Context(), client.ObjectKeyFromObject(obj), obj.DeepCopyObject().(client.Object))
		assert.True(c, apierrors.IsNotFound(err), "%T %s still exists (err %v)", obj, obj.GetName(), err)
	}, timeout, pollInterval)
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
