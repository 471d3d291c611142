// Package gc proves that the provider releases every reservation when
// Kubernetes itself deletes the claims: the namespace controller emptying a
// deleted namespace, and the garbage collector deleting the dependents of a
// deleted owner, in background and in foreground. Its control plane runs
// kube-controller-manager with those two controllers (envtestenv.
// StartWithControllerManager), which the integration suite's does not.
package gc

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/api/v1alpha1"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends/infoblox"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends/netbox"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/pkg/poolkind"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/pkg/scheme"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/envtestenv"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/netboxsim"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/netboxtarget"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/wapisim"
)

const (
	managerNamespace = "ipam-bridge-system"
	waitTimeout      = 90 * time.Second
	pollInterval     = 100 * time.Millisecond
)

var (
	restConfig  *rest.Config
	k8s         client.WithWatch
	testScheme  *runtime.Scheme
	managerLogs = &envtestenv.LogBuffer{}
	kcm         *envtestenv.ControllerManager
)

func TestMain(m *testing.M) {
	os.Exit(runSuite(m))
}

func runSuite(m *testing.M) int {
	started := time.Now()
	env, cfg, cm, err := envtestenv.StartWithControllerManager()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	kcm = cm
	defer func() { _ = env.Stop() }()
	defer func() { _ = kcm.Stop() }()
	fmt.Fprintf(os.Stderr, "control plane with kube-controller-manager up in %s (kube-controller-manager working %s after its start)\n",
		time.Since(started).Round(time.Millisecond), kcm.StartedIn.Round(time.Millisecond))
	restConfig = cfg
	testScheme = scheme.New()
	if k8s, err = client.NewWithWatch(cfg, client.Options{Scheme: testScheme}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: managerNamespace}}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctrl.SetLogger(funcr.New(func(prefix, args string) {
		managerLogs.WriteString(prefix + " " + args + "\n")
	}, funcr.Options{Verbosity: 4}))
	done, err := envtestenv.StartManager(ctx, restConfig, testScheme, controllers.Options{
		ManagerNamespace:    managerNamespace,
		ClaimConcurrency:    10,
		PoolConcurrency:     2,
		SyncPeriod:          time.Minute,
		PoolRefreshInterval: 2 * time.Second,
	}, func(o *manager.Options) { o.Logger = ctrl.Log.WithName("gc") })
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	code := m.Run()
	cancel()
	<-done
	if code != 0 && os.Getenv("SHOW_MANAGER_LOGS") != "" {
		fmt.Fprintln(os.Stderr, managerLogs.String())
		fmt.Fprintln(os.Stderr, "kube-controller-manager:\n"+kcm.Logs())
	}
	return code
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// system is an IPAM system a test's pools point at.
type system interface {
	name() string
	poolKind() string
	secretName() string
	secretData() map[string][]byte
	// seedNetwork creates network cidr with its first usable address held
	// as the gateway.
	seedNetwork(cidr string)
	newPool(namespace, name, cidr string) poolkind.Pool
	// markedIn lists the addresses of the records whose marker names a
	// claim of namespace.
	markedIn(namespace string) []netip.Addr
	// heldIn lists every address held in cidr, marked or not.
	heldIn(cidr string) []netip.Addr
	// allocations counts the allocation requests so far.
	allocations() int
}

// forEachSystem runs a test against NetBox (the simulator, or the real one
// NETBOX_URL names) and the Infoblox WAPI simulator.
func forEachSystem(t *testing.T, test func(t *testing.T, sys system)) {
	t.Run("NetBox", func(t *testing.T) {
		target := netboxtarget.New(t)
		token := randomHex(20)
		target.AddToken(token, true)
		test(t, &netboxSystem{target: target, token: token})
	})
	t.Run("Infoblox", func(t *testing.T) {
		sim := wapisim.NewTLS()
		t.Cleanup(sim.Close)
		s := &infobloxSystem{sim: sim, password: "pw-" + randomHex(8)}
		sim.OnAllocate(func(wapisim.Object) { s.allocated.Add(1) })
		sim.AddUser("capi", s.password, wapisim.Permissions{Write: true, Superuser: true})
		test(t, s)
	})
}

type netboxSystem struct {
	target netboxtarget.Target
	token  string
}

func (s *netboxSystem) name() string       { return "NetBox" }
func (s *netboxSystem) poolKind() string   { return "NetboxIPPool" }
func (s *netboxSystem) secretName() string { return "netbox" }
func (s *netboxSystem) secretData() map[string][]byte {
	return map[string][]byte{v1alpha1.NetboxTokenKey: []byte(s.token)}
}
func (s *netboxSystem) seedNetwork(cidr string) {
	s.target.AddPrefixWithGateway(cidr, netboxsim.PrefixOptions{})
}
func (s *netboxSystem) newPool(namespace, name, cidr string) poolkind.Pool {
	return &v1alpha1.NetboxIPPool{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: v1alpha1.NetboxIPPoolSpec{
			Connection: v1alpha1.NetboxConnection{URL: s.target.URL(), CredentialsSecretRef: v1alpha1.SecretReference{Name: s.secretName()}},
			Sources:    []v1alpha1.NetboxAddressSource{{Prefix: &v1alpha1.NetboxPrefixSource{CIDR: cidr}}},
		}}
}
func (s *netboxSystem) markedIn(namespace string) []netip.Addr {
	var out []netip.Addr
	for _, ip := range s.target.IPAddresses() {
		if m, _ := ip.CustomFields[netbox.DefaultMarkerField].(string); strings.Contains("/"+m, "/"+namespace+"/") {
			out = append(out, netip.MustParsePrefix(ip.Address).Addr())
		}
	}
	return out
}
func (s *netboxSystem) heldIn(cidr string) []netip.Addr {
	var out []netip.Addr
	p := netip.MustParsePrefix(cidr)
	for _, ip := range s.target.IPAddresses() {
		if a := netip.MustParsePrefix(ip.Address).Addr(); p.Contains(a) {
			out = append(out, a)
		}
	}
	return out
}
func (s *netboxSystem) allocations() int {
	n := 0
	for _, c := range s.target.Calls() {
		if c.Method == "POST" && strings.Contains(c.Path, "/available-ips/") {
			n++
		}
	}
	return n
}

type infobloxSystem struct {
	sim       *wapisim.Server
	password  string
	allocated atomic.Int64
}

func (s *infobloxSystem) name() string       { return "Infoblox" }
func (s *infobloxSystem) poolKind() string   { return "InfobloxIPPool" }
func (s *infobloxSystem) secretName() string { return "infoblox" }
func (s *infobloxSystem) secretData() map[string][]byte {
	return map[string][]byte{
		v1alpha1.InfobloxUsernameKey: []byte("capi"),
		v1alpha1.InfobloxPasswordKey: []byte(s.password),
		v1alpha1.CABundleKey:         s.sim.CACertPEM(),
	}
}
func (s *infobloxSystem) seedNetwork(cidr string) {
	s.sim.AddNetwork("default", cidr, nil)
	s.sim.AddFixedAddress("default", netip.MustParsePrefix(cidr).Addr().Next().String(), nil)
}
func (s *infobloxSystem) newPool(namespace, name, cidr string) poolkind.Pool {
	port, _ := strconv.Atoi(s.sim.Port())
	return &v1alpha1.InfobloxIPPool{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: v1alpha1.InfobloxIPPoolSpec{
			Connection: v1alpha1.InfobloxConnection{
				Host: s.sim.Host(), Port: int32(port), CredentialsSecretRef: v1alpha1.SecretReference{Name: s.secretName()},
			},
			Sources: []v1alpha1.InfobloxAddressSource{{Network: &v1alpha1.InfobloxNetworkSource{CIDR: cidr}}},
		}}
}
func (s *infobloxSystem) objects() []wapisim.Object {
	var out []wapisim.Object
	for _, t := range []string{"fixedaddress", "ipv6fixedaddress", "record:host"} {
		out = append(out, s.sim.Objects(t)...)
	}
	return out
}
func (s *infobloxSystem) markedIn(namespace string) []netip.Addr {
	var out []netip.Addr
	for _, o := range s.objects() {
		if m := o.EAs[infoblox.DefaultMarkerEA]; m != "" && strings.Contains("/"+m, "/"+namespace+"/") {
			out = append(out, o.Addresses...)
		}
	}
	return out
}
func (s *infobloxSystem) heldIn(cidr string) []netip.Addr {
	var out []netip.Addr
	p := netip.MustParsePrefix(cidr)
	for _, o := range s.objects() {
		for _, a := range o.Addresses {
			if p.Contains(a) {
				out = append(out, a)
			}
		}
	}
	slices.SortFunc(out, func(a, b netip.Addr) int { return a.Compare(b) })
	return out
}

// allocations counts the addresses handed out, alone or in a batch.
func (s *infobloxSystem) allocations() int { return int(s.allocated.Load()) }
