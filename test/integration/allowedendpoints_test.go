package integration

import (
	"errors"
	"net"
	"net/url"
	"reflect"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/api/v1alpha1"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/cmd/poolkinds"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/pkg/endpointpolicy"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/pkg/poolkind"
)

// connectionCounter is a TCP listener that counts the connections made to
// it: what a tenant's pool would make the manager reach.
type connectionCounter struct {
	listener net.Listener
	accepted atomic.Int32
}

func countConnections(t *testing.T) *connectionCounter {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	c := &connectionCounter{listener: l}
	go func() {
		for {
			conn, err := l.Accept()
			if errors.Is(err, net.ErrClosed) {
				return
			}
			if err == nil {
				c.accepted.Add(1)
				_ = conn.Close()
			}
		}
	}()
	t.Cleanup(func() { _ = l.Close() })
	return c
}

// pointAt makes a pool, namespaced or Global, name host:port as its IPAM
// endpoint, and returns the endpoint as --allowed-endpoints spells it.
func pointAt(t *testing.T, pool poolkind.Pool, host string, port int) string {
	t.Helper()
	switch p := pool.(type) {
	case interface {
		GetNetboxSpec() *v1alpha1.NetboxIPPoolSpec
	}:
		c := &p.GetNetboxSpec().Connection
		u, err := url.Parse(c.URL)
		require.NoError(t, err)
		u.Host = net.JoinHostPort(host, strconv.Itoa(port))
		c.URL = u.String()
	case interface {
		GetInfobloxSpec() *v1alpha1.InfobloxIPPoolSpec
	}:
		c := &p.GetInfobloxSpec().Connection
		c.Host, c.Port = host, int32(port)
	default:
		t.Fatalf("no endpoint for %T", pool)
	}
	return endpointOf(t, pool)
}

// endpointOf is a pool's endpoint as the manager reads it, spelled as
// --allowed-endpoints spells it.
func endpointOf(t *testing.T, pool poolkind.Pool) string {
	t.Helper()
	for _, kind := range poolkinds.All() {
		if reflect.TypeOf(kind.New()) == reflect.TypeOf(pool) {
			return endpointpolicy.Describe(kind.Endpoint(pool))
		}
	}
	t.Fatalf("no pool kind for %T", pool)
	return ""
}

// A namespace editor may create pools, and a pool names its IPAM system by
// URL. With --allowed-endpoints set, a namespaced pool that names another
// endpoint is refused with a condition and an event, and the manager never
// connects to it, neither to validate the pool nor for a claim of it; a pool
// on an allowed endpoint works as before.
func TestANamespacedPoolReachesOnlyTheEndpointsAnAdministratorAllowed(t *testing.T) {
	bin := managerBinary(t)
	forEachSystem(t, func(t *testing.T, f *fixture) {
		f.filter = "endpoints-" + f.ns
		f.seedNetwork("10.36.0.0/24")
		allowed := f.sys.newPool(f.ns, "allowed", "10.36.0.0/24", f.secret, false)
		allowed.SetLabels(f.labels())
		refused := f.sys.newPool(f.ns, "refused", "10.36.0.0/24", f.secret, false)
		refused.SetLabels(f.labels())
		counter := countConnections(t)
		port := counter.listener.Addr().(*net.TCPAddr).Port
		refusedEndpoint := pointAt(t, refused, "127.0.0.1", port)

		mgr := startManagerProcess(t, bin, f.filter, "--allowed-endpoints="+endpointOf(t, allowed)+",https://netbox.example.com")
		require.NoError(t, k8s.Create(f.ctx, allowed))
		require.NoError(t, k8s.Create(f.ctx, refused))
		f.waitPoolReady(allowed)
		cond := f.waitPoolCondition(refused, v1alpha1.ReadyCondition, metav1.ConditionFalse, v1alpha1.EndpointNotAllowedReason)
		// Tenants read the condition: the administrator's list is not theirs.
		assert.NotContains(t, cond.Message, "netbox.example.com", "the message does not list the allowed endpoints")
		assert.Contains(t, cond.Message, refusedEndpoint, "the message names the endpoint refused")
		event := f.waitEvent(f.ns, refused.GetName(), v1alpha1.EndpointNotAllowedReason)
		assert.Equal(t, corev1.EventTypeWarning, event.Type)

		// A claim of the refused pool waits, and makes no connection either.
		waiting := f.createClaim("waiting", refused.GetName())
		f.waitClaimReason(waiting, ipamv1.IPAddressClaimReadyPoolNotReadyReason)
		bound := f.waitBound(f.createClaim("bound", allowed.GetName()))
		assert.NotEmpty(t, bound.Spec.Address)

		// Bring the pool back for a validation after the claim's retries.
		f.update(refused, func() { refused.SetAnnotations(map[string]string{"poke": time.Now().String()}) })
		time.Sleep(2 * time.Second)
		assert.Zero(t, counter.accepted.Load(), "connections made to an endpoint no administrator allowed")
		t.Logf("refused pool: Ready=False %s: %s; connections to its endpoint: %d", cond.Reason, cond.Message, counter.accepted.Load())

		// A Global pool is an administrator's and is not held to the list:
		// the same endpoint is reached, which is also what shows that the
		// listener counts.
		secretName := "endpoints-" + f.ns
		f.createSystemSecret(managerNamespace, secretName)
		global := f.sys.newPool("", "global-endpoints-"+f.ns, "10.36.0.0/24", secretName, true)
		global.SetLabels(f.labels())
		pointAt(t, global, "127.0.0.1", port)
		require.NoError(t, k8s.Create(f.ctx, global))
		require.Eventually(t, func() bool { return counter.accepted.Load() > 0 }, waitTimeout, 50*time.Millisecond,
			"a Global pool on the same endpoint connects to it")
		t.Logf("a Global pool on the same endpoint: %d connections", counter.accepted.Load())
		require.NoError(t, k8s.Delete(f.ctx, global))
		f.waitGone(global)
		mgr.Stop()
	})
}
