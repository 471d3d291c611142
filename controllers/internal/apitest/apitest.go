// Package apitest is what the controllers' unit tests share: a real
// kube-apiserver and etcd started once per test binary (never a fake
// client), the objects the tests create there, a client that logs its
// writes, and small readers of owner chains for the tests of the MAC and
// Machine-name lookups.
package apitest

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/api/v1alpha1"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/pkg/scheme"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/envtestenv/controlplane"
)

// The tests of the pieces that read or write objects run on a real
// kube-apiserver and etcd, as every controller test does here, never on a
// fake client. The control plane starts once, for the first test that asks
// for it, and Main stops it: the tests that need none run without it,
// and without KUBEBUILDER_ASSETS.
var testAPI struct {
	once   sync.Once
	env    *envtest.Environment
	cfg    *rest.Config
	client client.Client
	err    error
}

// Main runs a package's tests and stops the test API server if one of
// them started it: call it from the package's TestMain.
func Main(m *testing.M) {
	code := m.Run()
	if testAPI.env != nil {
		if err := testAPI.env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping the test API server:", err)
		}
	}
	os.Exit(code)
}

// apiServer returns the test API server's configuration and a client of
// it, starting it on first use. A test that calls it fails when the server
// cannot start, KUBEBUILDER_ASSETS unset included: it is never skipped.
func Server(t *testing.T) (*rest.Config, client.Client) {
	t.Helper()
	testAPI.once.Do(func() {
		env, cfg, err := controlplane.Start()
		if err != nil {
			testAPI.err = err
			return
		}
		testAPI.env, testAPI.cfg = env, cfg
		testAPI.client, testAPI.err = client.New(cfg, client.Options{Scheme: scheme.New()})
	})
	if testAPI.err != nil {
		t.Fatalf("the test API server: %v", testAPI.err)
	}
	return testAPI.cfg, testAPI.client
}

// testNamespace creates a namespace of the test's own.
func Namespace(t *testing.T, c client.Client) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "test-"}}
	require.NoError(t, c.Create(context.Background(), ns))
	return ns.Name
}

// PoolRef is the pool the tests' claims name; no test needs it to
// exist.
var PoolRef = ipamv1.IPPoolReference{APIGroup: v1alpha1.GroupVersion.Group, Kind: "NetboxIPPool", Name: "pool"}

// CreateClaim creates a claim of PoolRef.
func CreateClaim(t *testing.T, c client.Client, namespace, name string, finalizers ...string) *ipamv1.IPAddressClaim {
	t.Helper()
	claim := &ipamv1.IPAddressClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Finalizers: finalizers},
		Spec:       ipamv1.IPAddressClaimSpec{PoolRef: PoolRef},
	}
	require.NoError(t, c.Create(context.Background(), claim))
	return claim
}

// CreateAddress creates the claim's IPAddress at addr, as the claim
// reconciler writes it: same name, controlled by the claim.
func CreateAddress(t *testing.T, c client.Client, claim *ipamv1.IPAddressClaim, addr string, annotations map[string]string) *ipamv1.IPAddress {
	t.Helper()
	prefix := int32(24)
	address := &ipamv1.IPAddress{
		ObjectMeta: metav1.ObjectMeta{Namespace: claim.Namespace, Name: claim.Name, Annotations: annotations},
		Spec: ipamv1.IPAddressSpec{
			ClaimRef: ipamv1.IPAddressClaimReference{Name: claim.Name},
			PoolRef:  claim.Spec.PoolRef,
			Address:  addr,
			Prefix:   &prefix,
		},
	}
	require.NoError(t, controllerutil.SetControllerReference(claim, address, c.Scheme()))
	require.NoError(t, c.Create(context.Background(), address))
	return address
}

// WriteLog is what a client sent that was not a read: method, path and
// body, in order.
type WriteLog struct {
	mu     sync.Mutex
	writes []sentWrite
}

type sentWrite struct {
	Method, Path, Body string
}

func (l *WriteLog) Take() []sentWrite {
	l.mu.Lock()
	defer l.mu.Unlock()
	w := l.writes
	l.writes = nil
	return w
}

// Requests are the writes as "METHOD path".
func (l *WriteLog) Requests() []string {
	var out []string
	for _, w := range l.Take() {
		out = append(out, w.Method+" "+w.Path)
	}
	return out
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// LoggingClient is a client of the test API server that logs every
// request it sends other than reads (discovery included).
func LoggingClient(t *testing.T) (client.Client, *WriteLog) {
	t.Helper()
	cfg, c := Server(t)
	log := &WriteLog{}
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			if req.Method != http.MethodGet {
				var body []byte
				if req.GetBody != nil {
					if r, err := req.GetBody(); err == nil {
						body, _ = io.ReadAll(r)
					}
				}
				log.mu.Lock()
				log.writes = append(log.writes, sentWrite{Method: req.Method, Path: req.URL.Path, Body: strings.TrimSpace(string(body))})
				log.mu.Unlock()
			}
			return rt.RoundTrip(req)
		})
	})
	logged, err := client.New(cfg, client.Options{Scheme: c.Scheme()})
	require.NoError(t, err)
	return logged, log
}
