package release

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"sigs.k8s.io/cluster-api/cmd/clusterctl/client/yamlprocessor"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/hack/release/components"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/envtestenv"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/managerproc"
)

// operatorCustomization is what the cluster-api-operator (v0.29) writes
// into the manager container's arguments for an IPAMProvider whose
// spec.manager sets every field, in the operator's own form: each
// "--flag=value" replaces the released argument of that flag, or is
// appended (internal/controller/component_customizer.go). Addresses are
// filled in by the test.
//
//	spec:
//	  manager:
//	    cacheNamespace: <watched namespace>
//	    health: {healthProbeBindAddress: <health>}
//	    metrics: {bindAddress: <diagnostics>, diagnosticsAddress: <diagnostics>}
//	    webhook: {host: 127.0.0.1, port: 9443, certDir: /tmp/k8s-webhook-server/serving-certs}
//	    profilerAddress: <profiler>
//	    leaderElection: {leaderElect: true, resourceNamespace: <ns>, resourceName: <name>,
//	                     leaseDuration: 20s, renewDeadline: 15s, retryPeriod: 3s}
//	    syncPeriod: 15m
//	    verbosity: 2
//	    maxConcurrentReconciles: 5
//	    controller: {groupKindConcurrency: {IPAddressClaim: 7}}
//	    additionalArgs: {--audit-interval: 1h}
//
// featureGates is left out: the provider has no feature gates, and, as in
// Cluster API's managers, --feature-gates refuses a gate it does not know.
func operatorCustomization(watchNamespace, health, diagnostics, profiler, leaseNamespace, leaseName string) [][2]string {
	return [][2]string{
		{"--ipaddressclaim-concurrency", "7"},
		{"--max-concurrent-reconciles", "5"},
		{"--namespace", watchNamespace},
		{"--health-addr", health},
		{"--metrics-bind-addr", diagnostics},
		{"--diagnostics-address", diagnostics},
		{"--webhook-host", "127.0.0.1"},
		{"--webhook-cert-dir", "/tmp/k8s-webhook-server/serving-certs"},
		{"--profiler-address", profiler},
		{"--leader-elect", "true"},
		{"--leader-election-id", leaseNamespace + "/" + leaseName},
		{"--leader-elect-lease-duration", "20s"},
		{"--leader-elect-renew-deadline", "15s"},
		{"--leader-elect-retry-period", "3s"},
		{"--webhook-port", "9443"},
		{"--sync-period", "900s"},
		{"--v", "2"},
		{"--audit-interval", "1h"},
	}
}

// customize applies the operator's rule to args: an argument "name=…" is
// replaced in place, anything else appended.
func customize(args []string, with [][2]string) []string {
	out := append([]string(nil), args...)
	for _, kv := range with {
		arg := kv[0] + "=" + kv[1]
		replaced := false
		for i, a := range out {
			if strings.HasPrefix(a, kv[0]+"=") {
				out[i], replaced = arg, true
			}
		}
		if !replaced {
			out = append(out, arg)
		}
	}
	return out
}

// TestManagerTakesTheOperatorsArguments runs the manager binary with the
// released Deployment's arguments as the cluster-api-operator customizes
// them with every manager field set, as the released ServiceAccount. It
// must start, take the lease the operator names, answer its probes and its
// profiler, and serve metrics over HTTPS to a client authorized by the
// released metrics-reader ClusterRole only.
func TestManagerTakesTheOperatorsArguments(t *testing.T) {
	cfg, admin := startEnv(t)
	objs := install(t)
	ctx := context.Background()
	bin, err := managerproc.Build(t.TempDir())
	require.NoError(t, err)

	watchNS := "operator-watched"
	require.NoError(t, admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: watchNS}}))
	var addrs [3]string
	for i := range addrs {
		addrs[i], err = managerproc.FreeAddr()
		require.NoError(t, err)
	}
	health, diagnostics, profiler := addrs[0], addrs[1], addrs[2]
	const leaseName = "operator-lease"

	released := effectiveArgs(t, deployment(t, objs).Spec.Template.Spec.Containers[0])
	// The operator replaces only an argument of the form "--flag=value":
	// a released "--flag value" pair or a bare "--flag" would stay beside
	// the operator's "--flag=…", setting the flag twice. So every released
	// argument has that form and names its flag once, and after the
	// operator's rewrite each flag is set once.
	for _, a := range released {
		name, _, hasValue := strings.Cut(a, "=")
		assert.True(t, strings.HasPrefix(name, "--") && hasValue, "released argument %q is not of the form --flag=value the operator replaces", a)
	}
	args := customize(released, operatorCustomization(watchNS, health, diagnostics, profiler, targetNS, leaseName))
	for _, list := range []struct {
		what string
		args []string
	}{{"released", released}, {"customized", args}} {
		seen := map[string]bool{}
		for _, a := range list.args {
			name, _, _ := strings.Cut(a, "=")
			assert.False(t, seen[name], "the %s arguments set %s twice: %v", list.what, name, list.args)
			seen[name] = true
		}
	}

	user, err := env.AddUser(envtest.User{
		Name:   "system:serviceaccount:" + targetNS + ":" + serviceAccount,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + targetNS, "system:authenticated"},
	}, cfg)
	require.NoError(t, err)
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	require.NoError(t, managerproc.WriteKubeconfig(user.Config(), kubeconfig))
	mgr := &managerproc.Process{Bin: bin, Args: args, Kubeconfig: kubeconfig, LogPath: filepath.Join(dir, "manager.log")}
	require.NoError(t, mgr.Start())
	t.Cleanup(mgr.Stop)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("manager log:\n%s", mgr.Tail(60))
		}
	})

	plain := &http.Client{Timeout: 5 * time.Second}
	get := func(c *http.Client, url, token string) (int, string, error) {
		return managerproc.Get(ctx, c, url, token)
	}

	t.Run("answers its probes", func(t *testing.T) {
		for _, path := range []string{"/healthz", "/readyz"} {
			require.EventuallyWithT(t, func(c *assert.CollectT) {
				require.True(c, mgr.Running(), "the manager exited")
				code, body, err := get(plain, "http://"+health+path, "")
				require.NoError(c, err)
				assert.Equal(c, http.StatusOK, code, "%s: %s", path, body)
			}, 60*time.Second, 200*time.Millisecond)
		}
	})

	t.Run("leads with the lease the operator names", func(t *testing.T) {
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			lease := &coordinationv1.Lease{}
			require.NoError(c, admin.Get(ctx, client.ObjectKey{Namespace: targetNS, Name: leaseName}, lease))
			assert.NotEmpty(c, ptr.Deref(lease.Spec.HolderIdentity, ""))
			assert.Equal(c, int32(20), ptr.Deref(lease.Spec.LeaseDurationSeconds, 0))
		}, 60*time.Second, 200*time.Millisecond)
	})

	t.Run("serves its profiler", func(t *testing.T) {
		code, _, err := get(plain, "http://"+profiler+"/debug/pprof/", "")
		require.NoError(t, err)
		assert.Equal(t, http.StatusOK, code)
	})

	t.Run("serves metrics to authorized clients only", func(t *testing.T) {
		clientset, err := kubernetes.NewForConfig(cfg)
		require.NoError(t, err)
		token := func(sa string) string {
			tr, err := clientset.CoreV1().ServiceAccounts(watchNS).CreateToken(ctx, sa,
				&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(600))}}, metav1.CreateOptions{})
			require.NoError(t, err)
			return tr.Status.Token
		}
		for _, sa := range []string{"prometheus", "stranger"} {
			require.NoError(t, admin.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: watchNS, Name: sa}}))
		}
		// The released ClusterRole, bound as docs/metrics.md says.
		require.NoError(t, admin.Create(ctx, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "prometheus-reads-ipam-bridge"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "capi-ipam-bridge-metrics-reader"},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: watchNS, Name: "prometheus"}},
		}))
		secure := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
			// The manager's serving certificate is self-signed.
			TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // a test against loopback
		}}
		url := "https://" + diagnostics + "/metrics"

		code, _, err := get(plain, "http://"+diagnostics+"/metrics", "")
		require.NoError(t, err)
		assert.Equal(t, http.StatusBadRequest, code, "metrics must not be served over plain HTTP")

		tests := []struct {
			name, token string
			want        int
		}{
			{"no token", "", http.StatusUnauthorized},
			// controller-runtime's filter answers a token the API server
			// rejects as a failed authentication (500), not as 401.
			{"a token the API server does not know", "not-a-token", http.StatusInternalServerError},
			{"a ServiceAccount without the metrics-reader role", token("stranger"), http.StatusForbidden},
			{"a ServiceAccount bound to the metrics-reader role", token("prometheus"), http.StatusOK},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				require.EventuallyWithT(t, func(c *assert.CollectT) {
					code, body, err := get(secure, url, tt.token)
					require.NoError(c, err)
					require.Equal(c, tt.want, code, body)
					if tt.want == http.StatusOK {
						assert.Contains(c, body, "controller_runtime_reconcile_total", "the manager's metrics are served")
					}
				}, 30*time.Second, 500*time.Millisecond)
			})
		}
	})

	assert.True(t, mgr.Running(), "the manager exited")
	assert.NotContains(t, mgr.Tail(400), "unknown flag", fmt.Sprintf("arguments %v", args))
}

// TestPrometheusPieceScrapesTheManager renders the released monitoring
// asset as `clusterctl generate yaml --from monitoring.yaml` would, for the
// default install and for one in another namespace watched by a Prometheus
// of another Helm release, and checks that its ServiceMonitor reaches the
// manager the components of that namespace install: the monitor selects the
// Service, whose selector matches the Deployment's pods and whose port is
// the container's metrics port, scraped over HTTPS with a token; and that a
// kube-prometheus-stack Prometheus of that release selects the monitor and
// the rules.
func TestPrometheusPieceScrapesTheManager(t *testing.T) {
	for _, tc := range []struct {
		name, namespace, release string
		variables                map[string]string
	}{
		{name: "defaults", namespace: targetNS, release: "kube-prometheus-stack"},
		{name: "another namespace and Prometheus release", namespace: "ipam-elsewhere", release: "prometheus",
			variables: map[string]string{"IPAM_BRIDGE_NAMESPACE": "ipam-elsewhere", "IPAM_BRIDGE_PROMETHEUS_RELEASE": "prometheus"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			target := tc.namespace
			if target == targetNS {
				target = ""
			}
			objs := render(t, repository(t), nil, target).Objs()
			monitoring := renderMonitoring(t, tc.variables)
			assertMonitoringReachesTheManager(t, objs, monitoring, tc.namespace, tc.release)
		})
	}
}

// renderMonitoring processes the release's monitoring asset with
// clusterctl's YAML processor and variables, defaults for the rest.
func renderMonitoring(t *testing.T, variables map[string]string) []map[string]any {
	t.Helper()
	raw, err := components.Monitoring(envtestenv.RepoRoot())
	require.NoError(t, err)
	processor := yamlprocessor.NewSimpleProcessor()
	names, err := processor.GetVariables(raw)
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"IPAM_BRIDGE_NAMESPACE", "IPAM_BRIDGE_PROMETHEUS_RELEASE"}, names)
	out, err := processor.Process(raw, func(name string) (string, error) {
		if v, ok := variables[name]; ok {
			return v, nil
		}
		return "", fmt.Errorf("variable %s not set", name)
	})
	require.NoError(t, err)
	var objs []map[string]any
	for _, doc := range strings.Split(string(out), "\n---\n") {
		o := map[string]any{}
		require.NoError(t, yaml.Unmarshal([]byte(doc), &o))
		objs = append(objs, o)
	}
	return objs
}

func assertMonitoringReachesTheManager(t *testing.T, objs []unstructured.Unstructured, monitoring []map[string]any, namespace, release string) {
	d := deployment(t, objs)
	assert.Equal(t, namespace, d.Namespace)
	var svc, monitor, secret, binding, rule map[string]any
	for _, o := range monitoring {
		meta := o["metadata"].(map[string]any)
		if ns, ok := meta["namespace"]; ok {
			assert.Equal(t, namespace, ns, "%s %s", o["kind"], meta["name"])
		}
		switch o["kind"] {
		case "Service":
			svc = o
		case "ServiceMonitor":
			monitor = o
		case "Secret":
			secret = o
		case "ClusterRoleBinding":
			binding = o
		case "PrometheusRule":
			rule = o
		}
	}
	require.NotNil(t, rule, "the PrometheusRule ships with the ServiceMonitor")
	require.NotNil(t, svc)
	require.NotNil(t, monitor)
	for _, o := range []map[string]any{monitor, rule} {
		// kube-prometheus-stack's Prometheus selects by the label release
		// (its Helm release), in every namespace.
		got, _, _ := unstructured.NestedString(o, "metadata", "labels", "release")
		assert.Equal(t, release, got, "%s", o["kind"])
	}
	shipped, err := os.ReadFile(filepath.Join(envtestenv.RepoRoot(), "config", "prometheus", "rules.yaml"))
	require.NoError(t, err)
	want := map[string]any{}
	require.NoError(t, yaml.Unmarshal(shipped, &want))
	assert.Equal(t, want["spec"], rule["spec"], "the released rules are config/prometheus/rules.yaml's")

	selector, _, _ := unstructured.NestedStringMap(svc, "spec", "selector")
	require.NotEmpty(t, selector)
	for k, v := range selector {
		assert.Equal(t, v, d.Spec.Template.Labels[k], "the Service selects pod label %s=%s, which the manager's pods lack", k, v)
	}
	ports, _, _ := unstructured.NestedSlice(svc, "spec", "ports")
	require.Len(t, ports, 1)
	port := ports[0].(map[string]any)
	var containerPort int64
	for _, p := range d.Spec.Template.Spec.Containers[0].Ports {
		if p.Name == port["targetPort"] {
			containerPort = int64(p.ContainerPort)
		}
	}
	assert.Equal(t, int64(8443), containerPort, "the Service's targetPort names the container's metrics port")
	svcName, _, _ := unstructured.NestedString(svc, "metadata", "name")
	assert.Equal(t, "capi-ipam-bridge-controller-manager-metrics", svcName,
		"the Service's name is the job of the scraped series, which IPAMBridgeManagerDown names")

	svcLabels, _, _ := unstructured.NestedStringMap(svc, "metadata", "labels")
	match, _, _ := unstructured.NestedStringMap(monitor, "spec", "selector", "matchLabels")
	require.NotEmpty(t, match)
	for k, v := range match {
		assert.Equal(t, v, svcLabels[k], "the ServiceMonitor selects Service label %s=%s", k, v)
	}
	endpoints, _, _ := unstructured.NestedSlice(monitor, "spec", "endpoints")
	require.Len(t, endpoints, 1)
	ep := endpoints[0].(map[string]any)
	assert.Equal(t, port["name"], ep["port"])
	assert.Equal(t, "https", ep["scheme"])
	assert.Equal(t, "/metrics", ep["path"])
	assert.NotContains(t, ep, "bearerTokenFile", "deprecated by the Prometheus Operator")
	assert.NotContains(t, ep, "honorLabels", "the target's job and instance must win")
	assert.NotContains(t, monitor["spec"], "jobLabel", "the job is the Service's name")

	// The token the Prometheus Operator reads is the metrics-scraper
	// ServiceAccount's, which is bound to the released metrics-reader role.
	require.NotNil(t, secret)
	require.NotNil(t, binding)
	authType, _, _ := unstructured.NestedString(ep, "authorization", "type")
	assert.Equal(t, "Bearer", authType)
	secretName, _, _ := unstructured.NestedString(ep, "authorization", "credentials", "name")
	assert.Equal(t, secret["metadata"].(map[string]any)["name"], secretName, "the ServiceMonitor names the token Secret")
	assert.Equal(t, "kubernetes.io/service-account-token", secret["type"])
	sa, _, _ := unstructured.NestedString(secret, "metadata", "annotations", "kubernetes.io/service-account.name")
	subjects, _, _ := unstructured.NestedSlice(binding, "subjects")
	require.Len(t, subjects, 1)
	subject := subjects[0].(map[string]any)
	assert.Equal(t, sa, subject["name"], "the token's ServiceAccount is the one bound")
	assert.Equal(t, namespace, subject["namespace"])
	roleName, _, _ := unstructured.NestedString(binding, "roleRef", "name")
	var released []string
	for _, o := range objs {
		if o.GetKind() == "ClusterRole" {
			released = append(released, o.GetName())
		}
	}
	assert.Contains(t, released, roleName, "the binding names a released ClusterRole")
}
