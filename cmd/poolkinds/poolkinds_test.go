package poolkinds

import (
	"fmt"
	"net/netip"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/api/v1alpha1"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/pkg/backendhttp"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/pkg/poolkind"
)

func TestAllServesEachBackendsNamespacedAndGlobalKinds(t *testing.T) {
	want := []struct {
		kind, backend, object, list string
		namespaced                  bool
	}{
		{"NetboxIPPool", "netbox", "*v1alpha1.NetboxIPPool", "*v1alpha1.NetboxIPPoolList", true},
		{"GlobalNetboxIPPool", "netbox", "*v1alpha1.GlobalNetboxIPPool", "*v1alpha1.GlobalNetboxIPPoolList", false},
		{"InfobloxIPPool", "infoblox", "*v1alpha1.InfobloxIPPool", "*v1alpha1.InfobloxIPPoolList", true},
		{"GlobalInfobloxIPPool", "infoblox", "*v1alpha1.GlobalInfobloxIPPool", "*v1alpha1.GlobalInfobloxIPPoolList", false},
	}
	kinds := All()
	assert.Len(t, kinds, len(want))
	for i, w := range want {
		if i >= len(kinds) {
			break
		}
		k := kinds[i]
		t.Run(w.kind, func(t *testing.T) {
			assert.Equal(t, w.kind, k.Kind)
			assert.Equal(t, w.backend, k.Backend)
			assert.Equal(t, w.namespaced, k.Namespaced)
			assert.Equal(t, w.object, fmt.Sprintf("%T", k.New()))
			assert.Equal(t, w.list, fmt.Sprintf("%T", k.NewList()))
			assert.NotNil(t, k.SecretName)
			assert.NotNil(t, k.ForgetBackend)
			assert.NotNil(t, k.InsecureConnection)
			assert.NotNil(t, k.Endpoint)
			assert.NotNil(t, k.NewBackend)
		})
	}
}

// TestEndpoint: the URL an administrator's allowed endpoints are held
// against is the one the backend connects to.
func TestEndpoint(t *testing.T) {
	for _, tc := range []struct {
		name string
		pool poolkind.Pool
		want string
	}{
		{"netbox", &v1alpha1.NetboxIPPool{Spec: v1alpha1.NetboxIPPoolSpec{Connection: v1alpha1.NetboxConnection{URL: "https://netbox.example.com/netbox/"}}},
			"https://netbox.example.com/netbox/"},
		{"infoblox, default port", &v1alpha1.InfobloxIPPool{Spec: v1alpha1.InfobloxIPPoolSpec{Connection: v1alpha1.InfobloxConnection{Host: "grid.example.com"}}},
			"https://grid.example.com:443"},
		{"infoblox, IPv6 and port", &v1alpha1.GlobalInfobloxIPPool{Spec: v1alpha1.InfobloxIPPoolSpec{Connection: v1alpha1.InfobloxConnection{Host: "fd00::1", Port: 8443}}},
			"https://[fd00::1]:8443"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var endpoints []string
			for _, k := range All() {
				if fmt.Sprintf("%T", k.New()) == fmt.Sprintf("%T", tc.pool) {
					endpoints = append(endpoints, k.Endpoint(tc.pool))
				}
			}
			assert.Equal(t, []string{tc.want}, endpoints)
		})
	}
}

// TestABackendSetsItsPoolsLimitUntilThePoolIsForgotten: the limit on the
// requests to a pool's endpoint is set where the backend is built, from the
// pool's spec, and dropped with the pool.
func TestABackendSetsItsPoolsLimitUntilThePoolIsForgotten(t *testing.T) {
	const url = "https://netbox.example.com/"
	limits := backendhttp.NewLimits()
	kind := NetBox(limits)[0]
	pool := &v1alpha1.NetboxIPPool{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "pool", UID: "pool-uid"},
		Spec: v1alpha1.NetboxIPPoolSpec{
			Connection: v1alpha1.NetboxConnection{URL: url, RateLimit: &v1alpha1.RateLimit{RequestsPerSecond: 7}},
			Sources:    []v1alpha1.NetboxAddressSource{{Prefix: &v1alpha1.NetboxPrefixSource{CIDR: "10.0.0.0/24"}}},
		},
	}
	secret := &corev1.Secret{Data: map[string][]byte{v1alpha1.NetboxTokenKey: []byte("0123456789abcdef")}}
	opts := poolkind.BackendOptions{Observe: func(string) func(string, int) { return nil }}

	_, err := kind.NewBackend(pool, secret, opts)
	require.NoError(t, err)
	want := backendhttp.DefaultLimit
	want.RequestsPerSecond = 7
	assert.Equal(t, want, limits.Effective(url), "the pool's rate, the defaults for what it leaves unset")

	kind.ForgetBackend(pool)
	assert.Equal(t, backendhttp.DefaultLimit, limits.Effective(url), "a forgotten pool limits nothing")
}

// TestOnlyIPv4FixedAddressesCarryTheMachinesMAC: an IPv6 fixed address
// matches a DUID, not a MAC, so a pool of IPv6 sources alone has its claims
// wait for no MAC; a pool with one IPv4 source does.
func TestOnlyIPv4FixedAddressesCarryTheMachinesMAC(t *testing.T) {
	network := func(cidr string) v1alpha1.InfobloxAddressSource {
		return v1alpha1.InfobloxAddressSource{Network: &v1alpha1.InfobloxNetworkSource{CIDR: cidr}}
	}
	ipRange := func(start, end string) v1alpha1.InfobloxAddressSource {
		return v1alpha1.InfobloxAddressSource{Range: &v1alpha1.InfobloxRangeSource{Start: start, End: end}}
	}
	for _, tc := range []struct {
		name    string
		setting v1alpha1.InfobloxMACAddress
		sources []v1alpha1.InfobloxAddressSource
		want    bool
	}{
		{name: "an IPv4 network", setting: v1alpha1.InfobloxMACMachine, sources: []v1alpha1.InfobloxAddressSource{network("10.0.0.0/24")}, want: true},
		{name: "an IPv4 range", setting: v1alpha1.InfobloxMACMachine, sources: []v1alpha1.InfobloxAddressSource{ipRange("10.0.0.10", "10.0.0.20")}, want: true},
		{name: "IPv6 then IPv4", setting: v1alpha1.InfobloxMACMachine,
			sources: []v1alpha1.InfobloxAddressSource{network("2001:db8::/64"), network("10.0.0.0/24")}, want: true},
		{name: "IPv6 alone", setting: v1alpha1.InfobloxMACMachine,
			sources: []v1alpha1.InfobloxAddressSource{network("2001:db8::/64"), ipRange("2001:db8:1::10", "2001:db8:1::20")}, want: false},
		{name: "not asked for", setting: v1alpha1.InfobloxMACNone, sources: []v1alpha1.InfobloxAddressSource{network("10.0.0.0/24")}, want: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := v1alpha1.InfobloxIPPoolSpec{Sources: tc.sources, Reservation: v1alpha1.InfobloxReservation{MACAddress: tc.setting}}
			assert.Equal(t, tc.want, kindOf(t, "InfobloxIPPool").WantsMachineMAC(&v1alpha1.InfobloxIPPool{Spec: spec}))
			assert.Equal(t, tc.want, kindOf(t, "GlobalInfobloxIPPool").WantsMachineMAC(&v1alpha1.GlobalInfobloxIPPool{Spec: spec}))
		})
	}
	assert.False(t, kindOf(t, "NetboxIPPool").WantsMachineMAC(&v1alpha1.NetboxIPPool{}), "NetBox has no DHCP")
}

// kindOf is the served kind named kind.
func kindOf(t *testing.T, kind string) poolkind.Kind {
	for _, k := range All() {
		if k.Kind == kind {
			return k
		}
	}
	t.Fatalf("no kind %s", kind)
	return poolkind.Kind{}
}

// TestOutsideIsSureOnlyWhereTheSpecNamesEverySource: a hand-picked
// endpoint is not claimed from a pool whose sources, as its spec names
// them, certainly do not hold it; a source named by ID alone leaves it to
// the IPAM system.
func TestOutsideIsSureOnlyWhereTheSpecNamesEverySource(t *testing.T) {
	netboxPrefix := func(cidr string) v1alpha1.NetboxAddressSource {
		return v1alpha1.NetboxAddressSource{Prefix: &v1alpha1.NetboxPrefixSource{CIDR: cidr}}
	}
	netboxRange := func(start, end string) v1alpha1.NetboxAddressSource {
		return v1alpha1.NetboxAddressSource{IPRange: &v1alpha1.NetboxIPRangeSource{Start: start, End: end}}
	}
	byID := v1alpha1.NetboxAddressSource{Prefix: &v1alpha1.NetboxPrefixSource{ID: ptr.To[int32](3)}}
	netbox := func(sources ...v1alpha1.NetboxAddressSource) poolkind.Pool {
		return &v1alpha1.NetboxIPPool{Spec: v1alpha1.NetboxIPPoolSpec{Sources: sources}}
	}
	infoblox := func(sources ...v1alpha1.InfobloxAddressSource) poolkind.Pool {
		return &v1alpha1.GlobalInfobloxIPPool{Spec: v1alpha1.InfobloxIPPoolSpec{Sources: sources}}
	}
	for _, tc := range []struct {
		name    string
		kind    string
		pool    poolkind.Pool
		addr    string
		outside bool
	}{
		{"inside a prefix", "NetboxIPPool", netbox(netboxPrefix("10.0.0.0/24")), "10.0.0.7", false},
		{"outside a prefix", "NetboxIPPool", netbox(netboxPrefix("10.0.0.0/24")), "10.0.1.7", true},
		{"first of a range", "NetboxIPPool", netbox(netboxRange("10.0.0.10", "10.0.0.20")), "10.0.0.10", false},
		{"last of a range", "NetboxIPPool", netbox(netboxRange("10.0.0.10", "10.0.0.20")), "10.0.0.20", false},
		{"past a range", "NetboxIPPool", netbox(netboxRange("10.0.0.10", "10.0.0.20")), "10.0.0.21", true},
		{"in the second source", "NetboxIPPool", netbox(netboxPrefix("10.0.0.0/24"), netboxPrefix("10.0.1.0/24")), "10.0.1.7", false},
		{"a source named by ID", "NetboxIPPool", netbox(netboxPrefix("10.0.0.0/24"), byID), "10.0.1.7", false},
		{"no source", "NetboxIPPool", netbox(), "10.0.1.7", false},
		{"IPv6 network", "GlobalInfobloxIPPool", infoblox(v1alpha1.InfobloxAddressSource{Network: &v1alpha1.InfobloxNetworkSource{CIDR: "2001:db8::/64"}}), "2001:db8::10", false},
		{"outside an Infoblox range", "GlobalInfobloxIPPool",
			infoblox(v1alpha1.InfobloxAddressSource{Range: &v1alpha1.InfobloxRangeSource{Start: "10.0.0.10", End: "10.0.0.20"}}), "10.0.0.9", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.outside, kindOf(t, tc.kind).Outside(tc.pool, netip.MustParseAddr(tc.addr)))
		})
	}
}
