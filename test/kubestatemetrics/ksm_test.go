// Package kubestatemetrics loads the provider's custom-resource
// configuration (config/metrics) into a real kube-state-metrics, built from
// the Go module proxy by hack/kube-state-metrics/install.sh, running with a
// ServiceAccount bound to the shipped ClusterRole only, and checks the
// series it serves for a pool of each kind.
package kubestatemetrics

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/api/v1alpha1"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/pkg/poolkind"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/pkg/scheme"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/envtestenv"
)

// binary is kube-state-metrics: $KUBE_STATE_METRICS (make test sets it), or
// what the install script builds and caches.
func binary(t *testing.T) string {
	t.Helper()
	if bin := os.Getenv("KUBE_STATE_METRICS"); bin != "" {
		return bin
	}
	cmd := exec.Command(filepath.Join(envtestenv.RepoRoot(), "hack", "kube-state-metrics", "install.sh"))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	// Not a skip: without the binary the configuration would go unproven.
	require.NoError(t, err, "hack/kube-state-metrics/install.sh")
	return strings.TrimSpace(string(out))
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func TestKubeStateMetricsReportsEveryPoolKind(t *testing.T) {
	bin := binary(t)
	ctx := context.Background()
	env, cfg, err := envtestenv.Start()
	require.NoError(t, err)
	t.Cleanup(func() { _ = env.Stop() })
	admin, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	require.NoError(t, err)

	// kube-state-metrics' identity: a ServiceAccount bound to the shipped
	// role and nothing else.
	require.NoError(t, admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tenant"}}))
	token, err := envtestenv.ServiceAccountToken(ctx, cfg, "monitoring", "kube-state-metrics", "config/metrics/kube-state-metrics-role.yaml")
	require.NoError(t, err)

	// A pool of each kind, with the status the pool reconciler writes.
	ready := metav1.Condition{Type: v1alpha1.ReadyCondition, Status: metav1.ConditionTrue, Reason: v1alpha1.ReadyReason, LastTransitionTime: metav1.Now()}
	refused := metav1.Condition{Type: v1alpha1.ReadyCondition, Status: metav1.ConditionFalse, Reason: v1alpha1.AuthenticationFailedReason,
		Message: "NetBox refused the token", LastTransitionTime: metav1.Now()}
	secret := v1alpha1.SecretReference{Name: "creds"}
	netboxSpec := v1alpha1.NetboxIPPoolSpec{Connection: v1alpha1.NetboxConnection{URL: "https://netbox.example.com", CredentialsSecretRef: secret},
		Sources: []v1alpha1.NetboxAddressSource{{Prefix: &v1alpha1.NetboxPrefixSource{CIDR: "10.0.0.0/24"}}}}
	infobloxSpec := v1alpha1.InfobloxIPPoolSpec{Connection: v1alpha1.InfobloxConnection{Host: "grid.example.com", CredentialsSecretRef: secret},
		Sources: []v1alpha1.InfobloxAddressSource{{Network: &v1alpha1.InfobloxNetworkSource{CIDR: "10.1.0.0/24"}}}}
	pools := []struct {
		pool       poolkind.Pool
		kind       string
		condition  metav1.Condition
		used, free int64
	}{
		{&v1alpha1.NetboxIPPool{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "lab"}, Spec: netboxSpec}, "NetboxIPPool", ready, 3, 250},
		{&v1alpha1.GlobalNetboxIPPool{ObjectMeta: metav1.ObjectMeta{Name: "shared"}, Spec: netboxSpec}, "GlobalNetboxIPPool", refused, 0, 253},
		{&v1alpha1.InfobloxIPPool{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "grid"}, Spec: infobloxSpec}, "InfobloxIPPool", ready, 10, 244},
		{&v1alpha1.GlobalInfobloxIPPool{ObjectMeta: metav1.ObjectMeta{Name: "grid"}, Spec: infobloxSpec}, "GlobalInfobloxIPPool", ready, 254, 0},
	}
	for _, p := range pools {
		require.NoError(t, admin.Create(ctx, p.pool))
		status := p.pool.GetPoolStatus()
		status.Conditions = []metav1.Condition{p.condition}
		status.Addresses = &v1alpha1.AddressCounts{Total: p.used + p.free, Used: p.used, Free: p.free}
		require.NoError(t, admin.Status().Update(ctx, p.pool))
	}

	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	require.NoError(t, envtestenv.WriteKubeconfig(&rest.Config{Host: cfg.Host, TLSClientConfig: rest.TLSClientConfig{CAData: cfg.CAData},
		BearerToken: token}, kubeconfig))
	port := freePort(t)
	logPath := filepath.Join(dir, "kube-state-metrics.log")
	logFile, err := os.Create(logPath)
	require.NoError(t, err)
	cmd := exec.Command(bin, "--kubeconfig="+kubeconfig, "--custom-resource-state-only",
		"--custom-resource-state-config-file="+filepath.Join(envtestenv.RepoRoot(), "config", "metrics", "crd-metrics-config.yaml"),
		"--host=127.0.0.1", fmt.Sprintf("--port=%d", port), "--telemetry-host=127.0.0.1", fmt.Sprintf("--telemetry-port=%d", freePort(t)))
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
		_ = logFile.Close()
		if t.Failed() {
			log, _ := os.ReadFile(logPath)
			t.Logf("kube-state-metrics log:\n%s", log)
		}
	})

	var want []string
	for _, p := range pools {
		labels := fmt.Sprintf(`pool="%s",pool_kind="%s"`, p.pool.GetName(), p.kind)
		if ns := p.pool.GetNamespace(); ns != "" {
			// A Global pool has no namespace, and its series no such label.
			labels += fmt.Sprintf(`,pool_namespace="%s"`, ns)
		}
		for _, status := range []string{"True", "False", "Unknown"} {
			v := 0
			if status == string(p.condition.Status) {
				v = 1
			}
			want = append(want, fmt.Sprintf(`capi_ipam_bridge_poolstate_status_condition{customresource_group="ipam-bridge.github.io",customresource_kind="%s",customresource_version="v1alpha1",%s,reason="%s",status="%s",type="Ready"} %d`,
				p.kind, labels, p.condition.Reason, status, v))
		}
		for typ, v := range map[string]int64{"total": p.used + p.free, "used": p.used, "free": p.free} {
			want = append(want, fmt.Sprintf(`capi_ipam_bridge_poolstate_status_addresses{customresource_group="ipam-bridge.github.io",customresource_kind="%s",customresource_version="v1alpha1",%s,type="%s"} %d`,
				p.kind, labels, typ, v))
		}
	}
	var body string
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", port))
		require.NoError(c, err)
		defer resp.Body.Close()
		raw, err := io.ReadAll(resp.Body)
		require.NoError(c, err)
		body = string(raw)
		for _, line := range want {
			assert.True(c, strings.Contains(body, line+"\n"), "kube-state-metrics does not serve %s", line)
		}
	}, time.Minute, 500*time.Millisecond, "kube-state-metrics served:\n%s", body)
	for _, line := range strings.Split(body, "\n") {
		if strings.HasPrefix(line, "capi_ipam_bridge_poolstate_") {
			t.Log(line)
		}
	}
}
