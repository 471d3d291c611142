// Package prometheus runs the shipped alerts end to end: a real Prometheus
// server scrapes the manager binary's secure metrics endpoint with a
// ServiceAccount's token, as the ServiceMonitor does, evaluates the rules
// of config/prometheus/rules.yaml, and the alerts fire and resolve on
// conditions made on the NetBox simulator.
package prometheus

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
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
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/api/v1alpha1"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends/netbox"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/pkg/backendhttp"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/pkg/scheme"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/envtestenv"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/httpfault"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/managerproc"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/netboxsim"
)

const (
	poolNS       = "tenant"
	managerNS    = "capi-ipam-bridge-system"
	monitoringNS = "monitoring"
	// A /29: few enough addresses to fill with a handful of claims.
	prefix = "192.0.2.0/29"
	token  = "0123456789abcdef0123456789abcdef01234567"
	// A token the NetBox simulator does not know: NetBox refuses it (403).
	refusedToken = "fedcba9876543210fedcba9876543210fedcba98"
	identity     = "prom-test"
	// job is the job label the ServiceMonitor of config/prometheus gives
	// the manager's series: the name of its metrics Service.
	job = "capi-ipam-bridge-controller-manager-metrics"
	// shortFor replaces every alert's `for:` in the test's copy of the
	// rules, so that an alert fires seconds after its condition holds. The
	// expressions, labels and annotations are the shipped ones.
	shortFor = "3s"
)

// TestShippedAlertsFireAndResolve makes, through the provider, the event
// behind every shipped alert (a conflict, a full pool, claims and a Cluster
// waiting, refused credentials, an outage, a failing audit, a missing
// source, a record left behind, an orphan, throttling, a manager that
// stops) and checks that Prometheus fires the alert on what it scraped from
// the manager, and that it resolves once the condition ends, but for the
// three alerts whose window outlasts a test (said where they fire).
func TestShippedAlertsFireAndResolve(t *testing.T) {
	promBin, err := exec.LookPath("prometheus")
	if err != nil {
		// Not a skip: a missing server would silently leave the shipped
		// alerts unproven.
		t.Fatal("the prometheus server is not on PATH: make test (test-alerts) installs it with hack/prometheus/install.sh")
	}
	ctx := context.Background()

	env, cfg, err := envtestenv.Start()
	require.NoError(t, err)
	t.Cleanup(func() { _ = env.Stop() })
	admin, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	require.NoError(t, err)

	sim := netboxsim.New()
	t.Cleanup(sim.Close)
	sim.AddToken(token, true)
	sim.AddPrefixWithGateway(prefix, netboxsim.PrefixOptions{})

	// Prometheus's identity, as config/prometheus/scraper.yaml makes it: a
	// ServiceAccount bound to the released metrics-reader ClusterRole.
	for _, ns := range []string{poolNS, managerNS} {
		require.NoError(t, admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	}
	scrapeToken, err := envtestenv.ServiceAccountToken(ctx, cfg, monitoringNS, "prometheus", "config/rbac/metrics_reader_role.yaml")
	require.NoError(t, err)

	// The manager, as a process of its own, serving metrics over HTTPS to
	// the clients the API server authenticates and authorizes.
	dir := t.TempDir()
	bin, err := managerproc.Build(dir)
	require.NoError(t, err)
	kubeconfig := filepath.Join(dir, "kubeconfig")
	require.NoError(t, managerproc.WriteKubeconfig(cfg, kubeconfig))
	health, err := managerproc.FreeAddr()
	require.NoError(t, err)
	diagnostics, err := managerproc.FreeAddr()
	require.NoError(t, err)
	mgr := &managerproc.Process{Bin: bin, Kubeconfig: kubeconfig, LogPath: filepath.Join(dir, "manager.log"), Args: []string{
		"--leader-elect=false", "--manager-namespace=" + managerNS,
		"--health-addr=" + health, "--diagnostics-address=" + diagnostics, "--v=2",
		// As an on-call engineer's log pipeline would read it.
		"--logging-format=json",
		// Counts follow allocations within a second, not the default ten.
		"--pool-refresh-interval=1s",
		// A readable identity, to plant an orphan's marker.
		"--marker-identity=" + identity,
	}}
	require.NoError(t, mgr.Start())
	t.Cleanup(mgr.Stop)

	prom := startPrometheus(t, promBin, diagnostics, scrapeToken)
	started := time.Now()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("manager log:\n%s", mgr.Tail(80))
			t.Logf("prometheus log:\n%s", prom.tail(40))
		}
	})

	t.Log("scraping the manager with the ServiceAccount's token")
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.True(c, mgr.Running(), "the manager exited")
		var targets struct {
			ActiveTargets []struct {
				Health    string `json:"health"`
				LastError string `json:"lastError"`
			} `json:"activeTargets"`
		}
		require.NoError(c, prom.api(ctx, "/api/v1/targets", nil, &targets))
		require.Len(c, targets.ActiveTargets, 1)
		assert.Equal(c, "up", targets.ActiveTargets[0].Health, targets.ActiveTargets[0].LastError)
	}, 2*time.Minute, time.Second)

	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: poolNS, Name: "netbox", Labels: map[string]string{v1alpha1.CredentialsLabel: "true"}},
		Data:       map[string][]byte{v1alpha1.NetboxTokenKey: []byte(token)},
	}
	require.NoError(t, admin.Create(ctx, secret))
	require.NoError(t, admin.Create(ctx, &v1alpha1.NetboxIPPool{
		ObjectMeta: metav1.ObjectMeta{Namespace: poolNS, Name: "lab"},
		Spec: v1alpha1.NetboxIPPoolSpec{
			Connection: v1alpha1.NetboxConnection{URL: sim.URL(), CredentialsSecretRef: v1alpha1.SecretReference{Name: "netbox"}},
			Sources:    []v1alpha1.NetboxAddressSource{{Prefix: &v1alpha1.NetboxPrefixSource{CIDR: prefix}}},
		},
	}))
	require.NoError(t, admin.Create(ctx, &clusterv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: poolNS, Name: "workload"},
		Spec:       clusterv1.ClusterSpec{ClusterNetwork: clusterv1.ClusterNetwork{ServiceDomain: "cluster.local"}},
	}))
	claims := 0
	addClaims := func(n int) {
		for range n {
			require.NoError(t, admin.Create(ctx, &ipamv1.IPAddressClaim{
				ObjectMeta: metav1.ObjectMeta{Namespace: poolNS, Name: fmt.Sprintf("machine-%d", claims)},
				Spec: ipamv1.IPAddressClaimSpec{
					ClusterName: "workload",
					PoolRef:     ipamv1.IPPoolReference{APIGroup: v1alpha1.GroupVersion.Group, Kind: "NetboxIPPool", Name: "lab"},
				},
			}))
			claims++
		}
	}

	// The alerts the test drives, and the pool's series they must name.
	const (
		nearlyFull      = "IPAMBridgePoolNearlyFull"
		waiting         = "IPAMBridgeClaimsWaiting"
		credentials     = "IPAMBridgePoolCredentialsRefused"
		conflict        = "IPAMBridgeAddressConflict"
		unreachable     = "IPAMBridgePoolUnreachable"
		notReady        = "IPAMBridgePoolNotReady"
		leftBehind      = "IPAMBridgeRecordsLeftBehind"
		orphans         = "IPAMBridgeOrphanRecords"
		throttling      = "IPAMBridgeBackendThrottling"
		endpointWaiting = "IPAMBridgeControlPlaneEndpointWaiting"
		auditFailing    = "IPAMBridgeAuditFailing"
		managerDown     = "IPAMBridgeManagerDown"
	)
	// Alerts whose window outlasts the test once their event is over:
	// increase() over an hour, rate() over five minutes.
	lasting := map[string]string{conflict: "an hour", leftBehind: "an hour", throttling: "five minutes"}
	poolLabels := map[string]string{"pool_kind": "NetboxIPPool", "pool_namespace": poolNS, "pool": "lab"}
	fired := map[string]bool{}
	fire := func(alert string, labels map[string]string) {
		t.Helper()
		prom.waitState(t, ctx, alert, "firing", labels)
		fired[alert] = true
	}

	t.Log("a pool with room: no alert is pending or firing")
	addClaims(1)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		// The recording rule has the pool's share of free addresses: the
		// pool's series were scraped and the rules evaluated them.
		v, ok := prom.query(c, ctx, `capi_ipam_bridge:pool_free_addresses:ratio{pool="lab"}`)
		require.True(c, ok, "no free-address ratio for the pool yet")
		assert.Greater(c, v, 0.05)
	}, time.Minute, time.Second)
	// Longer than shortFor and a few evaluations: an alert would have fired.
	time.Sleep(6 * time.Second)
	for name, st := range prom.alertStates(t, ctx) {
		assert.Equal(t, "inactive", st.State, "%s with a healthy pool: %+v", name, st.Alerts)
	}

	// The first conflict since the manager started must page: its counter
	// was scraped at 0 before it, so that increase() sees it.
	t.Log("the IPAM team deletes a bound machine's record, and NetBox answers its address to the next claim")
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		v, ok := prom.query(c, ctx, `capi_ipam_bridge_address_conflicts_total{pool_kind="NetboxIPPool"}`)
		require.True(c, ok, "the conflict counter is not scraped before any conflict")
		assert.Zero(c, v)
	}, time.Minute, time.Second)
	bound := sim.IPAddresses()
	require.Len(t, bound, 2, "the gateway and machine-0's record")
	for _, ip := range bound {
		if ip.CustomFields[netbox.DefaultMarkerField] != nil {
			sim.DeleteIPAddress(ip.ID)
		}
	}
	require.Len(t, sim.IPAddresses(), 1, "machine-0's record is deleted")
	addClaims(1)
	fire(conflict, map[string]string{"pool_kind": "NetboxIPPool"})

	t.Log("the pool full, claims and a Cluster's control-plane endpoint waiting")
	addClaims(10)
	require.NoError(t, admin.Create(ctx, &clusterv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: poolNS, Name: "platform",
			Annotations: map[string]string{v1alpha1.ControlPlaneEndpointPoolAnnotation: "NetboxIPPool/lab"}},
		Spec: clusterv1.ClusterSpec{ClusterNetwork: clusterv1.ClusterNetwork{ServiceDomain: "cluster.local"}},
	}))
	fire(nearlyFull, poolLabels)
	fire(waiting, map[string]string{"pool_kind": "NetboxIPPool", "pool_namespace": poolNS, "pool": "lab", "reason": "PoolExhausted"})
	fire(endpointWaiting, map[string]string{"cluster_namespace": poolNS, "cluster": "platform", "reason": "PoolExhausted"})

	// The manager puts its finalizer on the Secret: patch the token only.
	rotate := func(to string) {
		t.Helper()
		current := &corev1.Secret{}
		require.NoError(t, admin.Get(ctx, client.ObjectKeyFromObject(secret), current))
		before := current.DeepCopy()
		current.Data[v1alpha1.NetboxTokenKey] = []byte(to)
		require.NoError(t, admin.Patch(ctx, current, client.MergeFrom(before)))
	}

	t.Log("the pool's Secret rotated to a token NetBox refuses")
	rotate(refusedToken)
	fire(credentials, map[string]string{"pool": "lab", "pool_namespace": poolNS, "reason": v1alpha1.AuthenticationFailedReason})

	t.Log("the Secret restored")
	rotate(token)
	prom.waitState(t, ctx, credentials, "inactive", nil)
	assert.Equal(t, "firing", prom.alertStates(t, ctx)[nearlyFull].State, "the pool is still full")

	pool := &v1alpha1.NetboxIPPool{ObjectMeta: metav1.ObjectMeta{Namespace: poolNS, Name: "lab"}}
	// requestAudit asks for an audit of the pool, as its annotation does.
	requestAudit := func(ctx context.Context) error {
		p := &v1alpha1.NetboxIPPool{}
		if err := admin.Get(ctx, client.ObjectKeyFromObject(pool), p); err != nil {
			return err
		}
		before := p.DeepCopy()
		p.Annotations = map[string]string{v1alpha1.AuditAnnotation: time.Now().Format(time.RFC3339Nano)}
		return admin.Patch(ctx, p, client.MergeFrom(before))
	}
	audit := func() {
		t.Helper()
		require.NoError(t, requestAudit(ctx))
	}

	t.Log("NetBox fails every request; an audit asked for meanwhile fails")
	sim.InjectFault(netboxsim.Fault{Kind: netboxsim.FaultStatus, Status: http.StatusInternalServerError, Times: 1 << 30})
	audit()
	fire(auditFailing, poolLabels)
	fire(unreachable, poolLabels)

	t.Log("NetBox answers again, and the next audit succeeds")
	sim.ClearFaults()
	prom.waitState(t, ctx, unreachable, "inactive", nil)
	audit()
	prom.waitState(t, ctx, auditFailing, "inactive", nil)

	t.Log("the Cluster and the claims deleted: the pool has room and nothing waits")
	require.NoError(t, admin.Delete(ctx, &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: poolNS, Name: "platform"}}))
	prom.waitState(t, ctx, endpointWaiting, "inactive", nil)
	require.NoError(t, admin.DeleteAllOf(ctx, &ipamv1.IPAddressClaim{}, client.InNamespace(poolNS)))
	prom.waitState(t, ctx, nearlyFull, "inactive", nil)
	prom.waitState(t, ctx, waiting, "inactive", nil)

	t.Log("a pool whose prefix NetBox does not have")
	typo := &v1alpha1.NetboxIPPool{
		ObjectMeta: metav1.ObjectMeta{Namespace: poolNS, Name: "typo"},
		Spec: v1alpha1.NetboxIPPoolSpec{
			Connection: v1alpha1.NetboxConnection{URL: sim.URL(), CredentialsSecretRef: v1alpha1.SecretReference{Name: "netbox"}},
			Sources:    []v1alpha1.NetboxAddressSource{{Prefix: &v1alpha1.NetboxPrefixSource{CIDR: "198.51.100.0/24"}}},
		},
	}
	require.NoError(t, admin.Create(ctx, typo))
	fire(notReady, map[string]string{"pool": "typo", "pool_namespace": poolNS, "reason": v1alpha1.SourceNotFoundReason})
	require.NoError(t, admin.Delete(ctx, typo))
	prom.waitState(t, ctx, notReady, "inactive", nil)

	// A second NetBox, to which the IPAM team moves the pool: the claims
	// bound before keep their records in the first.
	moved := netboxsim.New()
	t.Cleanup(moved.Close)
	moved.AddToken(token, true)
	moved.AddPrefixWithGateway(prefix, netboxsim.PrefixOptions{})

	t.Log("a bound claim's pool is pointed at another NetBox, then the claim is deleted")
	addClaims(1)
	leaver := fmt.Sprintf("machine-%d", claims-1)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		claim := &ipamv1.IPAddressClaim{}
		require.NoError(c, admin.Get(ctx, client.ObjectKey{Namespace: poolNS, Name: leaver}, claim))
		assert.NotEmpty(c, claim.Status.AddressRef.Name)
	}, time.Minute, 200*time.Millisecond, "the claim is not bound")
	require.NoError(t, admin.Get(ctx, client.ObjectKeyFromObject(pool), pool))
	before := pool.DeepCopy()
	pool.Spec.Connection.URL = moved.URL()
	require.NoError(t, admin.Patch(ctx, pool, client.MergeFrom(before)))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.NoError(c, admin.Get(ctx, client.ObjectKeyFromObject(pool), pool))
		assert.Equal(c, pool.Generation, pool.Status.ObservedGeneration)
		assert.True(c, conditions.IsTrue(pool, v1alpha1.ReadyCondition))
	}, time.Minute, 200*time.Millisecond, "the pool is not ready on the second NetBox")
	require.NoError(t, admin.Delete(ctx, &ipamv1.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Namespace: poolNS, Name: leaver}}))
	fire(leftBehind, map[string]string{"pool_kind": "NetboxIPPool"})

	t.Log("a record of this management cluster whose claim does not exist")
	ghost := moved.AddIPAddress("192.0.2.5/29", netboxsim.IPOptions{
		CustomFields: map[string]any{netbox.DefaultMarkerField: backends.Marker(identity, poolNS, "ghost")}})
	audit()
	fire(orphans, poolLabels)
	moved.DeleteIPAddress(ghost)
	audit()
	prom.waitState(t, ctx, orphans, "inactive", nil)

	t.Log("NetBox throttles the manager while audits keep it busy")
	moved.SetThrottle(httpfault.ThrottleLimit{RequestsPerSecond: 1})
	busy, stopBusy := context.WithCancel(ctx)
	go func() {
		// Failures here are conflicts with the manager's own writes: the
		// next round asks again.
		for busy.Err() == nil {
			_ = requestAudit(busy)
			time.Sleep(200 * time.Millisecond)
		}
	}()
	fire(throttling, map[string]string{"ipam_endpoint": backendhttp.EndpointOf(moved.URL())})
	stopBusy()
	moved.SetThrottle(httpfault.ThrottleLimit{})

	t.Log("the manager stops")
	mgr.Stop()
	fire(managerDown, nil)
	require.NoError(t, mgr.Start())
	prom.waitState(t, ctx, managerDown, "inactive", nil)

	t.Log("every panel of the shipped Grafana dashboard has data for what the test did")
	for _, panel := range dashboardQueries(t) {
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			assert.True(c, prom.hasData(c, ctx, panel.expr, started), "panel %q: no data for %s", panel.title, panel.expr)
		}, 30*time.Second, time.Second)
	}

	for name, st := range prom.alertStates(t, ctx) {
		assert.True(t, fired[name], "%s is shipped but no event in this test fired it", name)
		if why, ok := lasting[name]; ok {
			t.Logf("%s: %s; its window is %s, longer than a test", name, st.State, why)
			continue
		}
		assert.Equal(t, "inactive", st.State, "%s after every condition ended: %+v", name, st.Alerts)
	}
	assert.True(t, mgr.Running(), "the manager exited")
	assertJSONLog(t, mgr.LogPath)
}

// assertJSONLog checks that every line the manager wrote is a JSON object
// with a message, and that its reconcilers' lines carry their objects as
// fields of their own.
func assertJSONLog(t *testing.T, path string) {
	t.Helper()
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	lines, reconciled := 0, false
	var notJSON []string
	for _, line := range strings.Split(string(raw), "\n") {
		// The harness's own notes, and blank lines.
		if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "===== ") {
			continue
		}
		lines++
		var entry map[string]any
		if err := json.Unmarshal([]byte(line), &entry); err != nil {
			notJSON = append(notJSON, line)
			continue
		}
		assert.NotEmpty(t, entry["msg"], "line %q has no msg", line)
		if entry["NetboxIPPool"] != nil && entry["controller"] != nil {
			reconciled = true
		}
	}
	assert.Positive(t, lines, "the manager logged nothing")
	assert.Empty(t, notJSON[:min(len(notJSON), 5)], "%d of %d log lines are not JSON", len(notJSON), lines)
	assert.True(t, reconciled, "no line of a reconciler names its pool in a field of its own")
}

// shippedRules returns the rule groups of config/prometheus/rules.yaml as a
// Prometheus rule file, every alert's `for:` replaced by shortFor.
func shippedRules(t *testing.T) []byte {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(envtestenv.RepoRoot(), "config", "prometheus", "rules.yaml"))
	require.NoError(t, err)
	var rule struct {
		Kind string `json:"kind"`
		Spec struct {
			Groups []map[string]any `json:"groups"`
		} `json:"spec"`
	}
	require.NoError(t, yaml.Unmarshal(raw, &rule))
	require.Equal(t, "PrometheusRule", rule.Kind)
	alerts := 0
	for _, g := range rule.Spec.Groups {
		for _, r := range g["rules"].([]any) {
			r := r.(map[string]any)
			if _, ok := r["alert"]; !ok {
				continue
			}
			alerts++
			if _, ok := r["for"]; ok {
				r["for"] = shortFor
			}
			if r["alert"] == "IPAMBridgeClaimsWaiting" {
				// Its threshold is the age of the oldest waiting claim, ten
				// minutes, which a test does not wait: five seconds here.
				expr := r["expr"].(string)
				require.Contains(t, expr, "> 600", "IPAMBridgeClaimsWaiting's threshold moved: update the test")
				r["expr"] = strings.Replace(expr, "> 600", "> 5", 1)
			}
		}
	}
	require.NotZero(t, alerts, "the shipped PrometheusRule has no alerts")
	out, err := yaml.Marshal(map[string]any{"groups": rule.Spec.Groups})
	require.NoError(t, err)
	return out
}

type prometheusServer struct {
	url     string
	logPath string
}

// startPrometheus runs the prometheus server: it scrapes the manager's
// diagnostics endpoint over HTTPS with token, as the ServiceMonitor of
// config/prometheus does, and evaluates the shipped rules, every second.
func startPrometheus(t *testing.T, bin, target, token string) *prometheusServer {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "rules.yaml"), shippedRules(t), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "token"), []byte(token), 0o600))
	config := fmt.Sprintf(`global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
rule_files:
- %s
scrape_configs:
- job_name: %s
  scheme: https
  metrics_path: /metrics
  authorization:
    type: Bearer
    credentials_file: %s
  tls_config:
    # The manager's serving certificate is self-signed, as in the ServiceMonitor.
    insecure_skip_verify: true
  static_configs:
  - targets: [%q]
    # What the ServiceMonitor's target carries: the manager's namespace,
    # which would override a label of the manager's own of that name.
    labels:
      namespace: capi-ipam-bridge-system
`, filepath.Join(dir, "rules.yaml"), job, filepath.Join(dir, "token"), target)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(config), 0o600))
	addr, err := managerproc.FreeAddr()
	require.NoError(t, err)
	logPath := filepath.Join(dir, "prometheus.log")
	logFile, err := os.Create(logPath)
	require.NoError(t, err)
	cmd := exec.Command(bin, "--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+addr)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
		_ = logFile.Close()
	})
	p := &prometheusServer{url: "http://" + addr, logPath: logPath}
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		resp, err := http.Get(p.url + "/-/ready")
		require.NoError(c, err)
		_ = resp.Body.Close()
		assert.Equal(c, http.StatusOK, resp.StatusCode)
	}, time.Minute, 200*time.Millisecond, "prometheus did not start:\n%s", p.tail(20))
	return p
}

func (p *prometheusServer) tail(n int) string {
	data, err := os.ReadFile(p.logPath)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// api GETs a path of Prometheus's HTTP API and decodes its data into out.
func (p *prometheusServer) api(ctx context.Context, path string, params url.Values, out any) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.url+path+"?"+params.Encode(), nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var body struct {
		Status string          `json:"status"`
		Error  string          `json:"error"`
		Data   json.RawMessage `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return fmt.Errorf("decoding %s: %w", path, err)
	}
	if body.Status != "success" {
		return fmt.Errorf("%s: %s", path, body.Error)
	}
	return json.Unmarshal(body.Data, out)
}

// query returns the value of an instant query's one series, and whether
// there is one.
func (p *prometheusServer) query(c *assert.CollectT, ctx context.Context, expr string) (float64, bool) {
	var data struct {
		Result []struct {
			Value [2]any `json:"value"`
		} `json:"result"`
	}
	require.NoError(c, p.api(ctx, "/api/v1/query", url.Values{"query": {expr}}, &data))
	if len(data.Result) != 1 {
		return 0, false
	}
	var v float64
	_, err := fmt.Sscan(data.Result[0].Value[1].(string), &v)
	require.NoError(c, err)
	return v, true
}

// hasData says whether a range query of expr, from since to now, returns
// any sample.
func (p *prometheusServer) hasData(c *assert.CollectT, ctx context.Context, expr string, since time.Time) bool {
	var data struct {
		Result []struct {
			Values [][2]any `json:"values"`
		} `json:"result"`
	}
	now := time.Now()
	require.NoError(c, p.api(ctx, "/api/v1/query_range", url.Values{"query": {expr},
		"start": {fmt.Sprint(since.Unix())}, "end": {fmt.Sprint(now.Unix())}, "step": {"2"}}, &data))
	for _, r := range data.Result {
		if len(r.Values) > 0 {
			return true
		}
	}
	return false
}

type panelQuery struct{ title, expr string }

// dashboardQueries are the queries of every panel of the shipped Grafana
// dashboard, with its variables set as "All" sets them and
// $__rate_interval as Grafana sets it for a one-second scrape.
func dashboardQueries(t *testing.T) []panelQuery {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(envtestenv.RepoRoot(), "config", "prometheus", "grafana-dashboard.json"))
	require.NoError(t, err)
	var dashboard struct {
		Panels []struct {
			Type    string `json:"type"`
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	require.NoError(t, json.Unmarshal(raw, &dashboard))
	vars := strings.NewReplacer("$pool_namespace", ".*", "$pool", ".*", "$__rate_interval", "1m")
	var out []panelQuery
	for _, panel := range dashboard.Panels {
		if panel.Type == "row" {
			continue
		}
		require.NotEmpty(t, panel.Targets, "panel %q has no query", panel.Title)
		for _, target := range panel.Targets {
			expr := vars.Replace(target.Expr)
			require.NotContains(t, expr, "$", "panel %q uses a variable the test does not set: %s", panel.Title, target.Expr)
			out = append(out, panelQuery{title: panel.Title, expr: expr})
		}
	}
	require.NotEmpty(t, out)
	return out
}

type alertRule struct {
	State  string `json:"state"`
	Alerts []struct {
		Labels map[string]string `json:"labels"`
		State  string            `json:"state"`
	} `json:"alerts"`
}

// alertStates returns the state of every alerting rule Prometheus loaded,
// by alert name: inactive, pending or firing.
func (p *prometheusServer) alertStates(t require.TestingT, ctx context.Context) map[string]alertRule {
	var data struct {
		Groups []struct {
			Rules []struct {
				alertRule
				Name string `json:"name"`
				Type string `json:"type"`
			} `json:"rules"`
		} `json:"groups"`
	}
	require.NoError(t, p.api(ctx, "/api/v1/rules", url.Values{"type": {"alert"}}, &data))
	out := map[string]alertRule{}
	for _, g := range data.Groups {
		for _, r := range g.Rules {
			out[r.Name] = r.alertRule
		}
	}
	return out
}

// waitState waits for alert to be in state; when firing, one of its alerts
// must carry labels.
func (p *prometheusServer) waitState(t *testing.T, ctx context.Context, alert, state string, labels map[string]string) {
	t.Helper()
	var last alertRule
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		rules := p.alertStates(c, ctx)
		r, ok := rules[alert]
		require.True(c, ok, "prometheus has not loaded %s", alert)
		last = r
		require.Equal(c, state, r.State)
		if state != "firing" {
			return
		}
		found := false
	alerts:
		for _, a := range r.Alerts {
			for k, v := range labels {
				if a.Labels[k] != v {
					continue alerts
				}
			}
			found = found || a.State == "firing"
		}
		assert.True(c, found, "no firing %s alert has labels %v: %+v", alert, labels, r.Alerts)
	}, 2*time.Minute, 500*time.Millisecond, "%s did not become %s", alert, state)
	t.Logf("%s: %s %+v", alert, last.State, last.Alerts)
}
