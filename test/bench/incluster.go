package main

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/envtestenv"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/managerproc"
)

// The in-cluster IPAM provider (sigs.k8s.io/cluster-api-ipam-provider-in-cluster)
// is the bench's yardstick: our provider, at the pool's default settings,
// must bind the same burst on the same envtest in no more time, at 10
// claim workers and at 1 (issue 24), with no more API-server requests per
// claim (issue 15). It allocates from its pool in the API server alone, so
// it has no IPAM latency to pay; its claim controller runs one worker,
// which it does not let us change.

// inClusterBackend is the in-cluster provider's result's backend.
const inClusterBackend = "in-cluster"

// inClusterCIDR is apart from benchCIDR, so that no address of one pool
// could be mistaken for the other's.
const inClusterCIDR = "10.171.0.0/16"

// inClusterProvider is the installed in-cluster provider.
type inClusterProvider struct {
	version string
	bin     string
	// crds is the directory of its CRDs in the module cache.
	crds string
}

func (p inClusterProvider) title() string { return "in-cluster provider " + p.version }

// installInCluster installs the in-cluster provider (once; it is cached)
// with hack/incluster-provider.sh, which pins its version.
func installInCluster() (inClusterProvider, error) {
	var p inClusterProvider
	for _, field := range []struct {
		arg string
		out *string
	}{{"--version", &p.version}, {"", &p.bin}, {"--crds", &p.crds}} {
		out, err := runInClusterScript(field.arg)
		if err != nil {
			return p, err
		}
		*field.out = out
	}
	return p, nil
}

func runInClusterScript(arg string) (string, error) {
	cmd := exec.Command(filepath.Join(envtestenv.RepoRoot(), "hack", "incluster-provider.sh"))
	if arg != "" {
		cmd.Args = append(cmd.Args, arg)
	}
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("hack/incluster-provider.sh %s: %w", arg, err)
	}
	return strings.TrimSpace(string(out)), nil
}

// runInCluster binds the bench's burst with the in-cluster provider's
// manager, as a process of its own in its own namespace, and releases it.
// The result's request counts are the manager's API-server requests (its
// own metrics): there is no IPAM system to count.
func (b *bench) runInCluster(ctx context.Context, p inClusterProvider, claims int) (*result, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute+time.Duration(claims)*50*time.Millisecond)
	defer cancel()
	ns := fmt.Sprintf("bench-incluster-%d", claims)
	res := &result{config: config{backend: inClusterBackend, claims: claims, workers: 1, release: true}, title: p.title()}

	metricsAddr, err := managerproc.FreeAddr()
	if err != nil {
		return nil, err
	}
	mgr := &managerproc.Process{Bin: p.bin, Kubeconfig: b.kubeconfig, LogPath: filepath.Join(b.workDir, ns+".log"),
		Args: inClusterArgs(ns, metricsAddr)}
	if err := mgr.Start(); err != nil {
		return nil, err
	}
	defer mgr.Stop()
	if _, err := waitForMetrics(ctx, metricsAddr); err != nil {
		return nil, fmt.Errorf("in-cluster manager not up (log %s): %w", mgr.LogPath, err)
	}
	if err := b.createInClusterPool(ctx, ns); err != nil {
		return nil, fmt.Errorf("in-cluster pool (log %s): %w", mgr.LogPath, err)
	}

	m0, err := scrape(ctx, metricsAddr)
	if err != nil {
		return nil, err
	}
	poolRef := ipamv1.IPPoolReference{APIGroup: ipamv1.GroupVersion.Group, Kind: "InClusterIPPool", Name: "pool"}
	timing, err := b.burst(ctx, ns, claims, map[string]string{clusterv1.WatchLabel: ns}, poolRef)
	if err != nil {
		return nil, fmt.Errorf("in-cluster provider: %w (log %s)", err, mgr.LogPath)
	}
	res.wall, res.p50, res.p95 = timing.wall, timing.p50, timing.p95
	m1, err := waitForQuiet(ctx, metricsAddr)
	if err != nil {
		return nil, err
	}
	res.apiPerClaim = perClaim(m0, m1, claims)

	deleted := time.Now()
	if err := b.deleteClaims(ctx, ns); err != nil {
		return nil, fmt.Errorf("in-cluster provider: releasing (log %s): %w", mgr.LogPath, err)
	}
	res.releaseWall = time.Since(deleted)
	m2, err := waitForQuiet(ctx, metricsAddr)
	if err != nil {
		return nil, err
	}
	res.apiPerRelease = perClaim(m1, m2, claims)
	return res, nil
}

// inClusterArgs are the in-cluster manager's flags: plain-HTTP metrics,
// no probes, no webhooks (the bench creates only valid pools; they would
// need serving certificates), and only the bench's namespace and label.
func inClusterArgs(ns, metricsAddr string) []string {
	return []string{
		"--namespace=" + ns,
		"--watch-filter=" + ns,
		"--diagnostics-address=" + metricsAddr,
		"--insecure-diagnostics",
		"--health-probe-bind-address=0",
		"--webhook-port=0",
		"--leader-elect=false",
	}
}

// createInClusterPool creates the namespace and an InClusterIPPool over
// inClusterCIDR, and waits until the manager has counted its addresses:
// then its caches are synced and it reconciles what the bench creates.
// The pool is unstructured because the provider's Go types are not in our
// go.mod.
func (b *bench) createInClusterPool(ctx context.Context, ns string) error {
	prefix := netip.MustParsePrefix(inClusterCIDR)
	pool := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "ipam.cluster.x-k8s.io/v1alpha2",
		"kind":       "InClusterIPPool",
		"metadata":   map[string]any{"namespace": ns, "name": "pool"},
		"spec": map[string]any{
			"addresses": []any{inClusterCIDR},
			"prefix":    int64(prefix.Bits()),
			"gateway":   prefix.Addr().Next().String(),
		},
	}}
	if err := b.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		return fmt.Errorf("creating namespace %s: %w", ns, err)
	}
	if err := b.c.Create(ctx, pool); err != nil {
		return fmt.Errorf("creating the pool: %w", err)
	}
	readyCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	return poll(readyCtx, 100*time.Millisecond, func() (bool, error) {
		if err := b.c.Get(ctx, client.ObjectKeyFromObject(pool), pool); err != nil {
			return false, nil
		}
		total, found, _ := unstructured.NestedInt64(pool.Object, "status", "ipAddresses", "total")
		return found && total > 0, nil
	})
}
