package metal3e2e

import (
	"crypto/rand"
	"encoding/hex"
	"net/netip"
	"strconv"
	"testing"
	"time"

	bmov1alpha1 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	infrav1 "github.com/metal3-io/cluster-api-provider-metal3/api/v1beta2"
	m3ipamv1 "github.com/metal3-io/ip-address-manager/api/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/yaml"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/api/v1alpha1"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends/infoblox"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends/netbox"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/pkg/poolkind"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/netboxsim"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/netboxtarget"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/wapisim"
)

// The CIDRs of this test, which no other test uses: a real NetBox's
// database is shared by every test of a run.
const (
	netboxCIDR       = "10.122.0.0/24"
	globalNetboxCIDR = "10.123.0.0/24"
	infobloxCIDR     = "10.124.0.0/24"
	dhcpCIDR         = "10.121.0.0/24"
)

// The Metal3 objects, named as a MachineDeployment would name them: the
// Machine and its Metal3Machine have different names, so that the records
// show which one they carry.
const (
	clusterName   = "m3"
	machineName   = "m3-md-0-7xk2p-ghs8d"
	m3mName       = "m3-workers-9fz4t"
	hostName      = "host-0"
	templateName  = "workers"
	netboxZone    = "nb.example.com"
	globalZone    = "global.example.com"
	infobloxZone  = "ib.example.com"
	netboxSecret  = "netbox"
	wapiSecret    = "infoblox"
	netboxPool    = "nb"
	infobloxPool  = "ib"
	dhcpPool      = "ib-dhcp"
	metal3DataFmt = templateName + "-0"
	// bootMAC is the BareMetalHost's bootMACAddress, as an operator writes
	// it; the grid stores it in lower case.
	bootMAC = "52:54:00:AB:CD:01"
)

// pool is one of the three pools the Metal3DataTemplate names, and what
// the test expects of its claim.
type pool struct {
	kind, name, cidr string
	// network is the networkData network (id) the pool's address goes to.
	network string
	// record finds the reservation of a marker in the IPAM system: its
	// address and its name (NetBox's DNS name, the host record's name).
	record func(marker string) (addr netip.Addr, name string, found bool)
	// wantName is the record's name.
	wantName string
}

func (p pool) claimName() string { return metal3DataFmt + "-" + p.name }

// TestMetal3DataTemplateDrivesOurPools: a Metal3DataTemplate names a
// NetboxIPPool, a GlobalNetboxIPPool and two InfobloxIPPools (host records,
// and fixed addresses that carry the BareMetalHost's MAC) in networkData
// fromPoolRef; CAPM3's reconcilers create the claims, ours fulfil them with
// records named after the Machine, CAPM3 writes the addresses, prefixes and
// gateways into the networkData Secret, and the Machine's going (its
// Metal3DataClaim deleted, as CAPM3 does when the Metal3Machine goes)
// releases every reservation.
func TestMetal3DataTemplateDrivesOurPools(t *testing.T) {
	ctx := t.Context()
	ns := "m3-" + randomHex(4)
	require.NoError(t, k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))

	// NetBox: the simulator, or the real NetBox of NETBOX_URL.
	nb := netboxtarget.New(t)
	token := randomHex(20)
	nb.AddToken(token, true)
	nb.AddPrefixWithGateway(netboxCIDR, netboxsim.PrefixOptions{})
	nb.AddPrefixWithGateway(globalNetboxCIDR, netboxsim.PrefixOptions{})
	globalName := "nb-global-" + ns
	for _, secretNS := range []string{ns, managerNamespace} {
		createSecret(t, secretNS, netboxSecret+"-"+ns, map[string][]byte{v1alpha1.NetboxTokenKey: []byte(token)})
	}
	netboxSpec := func(cidr, zone string) v1alpha1.NetboxIPPoolSpec {
		return v1alpha1.NetboxIPPoolSpec{
			Connection: v1alpha1.NetboxConnection{URL: nb.URL(), CredentialsSecretRef: v1alpha1.SecretReference{Name: netboxSecret + "-" + ns}},
			Sources:    []v1alpha1.NetboxAddressSource{{Prefix: &v1alpha1.NetboxPrefixSource{CIDR: cidr}}},
			Reservation: v1alpha1.NetboxReservation{
				DNSNamePattern: "{{ .MachineName }}." + zone,
			},
		}
	}

	// Infoblox: the WAPI simulator, with host records in a DNS zone.
	wapi := wapisim.NewTLS()
	t.Cleanup(wapi.Close)
	password := "pw-" + randomHex(8)
	wapi.AddUser("capi-"+ns, password, wapisim.Permissions{Write: true, Superuser: true})
	for _, cidr := range []string{infobloxCIDR, dhcpCIDR} {
		wapi.AddNetwork("default", cidr, nil)
		wapi.AddFixedAddress("default", netip.MustParsePrefix(cidr).Addr().Next().String(), nil) // the gateway
	}
	wapi.AddZone("default", infobloxZone)
	createSecret(t, ns, wapiSecret, map[string][]byte{
		v1alpha1.InfobloxUsernameKey: []byte("capi-" + ns),
		v1alpha1.InfobloxPasswordKey: []byte(password),
		v1alpha1.CABundleKey:         wapi.CACertPEM(),
	})
	port, err := strconv.Atoi(wapi.Port())
	require.NoError(t, err)

	pools := []poolkind.Pool{
		&v1alpha1.NetboxIPPool{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: netboxPool}, Spec: netboxSpec(netboxCIDR, netboxZone)},
		&v1alpha1.GlobalNetboxIPPool{ObjectMeta: metav1.ObjectMeta{Name: globalName}, Spec: netboxSpec(globalNetboxCIDR, globalZone)},
		&v1alpha1.InfobloxIPPool{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: infobloxPool}, Spec: v1alpha1.InfobloxIPPoolSpec{
			Connection: v1alpha1.InfobloxConnection{Host: wapi.Host(), Port: int32(port), CredentialsSecretRef: v1alpha1.SecretReference{Name: wapiSecret}},
			Sources:    []v1alpha1.InfobloxAddressSource{{Network: &v1alpha1.InfobloxNetworkSource{CIDR: infobloxCIDR}}},
			Reservation: v1alpha1.InfobloxReservation{
				ObjectType:  v1alpha1.InfobloxHostRecord,
				NamePattern: "{{ .MachineName }}",
				DNS:         &v1alpha1.InfobloxDNS{Zone: infobloxZone},
			},
		}},
		&v1alpha1.InfobloxIPPool{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: dhcpPool}, Spec: v1alpha1.InfobloxIPPoolSpec{
			Connection: v1alpha1.InfobloxConnection{Host: wapi.Host(), Port: int32(port), CredentialsSecretRef: v1alpha1.SecretReference{Name: wapiSecret}},
			Sources:    []v1alpha1.InfobloxAddressSource{{Network: &v1alpha1.InfobloxNetworkSource{CIDR: dhcpCIDR}}},
			Reservation: v1alpha1.InfobloxReservation{
				ObjectType:  v1alpha1.InfobloxFixedAddress,
				NamePattern: "{{ .MachineName }}",
				MACAddress:  v1alpha1.InfobloxMACMachine,
			},
		}},
	}
	for _, p := range pools {
		require.NoError(t, k8s.Create(ctx, p))
	}
	t.Cleanup(func() {
		for _, p := range pools {
			_ = k8s.Delete(ctx, p)
		}
	})
	for _, p := range pools {
		waitPoolReady(t, p)
	}

	netboxRecord := func(marker string) (netip.Addr, string, bool) {
		for _, ip := range nb.IPAddresses() {
			if ip.CustomFields[netbox.DefaultMarkerField] == marker {
				return netip.MustParsePrefix(ip.Address).Addr(), ip.DNSName, true
			}
		}
		return netip.Addr{}, "", false
	}
	hostRecord := func(marker string) (netip.Addr, string, bool) {
		for _, o := range wapi.Objects("record:host") {
			if o.EAs[infoblox.DefaultMarkerEA] == marker && len(o.Addresses) == 1 {
				return o.Addresses[0], o.Name, true
			}
		}
		return netip.Addr{}, "", false
	}
	// The fixed address, with the MAC and match_client the grid's DHCP
	// serves it by.
	var fixedMAC, fixedMatch string
	fixedAddress := func(marker string) (netip.Addr, string, bool) {
		for _, o := range wapi.Objects("fixedaddress") {
			if o.EAs[infoblox.DefaultMarkerEA] == marker && len(o.Addresses) == 1 {
				fixedMAC, fixedMatch = o.MAC, o.MatchClient
				return o.Addresses[0], o.Name, true
			}
		}
		return netip.Addr{}, "", false
	}
	want := []pool{
		{kind: "NetboxIPPool", name: netboxPool, cidr: netboxCIDR, network: "provisioning", record: netboxRecord,
			wantName: machineName + "." + netboxZone},
		{kind: "GlobalNetboxIPPool", name: globalName, cidr: globalNetboxCIDR, network: "storage", record: netboxRecord,
			wantName: machineName + "." + globalZone},
		{kind: "InfobloxIPPool", name: infobloxPool, cidr: infobloxCIDR, network: "baremetal", record: hostRecord,
			wantName: machineName + "." + infobloxZone},
		{kind: "InfobloxIPPool", name: dhcpPool, cidr: dhcpCIDR, network: "provisioning-dhcp", record: fixedAddress,
			wantName: machineName},
	}

	// What CAPI and CAPM3's Metal3Machine controller would have made: the
	// Cluster, the Machine, its Metal3Machine on a BareMetalHost, and the
	// Metal3DataClaim.
	createMetal3Machine(t, ns, want)

	// CAPM3 creates one claim per pool, owned by the Metal3Data; ours
	// fulfil them and record the Machine's name on each.
	addresses := map[string]*ipamv1.IPAddress{}
	for _, p := range want {
		claim := &ipamv1.IPAddressClaim{}
		key := client.ObjectKey{Namespace: ns, Name: p.claimName()}
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			require.NoError(c, k8s.Get(ctx, key, claim), "CAPM3 has not created claim %s", key.Name)
			require.True(c, conditions.IsTrue(claim, ipamv1.IPAddressClaimReadyCondition),
				"claim %s is not Ready: %+v", key.Name, conditions.Get(claim, ipamv1.IPAddressClaimReadyCondition))
			// CAPI's patch helper writes conditions before status and
			// metadata: Ready may show a moment before addressRef does.
			require.NotEmpty(c, claim.Status.AddressRef.Name, "claim %s has no addressRef yet", key.Name)
		}, waitTimeout, pollInterval)
		owner := metav1.GetControllerOf(claim)
		require.NotNil(t, owner)
		assert.Equal(t, "Metal3Data", owner.Kind, "CAPM3 owns its claims through the Metal3Data")
		assert.Equal(t, p.kind, claim.Spec.PoolRef.Kind)
		assert.Equal(t, machineName, claim.Annotations[v1alpha1.MachineNameAnnotation],
			"the Machine is found through Metal3Data and Metal3Machine")

		address := &ipamv1.IPAddress{}
		require.NoError(t, k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: claim.Status.AddressRef.Name}, address))
		prefix := netip.MustParsePrefix(p.cidr)
		addr := netip.MustParseAddr(address.Spec.Address)
		assert.True(t, prefix.Contains(addr), "%s is not in %s", addr, prefix)
		assert.Equal(t, int32(prefix.Bits()), ptr.Deref(address.Spec.Prefix, 0))
		assert.Equal(t, prefix.Addr().Next().String(), address.Spec.Gateway, "the prefix's first usable address")
		addresses[p.name] = address

		// The reservation in the IPAM system carries the claim's marker
		// and the Machine's name.
		got, name, found := p.record(backends.Marker(identity, ns, p.claimName()))
		require.True(t, found, "no %s record for claim %s", p.kind, p.claimName())
		assert.Equal(t, addr, got)
		assert.Equal(t, p.wantName, name)
		if p.name == dhcpPool {
			// Read back from the grid: a DHCP reservation for the host's
			// boot interface, found through Metal3Data, Metal3Machine and
			// its metal3.io/BareMetalHost annotation.
			assert.Equal(t, "52:54:00:ab:cd:01", fixedMAC, "the fixed address carries the BareMetalHost's bootMACAddress")
			assert.Equal(t, "MAC_ADDRESS", fixedMatch)
			assert.Equal(t, "52:54:00:ab:cd:01", claim.Annotations[v1alpha1.MACAddressAnnotation])
		}
	}

	// CAPM3 renders our addresses, prefixes and gateways into the
	// Metal3Machine's networkData Secret.
	secret := &corev1.Secret{}
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.NoError(c, k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: m3mName + "-networkdata"}, secret))
	}, waitTimeout, pollInterval)
	var networkData struct {
		Networks []struct {
			ID        string `json:"id"`
			Type      string `json:"type"`
			Link      string `json:"link"`
			IPAddress string `json:"ip_address"`
			Netmask   string `json:"netmask"`
			Routes    []struct {
				Network string `json:"network"`
				Gateway string `json:"gateway"`
			} `json:"routes"`
		} `json:"networks"`
	}
	require.NoError(t, yaml.Unmarshal(secret.Data["networkData"], &networkData), string(secret.Data["networkData"]))
	require.Len(t, networkData.Networks, len(want), string(secret.Data["networkData"]))
	for i, p := range want {
		n, address := networkData.Networks[i], addresses[p.name]
		assert.Equal(t, p.network, n.ID)
		assert.Equal(t, "ipv4", n.Type)
		assert.Equal(t, address.Spec.Address, n.IPAddress, "network %s", n.ID)
		assert.Equal(t, "255.255.255.0", n.Netmask, "network %s", n.ID)
		require.Len(t, n.Routes, 1, "network %s", n.ID)
		assert.Equal(t, address.Spec.Gateway, n.Routes[0].Gateway, "network %s", n.ID)
	}

	// The Machine goes: CAPM3 deletes the Metal3DataClaim, its template
	// reconciler the Metal3Data, its data reconciler the claims, and ours
	// release every reservation.
	dataClaim := &infrav1.Metal3DataClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: m3mName}}
	require.NoError(t, k8s.Delete(ctx, dataClaim))
	waitGone(t, &infrav1.Metal3Data{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: metal3DataFmt}}, releaseTimeout)
	for _, p := range want {
		waitGone(t, &ipamv1.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: p.claimName()}}, waitTimeout)
		waitGone(t, &ipamv1.IPAddress{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: p.claimName()}}, waitTimeout)
		_, _, found := p.record(backends.Marker(identity, ns, p.claimName()))
		assert.False(t, found, "the %s record of claim %s was not released", p.kind, p.claimName())
	}
}

// createMetal3Machine creates what CAPI and CAPM3's Metal3Machine controller
// would have: the Cluster, the Machine, the BareMetalHost, the Metal3Machine
// the Machine owns (on that host, with the data template), the
// Metal3DataTemplate with one network per pool, and the Metal3DataClaim.
func createMetal3Machine(t *testing.T, ns string, pools []pool, edits ...func(*infrav1.Metal3DataTemplate)) {
	ctx := t.Context()
	labels := map[string]string{clusterv1.ClusterNameLabel: clusterName}
	create := func(obj client.Object) {
		t.Helper()
		require.NoError(t, k8s.Create(ctx, obj), "creating %T %s", obj, obj.GetName())
	}

	create(&clusterv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: clusterName},
		Spec:       clusterv1.ClusterSpec{ClusterNetwork: clusterv1.ClusterNetwork{ServiceDomain: "cluster.local"}},
	})
	machine := &clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: machineName, Labels: labels},
		Spec: clusterv1.MachineSpec{
			ClusterName: clusterName,
			Bootstrap:   clusterv1.Bootstrap{DataSecretName: ptr.To("bootstrap")},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: infrav1.GroupVersion.Group, Kind: "Metal3Machine", Name: m3mName,
			},
		},
	}
	create(machine)
	create(&bmov1alpha1.BareMetalHost{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: hostName},
		Spec: bmov1alpha1.BareMetalHostSpec{BootMACAddress: bootMAC}})

	template := &infrav1.Metal3DataTemplate{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: templateName, Labels: labels},
		Spec: infrav1.Metal3DataTemplateSpec{
			ClusterName: clusterName,
			NetworkData: &infrav1.NetworkData{
				Links:    &infrav1.NetworkDataLink{},
				Networks: &infrav1.NetworkDataNetwork{},
			},
		},
	}
	for i, p := range pools {
		link := "enp" + strconv.Itoa(i+1) + "s0"
		ref := infrav1.IPPoolReference{APIGroup: v1alpha1.GroupVersion.Group, Kind: p.kind, Name: p.name}
		template.Spec.NetworkData.Links.Ethernets = append(template.Spec.NetworkData.Links.Ethernets, infrav1.NetworkDataLinkEthernet{
			Type: "phy", Id: link, MACAddress: &infrav1.NetworkLinkEthernetMac{String: "52:54:00:00:00:0" + strconv.Itoa(i+1)},
		})
		template.Spec.NetworkData.Networks.IPv4 = append(template.Spec.NetworkData.Networks.IPv4, infrav1.NetworkDataIPv4{
			ID: p.network, Link: link, FromPoolRef: ref,
			Routes: []infrav1.NetworkDataRoutev4{{
				Network: m3ipamv1.IPAddressv4Str("10.200." + strconv.Itoa(i) + ".0"), Prefix: ptr.To(int32(24)),
				Gateway: infrav1.NetworkGatewayv4{FromPoolRef: ref},
			}},
		})
	}
	if len(pools) == 0 {
		template.Spec.NetworkData = nil
	}
	for _, edit := range edits {
		edit(template)
	}
	create(template)

	m3m := &infrav1.Metal3Machine{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, Name: m3mName, Labels: labels,
			Annotations: map[string]string{"metal3.io/BareMetalHost": ns + "/" + hostName},
		},
		Spec: infrav1.Metal3MachineSpec{DataTemplate: &infrav1.Metal3ObjectRef{Name: templateName}},
	}
	require.NoError(t, controllerutil.SetControllerReference(machine, m3m, k8s.Scheme()))
	create(m3m)

	dataClaim := &infrav1.Metal3DataClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: m3mName, Labels: labels},
		Spec:       infrav1.Metal3DataClaimSpec{Template: &infrav1.Metal3ObjectRef{Name: templateName}},
	}
	require.NoError(t, controllerutil.SetControllerReference(m3m, dataClaim, k8s.Scheme()))
	create(dataClaim)
}

func createSecret(t *testing.T, namespace, name string, data map[string][]byte) {
	t.Helper()
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: map[string]string{v1alpha1.CredentialsLabel: "true"}},
		Data:       data,
	}
	require.NoError(t, k8s.Create(t.Context(), s))
	t.Cleanup(func() { _ = k8s.Delete(t.Context(), s) })
}

func waitPoolReady(t *testing.T, p poolkind.Pool) {
	t.Helper()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		got := p.DeepCopyObject().(poolkind.Pool)
		require.NoError(c, k8s.Get(t.Context(), client.ObjectKeyFromObject(p), got))
		assert.True(c, conditions.IsTrue(got, v1alpha1.ReadyCondition), "%s %s: %+v",
			got.GetObjectKind().GroupVersionKind().Kind, p.GetName(), conditions.Get(got, v1alpha1.ReadyCondition))
	}, waitTimeout, pollInterval)
}

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

// TestMetal3DataTemplateTakesAChildPrefixPerMachine: a Metal3DataTemplate's
// networkData names a NetboxIPPool with childPrefixes in an ipv6 network's
// fromPoolRef; CAPM3 claims from it, ours carve the machine an IPv6 /64 in
// NetBox, CAPM3 renders the child's network and length into the machine's
// networkData, and the Machine's going deletes the child. (CAPM3 1.13's
// metaData *FromPool entries name Metal3 IPPools only, whatever their kind.)
func TestMetal3DataTemplateTakesAChildPrefixPerMachine(t *testing.T) {
	ctx := t.Context()
	ns := "m3p-" + randomHex(4)
	require.NoError(t, k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	const parent = "2001:db8:122::/56"
	nb := netboxtarget.New(t)
	token := randomHex(20)
	nb.AddToken(token, true)
	nb.AddPrefix(parent, netboxsim.PrefixOptions{Status: "container"})
	clear := func() {
		for _, p := range nb.PrefixesWithin(parent) {
			nb.DeletePrefix(p.ID)
		}
	}
	clear()
	t.Cleanup(clear)
	createSecret(t, ns, netboxSecret, map[string][]byte{v1alpha1.NetboxTokenKey: []byte(token)})
	pool := &v1alpha1.NetboxIPPool{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "node-prefixes"}, Spec: v1alpha1.NetboxIPPoolSpec{
		Connection:    v1alpha1.NetboxConnection{URL: nb.URL(), CredentialsSecretRef: v1alpha1.SecretReference{Name: netboxSecret}},
		Sources:       []v1alpha1.NetboxAddressSource{{Prefix: &v1alpha1.NetboxPrefixSource{CIDR: parent}}},
		ChildPrefixes: &v1alpha1.NetboxChildPrefixes{ChildPrefixes: v1alpha1.ChildPrefixes{Length: 64}},
	}}
	require.NoError(t, k8s.Create(ctx, pool))
	t.Cleanup(func() { _ = k8s.Delete(ctx, pool) })
	waitPoolReady(t, pool)

	createMetal3Machine(t, ns, nil, func(template *infrav1.Metal3DataTemplate) {
		template.Spec.NetworkData = &infrav1.NetworkData{
			Links: &infrav1.NetworkDataLink{Ethernets: []infrav1.NetworkDataLinkEthernet{{
				Type: "phy", Id: "enp1s0", MACAddress: &infrav1.NetworkLinkEthernetMac{String: "52:54:00:00:00:01"},
			}}},
			Networks: &infrav1.NetworkDataNetwork{IPv6: []infrav1.NetworkDataIPv6{{
				ID: "delegated", Link: "enp1s0",
				FromPoolRef: infrav1.IPPoolReference{APIGroup: v1alpha1.GroupVersion.Group, Kind: "NetboxIPPool", Name: pool.Name},
			}}},
		}
	})

	claimName := metal3DataFmt + "-" + pool.Name
	claim := &ipamv1.IPAddressClaim{}
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.NoError(c, k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: claimName}, claim), "CAPM3 has not created the claim")
		require.True(c, conditions.IsTrue(claim, ipamv1.IPAddressClaimReadyCondition), "%+v", conditions.Get(claim, ipamv1.IPAddressClaimReadyCondition))
		require.NotEmpty(c, claim.Status.AddressRef.Name)
	}, waitTimeout, pollInterval)
	address := &ipamv1.IPAddress{}
	require.NoError(t, k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: claim.Status.AddressRef.Name}, address))
	child := netip.PrefixFrom(netip.MustParseAddr(address.Spec.Address), int(ptr.Deref(address.Spec.Prefix, 0)))
	assert.Equal(t, 64, child.Bits())
	assert.Equal(t, child.Masked(), child)
	assert.True(t, netip.MustParsePrefix(parent).Contains(child.Addr()))
	marker := backends.Marker(identity, ns, claimName)
	childOf := func() []string {
		var out []string
		for _, p := range nb.PrefixesWithin(parent) {
			if p.CustomFields[netbox.DefaultMarkerField] == marker {
				out = append(out, p.Prefix)
			}
		}
		return out
	}
	assert.Equal(t, []string{child.String()}, childOf(), "NetBox holds the child, with the claim's marker")

	// CAPM3 renders the child into the machine's networkData.
	secret := &corev1.Secret{}
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.NoError(c, k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: m3mName + "-networkdata"}, secret))
	}, waitTimeout, pollInterval)
	var networkData struct {
		Networks []struct {
			ID        string `json:"id"`
			Type      string `json:"type"`
			IPAddress string `json:"ip_address"`
			Netmask   string `json:"netmask"`
		} `json:"networks"`
	}
	require.NoError(t, yaml.Unmarshal(secret.Data["networkData"], &networkData), string(secret.Data["networkData"]))
	require.Len(t, networkData.Networks, 1, string(secret.Data["networkData"]))
	n := networkData.Networks[0]
	assert.Equal(t, "ipv6", n.Type)
	assert.Equal(t, child.Addr().String(), n.IPAddress, "the child's network")
	assert.Equal(t, "ffff:ffff:ffff:ffff::", n.Netmask, "and its length")

	dataClaim := &infrav1.Metal3DataClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: m3mName}}
	require.NoError(t, k8s.Delete(ctx, dataClaim))
	waitGone(t, &ipamv1.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: claimName}}, releaseTimeout)
	assert.Empty(t, childOf(), "the child is deleted with the machine")
}
