package main

import (
	"fmt"
	"net/netip"
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/api/v1alpha1"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/httpfault"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/netboxsim"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/netboxtarget"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/wapisim"
)

// benchCIDR is large enough for the 10,000-claim run.
const benchCIDR = "10.170.0.0/16"

// realBenchCIDR is the real NetBox's: its database outlives a run and is
// shared with the test suites, which keep to other prefixes.
const realBenchCIDR = "10.173.0.0/16"

// carveCIDR is the parent the carving rows carve children from: a
// container (NetBox) or network container (Infoblox) with nothing in it.
const carveCIDR = "10.174.0.0/16"

// tunedRateLimit is the rate limit of the rows labelled "tuned"
// (-tuned-workers): high enough that the provider, not the client-side
// limit, sets the pace. Every other row runs the pool's defaults
// (backendhttp.DefaultLimit), as users do.
var tunedRateLimit = &v1alpha1.RateLimit{RequestsPerSecond: 10000, Burst: 10000, MaxConcurrentRequests: 1000}

// system is an IPAM system under the bench: a simulator that answers with
// a fixed latency and counts every request it receives.
type system interface {
	title() string
	poolKind() string
	secretData() map[string][]byte
	// newPool returns (without creating) a pool allocating from benchCIDR,
	// with the rate limit given (nil: the pool's default), or, when carve
	// is set, carving children of that length from carveCIDR.
	newPool(namespace, name, secret string, labels map[string]string, rateLimit *v1alpha1.RateLimit, carve int) client.Object
	// calls are the requests received so far, in order, whatever they
	// were for.
	calls() []httpfault.Call
	// simulated says whether the system is a simulator answering at the
	// bench's latency (a real system's latency is its own).
	simulated() bool
	close()
}

func newSystem(backend string, latency time.Duration) (system, error) {
	switch backend {
	case "netbox-sim":
		s := &netboxSystem{target: netboxsim.New(), token: "0123456789abcdef0123456789abcdef01234567", cidr: benchCIDR}
		s.target.AddToken(s.token, true)
		s.target.AddPrefixWithGateway(s.cidr, netboxsim.PrefixOptions{})
		s.carveID = s.target.AddPrefix(carveCIDR, netboxsim.PrefixOptions{Status: "container"})
		s.target.SetLatency(latency)
		return s, nil
	case "netbox-real":
		return newRealNetbox()
	case "wapi-sim":
		s := &wapiSystem{sim: wapisim.NewTLS(), password: "bench-password"}
		s.sim.AddUser("capi", s.password, wapisim.Permissions{Write: true, Superuser: true})
		s.sim.AddNetwork("default", benchCIDR, nil)
		// The network's first address is its gateway, recorded as a grid does.
		s.sim.AddFixedAddress("default", netip.MustParsePrefix(benchCIDR).Addr().Next().String(), nil)
		s.sim.AddNetworkContainer("default", carveCIDR)
		s.sim.SetLatency(latency)
		return s, nil
	}
	return nil, fmt.Errorf("unknown backend %q: want netbox-sim, netbox-real or wapi-sim", backend)
}

// netboxSystem is the NetBox simulator, or a real NetBox behind
// netboxtarget's counting proxy (which swaps the bench's token for a real
// one, so that NetBox still authenticates every request).
type netboxSystem struct {
	target netboxtarget.Target
	token  string
	cidr   string
	// harness is the real NetBox's, nil for the simulator.
	harness *netboxtarget.Harness
	// prefixID is the NetBox ID of cidr's prefix (the real NetBox's only).
	prefixID int32
	// carveID is the NetBox ID of carveCIDR's prefix.
	carveID int32
}

// newRealNetbox reaches the NetBox named by NETBOX_URL and the tokens of the
// env file hack/netbox/up.sh prints.
func newRealNetbox() (s *netboxSystem, err error) {
	h := &netboxtarget.Harness{}
	target, err := netboxtarget.NewReal(h)
	if err != nil {
		return nil, fmt.Errorf("netbox-real: %w", err)
	}
	defer h.RecoverFatal(&err)
	s = &netboxSystem{target: target, token: "0123456789abcdef0123456789abcdef01234567", cidr: realBenchCIDR, harness: h}
	s.target.AddToken(s.token, true)
	s.prefixID = s.target.AddPrefixWithGateway(s.cidr, netboxsim.PrefixOptions{})
	s.carveID = s.target.AddPrefix(carveCIDR, netboxsim.PrefixOptions{Status: "container"})
	// What an earlier run left in the parent would count against this one.
	for _, p := range s.target.PrefixesWithin(carveCIDR) {
		s.target.DeletePrefix(p.ID)
	}
	return s, nil
}

func (s *netboxSystem) title() string {
	if s.harness != nil {
		return "NetBox (real)"
	}
	return "NetBox simulator"
}
func (s *netboxSystem) poolKind() string        { return "NetboxIPPool" }
func (s *netboxSystem) calls() []httpfault.Call { return s.target.Calls() }
func (s *netboxSystem) simulated() bool         { return s.harness == nil }

func (s *netboxSystem) close() {
	if s.harness != nil {
		s.harness.Close()
		return
	}
	s.target.Close()
}

func (s *netboxSystem) secretData() map[string][]byte {
	return map[string][]byte{v1alpha1.NetboxTokenKey: []byte(s.token)}
}

func (s *netboxSystem) newPool(namespace, name, secret string, labels map[string]string, rateLimit *v1alpha1.RateLimit, carve int) client.Object {
	pool := &v1alpha1.NetboxIPPool{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: labels},
		Spec: v1alpha1.NetboxIPPoolSpec{
			Connection: v1alpha1.NetboxConnection{URL: s.target.URL(), CredentialsSecretRef: v1alpha1.SecretReference{Name: secret},
				RateLimit: rateLimit},
			Sources: []v1alpha1.NetboxAddressSource{{Prefix: &v1alpha1.NetboxPrefixSource{CIDR: s.cidr}}},
		},
	}
	if carve > 0 {
		pool.Spec.Sources = []v1alpha1.NetboxAddressSource{{Prefix: &v1alpha1.NetboxPrefixSource{CIDR: carveCIDR}}}
		pool.Spec.ChildPrefixes = &v1alpha1.NetboxChildPrefixes{ChildPrefixes: v1alpha1.ChildPrefixes{Length: int32(carve)}}
	}
	return pool
}

// wapiSystem is the WAPI simulator over TLS, as a grid serves it.
type wapiSystem struct {
	sim      *wapisim.Server
	password string
}

func (s *wapiSystem) title() string           { return "WAPI simulator" }
func (s *wapiSystem) poolKind() string        { return "InfobloxIPPool" }
func (s *wapiSystem) calls() []httpfault.Call { return s.sim.Calls() }
func (s *wapiSystem) simulated() bool         { return true }
func (s *wapiSystem) close()                  { s.sim.Close() }

func (s *wapiSystem) secretData() map[string][]byte {
	return map[string][]byte{
		v1alpha1.InfobloxUsernameKey: []byte("capi"),
		v1alpha1.InfobloxPasswordKey: []byte(s.password),
		v1alpha1.CABundleKey:         s.sim.CACertPEM(),
	}
}

func (s *wapiSystem) newPool(namespace, name, secret string, labels map[string]string, rateLimit *v1alpha1.RateLimit, carve int) client.Object {
	port, _ := strconv.Atoi(s.sim.Port())
	pool := &v1alpha1.InfobloxIPPool{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: labels},
		Spec: v1alpha1.InfobloxIPPoolSpec{
			Connection: v1alpha1.InfobloxConnection{Host: s.sim.Host(), Port: int32(port),
				CredentialsSecretRef: v1alpha1.SecretReference{Name: secret}, RateLimit: rateLimit},
			Sources: []v1alpha1.InfobloxAddressSource{{Network: &v1alpha1.InfobloxNetworkSource{CIDR: benchCIDR}}},
		},
	}
	if carve > 0 {
		pool.Spec.Sources = []v1alpha1.InfobloxAddressSource{{Network: &v1alpha1.InfobloxNetworkSource{CIDR: carveCIDR}}}
		pool.Spec.ChildPrefixes = &v1alpha1.ChildPrefixes{Length: int32(carve)}
	}
	return pool
}

// received counts every request sys received so far.
func received(sys system) int { return len(sys.calls()) }
