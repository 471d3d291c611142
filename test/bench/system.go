package main

import (
	"fmt"
	"net/netip"
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/api/v1alpha1"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/netboxsim"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/wapisim"
)

// benchCIDR is large enough for the 10,000-claim run.
const benchCIDR = "10.170.0.0/16"

// benchRateLimit lets the provider, not the client-side limit, set the pace.
var benchRateLimit = &v1alpha1.RateLimit{RequestsPerSecond: 10000, Burst: 10000, MaxConcurrentRequests: 1000}

// system is an IPAM system under the bench: a simulator that answers with
// a fixed latency and counts every request it receives.
type system interface {
	title() string
	poolKind() string
	secretData() map[string][]byte
	// newPool returns (without creating) a pool allocating from benchCIDR.
	newPool(namespace, name, secret string, labels map[string]string) client.Object
	// requests counts every request received so far, whatever it was for.
	requests() int
	close()
}

func newSystem(backend string, latency time.Duration) (system, error) {
	switch backend {
	case "netbox-sim":
		s := &netboxSystem{sim: netboxsim.New(), token: "0123456789abcdef0123456789abcdef01234567"}
		s.sim.AddToken(s.token, true)
		s.sim.AddPrefixWithGateway(benchCIDR, netboxsim.PrefixOptions{})
		s.sim.SetLatency(latency)
		return s, nil
	case "wapi-sim":
		s := &wapiSystem{sim: wapisim.NewTLS(), password: "bench-password"}
		s.sim.AddUser("capi", s.password, wapisim.Permissions{Write: true, Superuser: true})
		s.sim.AddNetwork("default", benchCIDR, nil)
		// The network's first address is its gateway, recorded as a grid does.
		s.sim.AddFixedAddress("default", netip.MustParsePrefix(benchCIDR).Addr().Next().String(), nil)
		s.sim.SetLatency(latency)
		return s, nil
	}
	return nil, fmt.Errorf("unknown backend %q: want netbox-sim or wapi-sim", backend)
}

type netboxSystem struct {
	sim   *netboxsim.Server
	token string
}

func (s *netboxSystem) title() string    { return "NetBox simulator" }
func (s *netboxSystem) poolKind() string { return "NetboxIPPool" }
func (s *netboxSystem) requests() int    { return len(s.sim.Calls()) }
func (s *netboxSystem) close()           { s.sim.Close() }

func (s *netboxSystem) secretData() map[string][]byte {
	return map[string][]byte{v1alpha1.NetboxTokenKey: []byte(s.token)}
}

func (s *netboxSystem) newPool(namespace, name, secret string, labels map[string]string) client.Object {
	return &v1alpha1.NetboxIPPool{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: labels},
		Spec: v1alpha1.NetboxIPPoolSpec{
			Connection: v1alpha1.NetboxConnection{URL: s.sim.URL(), CredentialsSecretRef: v1alpha1.SecretReference{Name: secret},
				RateLimit: benchRateLimit},
			Sources: []v1alpha1.NetboxAddressSource{{Prefix: &v1alpha1.NetboxPrefixSource{CIDR: benchCIDR}}},
		},
	}
}

// wapiSystem is the WAPI simulator over TLS, as a grid serves it.
type wapiSystem struct {
	sim      *wapisim.Server
	password string
}

func (s *wapiSystem) title() string    { return "WAPI simulator" }
func (s *wapiSystem) poolKind() string { return "InfobloxIPPool" }
func (s *wapiSystem) requests() int    { return len(s.sim.Calls()) }
func (s *wapiSystem) close()           { s.sim.Close() }

func (s *wapiSystem) secretData() map[string][]byte {
	return map[string][]byte{
		v1alpha1.InfobloxUsernameKey: []byte("capi"),
		v1alpha1.InfobloxPasswordKey: []byte(s.password),
		v1alpha1.CABundleKey:         s.sim.CACertPEM(),
	}
}

func (s *wapiSystem) newPool(namespace, name, secret string, labels map[string]string) client.Object {
	port, _ := strconv.Atoi(s.sim.Port())
	return &v1alpha1.InfobloxIPPool{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: labels},
		Spec: v1alpha1.InfobloxIPPoolSpec{
			Connection: v1alpha1.InfobloxConnection{Host: s.sim.Host(), Port: int32(port),
				CredentialsSecretRef: v1alpha1.SecretReference{Name: secret}, RateLimit: benchRateLimit},
			Sources: []v1alpha1.InfobloxAddressSource{{Network: &v1alpha1.InfobloxNetworkSource{CIDR: benchCIDR}}},
		},
	}
}
