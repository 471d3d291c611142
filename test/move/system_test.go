package move

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/api/v1alpha1"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends/infoblox"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends/netbox"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/pkg/poolkind"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/netboxsim"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/netboxtarget"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/wapisim"
)

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// call is one request the proxy forwarded.
type call struct {
	// cluster is the management cluster whose credentials the request
	// carried ("" when none).
	cluster string
	method  string
	path    string
	at      time.Time
}

// write says whether the request may change a record: NetBox and WAPI
// read only with GET (WAPI's request object, a POST, runs writes).
func (c call) write() bool {
	return c.method != http.MethodGet && c.method != http.MethodHead && c.method != http.MethodOptions
}

// ipamProxy stands between both managers and the IPAM system: the pools,
// which the move carries from one management cluster to the other
// unchanged, name it. It tells the managers' requests apart by the
// credentials each management cluster's Secrets hold.
type ipamProxy struct {
	ts    *httptest.Server
	owner func(*http.Request) string

	mu    sync.Mutex
	calls []call
}

// newIPAMProxy forwards to upstream; with useTLS it serves HTTPS with
// httptest's certificate (caPEM).
func newIPAMProxy(t *testing.T, upstream string, useTLS bool, owner func(*http.Request) string) *ipamProxy {
	t.Helper()
	u, err := url.Parse(upstream)
	if err != nil {
		t.Fatal(err)
	}
	p := &ipamProxy{owner: owner}
	rp := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) { r.SetURL(u) }}
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		p.calls = append(p.calls, call{cluster: p.owner(r), method: r.Method, path: r.URL.Path, at: time.Now()})
		p.mu.Unlock()
		rp.ServeHTTP(w, r)
	})
	if useTLS {
		p.ts = httptest.NewTLSServer(handler)
	} else {
		p.ts = httptest.NewServer(handler)
	}
	t.Cleanup(p.ts.Close)
	return p
}

func (p *ipamProxy) URL() string { return p.ts.URL }

// caPEM is the proxy's certificate, for a Secret's ca.crt.
func (p *ipamProxy) caPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: p.ts.Certificate().Raw})
}

// writesSince lists the writes of a management cluster's manager since at.
func (p *ipamProxy) writesSince(cluster string, at time.Time) []call {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []call
	for _, c := range p.calls {
		if c.cluster == cluster && c.write() && !c.at.Before(at) {
			out = append(out, c)
		}
	}
	return out
}

// unattributed lists the requests that carried neither management
// cluster's credentials.
func (p *ipamProxy) unattributed() []call {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []call
	for _, c := range p.calls {
		if c.cluster == "" {
			out = append(out, c)
		}
	}
	return out
}

// record is a reservation in the IPAM system, as its own listing shows it.
type record struct {
	address netip.Prefix
	marker  string
}

// system is an IPAM system that both management clusters' pools point at,
// through the proxy.
type system interface {
	name() string
	poolKind(global bool) string
	// secretName names the Secret of every pool.
	secretName() string
	// secretData holds cluster's own credentials.
	secretData(cluster *mgmt) map[string][]byte
	// seedNetwork creates network cidr with its first usable address held
	// as the gateway.
	seedNetwork(cidr string)
	// newPool returns a pool on cidr; a Global pool when namespace is "".
	newPool(namespace, name, cidr string) poolkind.Pool
	// recordsIn lists the records in cidr, marked or not.
	recordsIn(cidr string) []record
	proxy() *ipamProxy
}

// forEachSystem runs test against NetBox (the simulator, or the real one
// NETBOX_URL names) and the Infoblox WAPI simulator.
func forEachSystem(t *testing.T, test func(t *testing.T, sys system)) {
	t.Run("NetBox", func(t *testing.T) {
		target := netboxtarget.New(t)
		s := &netboxSystem{target: target, tokens: map[string]string{}}
		for _, c := range []*mgmt{clusterA, clusterB} {
			s.tokens[c.name] = randomHex(20)
			target.AddToken(s.tokens[c.name], true)
		}
		s.px = newIPAMProxy(t, target.URL(), false, func(r *http.Request) string {
			auth := r.Header.Get("Authorization")
			for cluster, token := range s.tokens {
				if strings.HasSuffix(auth, token) {
					return cluster
				}
			}
			return ""
		})
		test(t, s)
	})
	t.Run("Infoblox", func(t *testing.T) {
		s := &infobloxSystem{sim: wapisim.New(), passwords: map[string]string{}}
		t.Cleanup(s.sim.Close)
		for _, c := range []*mgmt{clusterA, clusterB} {
			s.passwords[c.name] = "pw-" + randomHex(8)
			s.sim.AddUser(s.user(c), s.passwords[c.name], wapisim.Permissions{Write: true, Superuser: true})
		}
		s.px = newIPAMProxy(t, s.sim.URL(), true, func(r *http.Request) string {
			user, _, _ := r.BasicAuth()
			for _, c := range []*mgmt{clusterA, clusterB} {
				if user == s.user(c) {
					return c.name
				}
			}
			return ""
		})
		test(t, s)
	})
}

type netboxSystem struct {
	target netboxtarget.Target
	tokens map[string]string
	px     *ipamProxy
}

func (s *netboxSystem) name() string { return "NetBox" }
func (s *netboxSystem) poolKind(global bool) string {
	if global {
		return "GlobalNetboxIPPool"
	}
	return "NetboxIPPool"
}
func (s *netboxSystem) secretName() string { return "netbox" }
func (s *netboxSystem) secretData(c *mgmt) map[string][]byte {
	return map[string][]byte{v1alpha1.NetboxTokenKey: []byte(s.tokens[c.name])}
}
func (s *netboxSystem) seedNetwork(cidr string) {
	s.target.AddPrefixWithGateway(cidr, netboxsim.PrefixOptions{})
}
func (s *netboxSystem) newPool(namespace, name, cidr string) poolkind.Pool {
	spec := v1alpha1.NetboxIPPoolSpec{
		Connection: v1alpha1.NetboxConnection{URL: s.px.URL(), CredentialsSecretRef: v1alpha1.SecretReference{Name: s.secretName()}},
		Sources:    []v1alpha1.NetboxAddressSource{{Prefix: &v1alpha1.NetboxPrefixSource{CIDR: cidr}}},
	}
	if namespace == "" {
		return &v1alpha1.GlobalNetboxIPPool{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}
	}
	return &v1alpha1.NetboxIPPool{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}, Spec: spec}
}
func (s *netboxSystem) recordsIn(cidr string) []record {
	var out []record
	p := netip.MustParsePrefix(cidr)
	for _, ip := range s.target.IPAddresses() {
		a := netip.MustParsePrefix(ip.Address)
		if p.Contains(a.Addr()) {
			m, _ := ip.CustomFields[netbox.DefaultMarkerField].(string)
			out = append(out, record{address: a, marker: m})
		}
	}
	return sortRecords(out)
}
func (s *netboxSystem) proxy() *ipamProxy { return s.px }

type infobloxSystem struct {
	sim       *wapisim.Server
	passwords map[string]string
	px        *ipamProxy
}

func (s *infobloxSystem) user(c *mgmt) string { return "capi-" + strings.ToLower(c.name) }
func (s *infobloxSystem) name() string        { return "Infoblox" }
func (s *infobloxSystem) poolKind(global bool) string {
	if global {
		return "GlobalInfobloxIPPool"
	}
	return "InfobloxIPPool"
}
func (s *infobloxSystem) secretName() string { return "infoblox" }
func (s *infobloxSystem) secretData(c *mgmt) map[string][]byte {
	return map[string][]byte{
		v1alpha1.InfobloxUsernameKey: []byte(s.user(c)),
		v1alpha1.InfobloxPasswordKey: []byte(s.passwords[c.name]),
		v1alpha1.CABundleKey:         s.px.caPEM(),
	}
}
func (s *infobloxSystem) seedNetwork(cidr string) {
	s.sim.AddNetwork("default", cidr, nil)
	s.sim.AddFixedAddress("default", netip.MustParsePrefix(cidr).Addr().Next().String(), nil)
}
func (s *infobloxSystem) newPool(namespace, name, cidr string) poolkind.Pool {
	u, _ := url.Parse(s.px.URL())
	port, _ := strconv.Atoi(u.Port())
	spec := v1alpha1.InfobloxIPPoolSpec{
		Connection: v1alpha1.InfobloxConnection{
			Host: u.Hostname(), Port: int32(port), CredentialsSecretRef: v1alpha1.SecretReference{Name: s.secretName()},
		},
		Sources: []v1alpha1.InfobloxAddressSource{{Network: &v1alpha1.InfobloxNetworkSource{CIDR: cidr}}},
	}
	if namespace == "" {
		return &v1alpha1.GlobalInfobloxIPPool{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}
	}
	return &v1alpha1.InfobloxIPPool{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}, Spec: spec}
}
func (s *infobloxSystem) recordsIn(cidr string) []record {
	var out []record
	p := netip.MustParsePrefix(cidr)
	for _, typ := range []string{"fixedaddress", "ipv6fixedaddress", "record:host"} {
		for _, o := range s.sim.Objects(typ) {
			for _, a := range o.Addresses {
				if p.Contains(a) {
					out = append(out, record{address: netip.PrefixFrom(a, p.Bits()), marker: o.EAs[infoblox.DefaultMarkerEA]})
				}
			}
		}
	}
	return sortRecords(out)
}
func (s *infobloxSystem) proxy() *ipamProxy { return s.px }

func sortRecords(r []record) []record {
	slices.SortFunc(r, func(a, b record) int { return a.address.Addr().Compare(b.address.Addr()) })
	return r
}
