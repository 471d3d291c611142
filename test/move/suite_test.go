// Package move moves a workload Cluster, with its pools, bound claims and
// IPAddresses, between two management clusters with clusterctl's own
// library, and back again. Each management cluster is a kube-apiserver and
// etcd (envtest) on which clusterctl's Init installs Cluster API's core CRDs
// (from a local repository built from the cluster-api module) and this
// provider's release; the manager binary runs beside each as the released
// ServiceAccount, with the released Deployment's arguments and therefore
// its own default identity, the cluster's kube-system UID. Both managers
// reach the IPAM system through one counting proxy that tells their
// requests apart by the credentials of each cluster's Secrets.
package move

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/yaml"

	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"
	clusterctl "sigs.k8s.io/cluster-api/cmd/clusterctl/client"
	clusterctllog "sigs.k8s.io/cluster-api/cmd/clusterctl/log"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/hack/release/components"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/pkg/scheme"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/envtestenv"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/managerproc"
)

const (
	releaseVersion = "v0.1.0"
	// managerNamespace is where clusterctl installs the provider, and where
	// Global pools read their Secrets.
	managerNamespace = components.TargetNamespace
	serviceAccount   = "capi-ipam-bridge-manager"
	waitTimeout      = 60 * time.Second
	pollInterval     = 100 * time.Millisecond
)

// coreCRDs are the Cluster API CRDs of the core provider's components:
// those a move of Clusters, Machines, claims and IPAddresses involves.
var coreCRDs = []string{
	"cluster.x-k8s.io_clusters.yaml",
	"cluster.x-k8s.io_machines.yaml",
	"ipam.cluster.x-k8s.io_ipaddressclaims.yaml",
	"ipam.cluster.x-k8s.io_ipaddresses.yaml",
}

// mgmt is one management cluster.
type mgmt struct {
	name string
	env  *envtest.Environment
	k8s  client.Client
	// kubeconfig is the admin's, for clusterctl.
	kubeconfig string
	// identity is the manager's marker identity: the kube-system UID.
	identity string
	mgr      *managerproc.Process
}

var (
	// clusterA and clusterB are the two management clusters; the Cluster
	// moves from A to B and back.
	clusterA, clusterB *mgmt
	testScheme         *runtime.Scheme
	clusterctlClient   clusterctl.Client
	clusterctlLogs     = &envtestenv.LogBuffer{}
	workDir            string
)

func TestMain(m *testing.M) {
	os.Exit(runSuite(m))
}

func runSuite(m *testing.M) int {
	started := time.Now()
	ctrllog.SetLogger(funcr.New(func(string, string) {}, funcr.Options{}))
	clusterctllog.SetLogger(funcr.New(func(prefix, args string) {
		clusterctlLogs.WriteString(prefix + " " + args + "\n")
	}, funcr.Options{Verbosity: 5}))
	var err error
	if workDir, err = os.MkdirTemp("", "ipam-bridge-move-"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(workDir)
	testScheme = scheme.New()
	if err := apiextensionsv1.AddToScheme(testScheme); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}

	var (
		wg       sync.WaitGroup
		bin      string
		errs     [3]error
		clusters = [2]*mgmt{{name: "A"}, {name: "B"}}
	)
	wg.Go(func() { bin, errs[2] = managerproc.Build(workDir) })
	for i, c := range clusters {
		wg.Go(func() { errs[i] = c.startAPIServer() })
	}
	wg.Wait()
	clusterA, clusterB = clusters[0], clusters[1]
	defer clusterA.stop()
	defer clusterB.stop()
	if err := errors.Join(errs[:]...); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if clusterctlClient, err = newClusterctl(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	for _, c := range []*mgmt{clusterA, clusterB} {
		if err := c.install(bin); err != nil {
			fmt.Fprintf(os.Stderr, "management cluster %s: %v\n", c.name, err)
			fmt.Fprintln(os.Stderr, clusterctlLogs.String())
			return 1
		}
	}
	fmt.Fprintf(os.Stderr, "two management clusters installed with clusterctl, managers started, in %s\n",
		time.Since(started).Round(time.Millisecond))
	code := m.Run()
	if code != 0 {
		for _, c := range []*mgmt{clusterA, clusterB} {
			fmt.Fprintf(os.Stderr, "===== manager of management cluster %s (identity %s):\n%s\n", c.name, c.identity, c.mgr.Tail(150))
		}
		if os.Getenv("SHOW_CLUSTERCTL_LOGS") != "" {
			fmt.Fprintln(os.Stderr, "===== clusterctl:\n"+clusterctlLogs.String())
		}
	}
	return code
}

// startAPIServer starts the cluster's API server with only cert-manager's
// Issuer and Certificate kinds (see testdata): clusterctl installs the rest.
func (c *mgmt) startAPIServer() error {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		return fmt.Errorf("KUBEBUILDER_ASSETS is not set: run through make test, or export KUBEBUILDER_ASSETS=$(hack/envtest-binaries.sh)")
	}
	c.env = &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join(envtestenv.RepoRoot(), "test", "move", "testdata", "cert-manager")},
		ErrorIfCRDPathMissing: true,
	}
	cfg, err := c.env.Start()
	if err != nil {
		return fmt.Errorf("starting the API server of management cluster %s: %w", c.name, err)
	}
	cfg.QPS, cfg.Burst = 200, 400
	if c.k8s, err = client.New(cfg, client.Options{Scheme: testScheme}); err != nil {
		return err
	}
	c.kubeconfig = filepath.Join(workDir, "kubeconfig-"+c.name)
	if err := envtestenv.WriteKubeconfig(cfg, c.kubeconfig); err != nil {
		return err
	}
	ns := &corev1.Namespace{}
	if err := c.k8s.Get(context.Background(), client.ObjectKey{Name: "kube-system"}, ns); err != nil {
		return err
	}
	c.identity = string(ns.UID)
	return nil
}

func (c *mgmt) stop() {
	if c == nil {
		return
	}
	if c.mgr != nil {
		c.mgr.Stop()
	}
	if c.env != nil {
		_ = c.env.Stop()
	}
}

// newClusterctl writes a clusterctl.yaml whose providers are local
// repositories: Cluster API's core provider, built from the cluster-api
// module's CRDs and metadata, and this provider's release, built as `make
// release-repository` builds it.
func newClusterctl() (clusterctl.Client, error) {
	root := envtestenv.RepoRoot()
	capiDir, err := envtestenv.ModuleDir(root, "sigs.k8s.io/cluster-api")
	if err != nil {
		return nil, err
	}
	capiVersion := "v" + strings.TrimPrefix(filepath.Base(capiDir), "cluster-api@v")
	repo := filepath.Join(workDir, "repository")

	coreDir := filepath.Join(repo, "cluster-api", capiVersion)
	if err := os.MkdirAll(coreDir, 0o755); err != nil {
		return nil, err
	}
	core := bytes.NewBufferString("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: capi-system\n")
	for _, crd := range coreCRDs {
		raw, err := os.ReadFile(filepath.Join(capiDir, "core", "config", "crd", "bases", crd))
		if err != nil {
			return nil, err
		}
		core.WriteString("---\n")
		core.Write(raw)
	}
	if err := os.WriteFile(filepath.Join(coreDir, "core-components.yaml"), core.Bytes(), 0o644); err != nil {
		return nil, err
	}
	metadata, err := os.ReadFile(filepath.Join(capiDir, "metadata.yaml"))
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(coreDir, "metadata.yaml"), metadata, 0o644); err != nil {
		return nil, err
	}
	bridgeDir := filepath.Join(repo, components.ProviderLabel, releaseVersion)
	if err := components.Write(root, releaseVersion, bridgeDir); err != nil {
		return nil, err
	}

	// clusterctl reads nothing but this file and the environment.
	configHome := filepath.Join(workDir, "config")
	if err := os.Setenv("XDG_CONFIG_HOME", configHome); err != nil {
		return nil, err
	}
	for _, kv := range os.Environ() {
		if name, _, _ := strings.Cut(kv, "="); strings.HasPrefix(name, "IPAM_BRIDGE_") {
			_ = os.Unsetenv(name)
		}
	}
	config := map[string]any{"providers": []map[string]string{
		{"name": "cluster-api", "type": string(clusterctlv1.CoreProviderType),
			"url": "file://" + filepath.Join(coreDir, "core-components.yaml")},
		{"name": components.ProviderName, "type": string(clusterctlv1.IPAMProviderType),
			"url": "file://" + filepath.Join(bridgeDir, components.ComponentsFile)},
	}}
	raw, err := yaml.Marshal(config)
	if err != nil {
		return nil, err
	}
	path := filepath.Join(workDir, "clusterctl.yaml")
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		return nil, err
	}
	return clusterctl.New(context.Background(), path)
}

// install runs `clusterctl init --core cluster-api --bootstrap -
// --control-plane - --ipam bridge` on the cluster, then starts the manager
// as the installed Deployment's pod would run it.
func (c *mgmt) install(bin string) error {
	ctx := context.Background()
	capiDir, err := envtestenv.ModuleDir(envtestenv.RepoRoot(), "sigs.k8s.io/cluster-api")
	if err != nil {
		return err
	}
	capiVersion := "v" + strings.TrimPrefix(filepath.Base(capiDir), "cluster-api@v")
	if _, err := clusterctlClient.Init(ctx, clusterctl.InitOptions{
		Kubeconfig:            clusterctl.Kubeconfig{Path: c.kubeconfig},
		CoreProvider:          "cluster-api:" + capiVersion,
		BootstrapProviders:    []string{clusterctl.NoopProvider},
		ControlPlaneProviders: []string{clusterctl.NoopProvider},
		IPAMProviders:         []string{components.ProviderName + ":" + releaseVersion},
	}); err != nil {
		return fmt.Errorf("clusterctl init: %w", err)
	}
	if err := c.waitCRDsEstablished(ctx); err != nil {
		return err
	}

	d := &appsv1.Deployment{}
	if err := c.k8s.Get(ctx, client.ObjectKey{Namespace: managerNamespace, Name: "capi-ipam-bridge-controller-manager"}, d); err != nil {
		return fmt.Errorf("the Deployment clusterctl installed: %w", err)
	}
	var container *corev1.Container
	for i := range d.Spec.Template.Spec.Containers {
		if d.Spec.Template.Spec.Containers[i].Name == "manager" {
			container = &d.Spec.Template.Spec.Containers[i]
		}
	}
	if container == nil {
		return fmt.Errorf("the Deployment has no manager container")
	}
	args, err := managerproc.ContainerArgs(*container)
	if err != nil {
		return err
	}
	// Two managers share this host: only their ports differ from the pod's.
	health, err := managerproc.FreeAddr()
	if err != nil {
		return err
	}
	diagnostics, err := managerproc.FreeAddr()
	if err != nil {
		return err
	}
	args = append(args, "--health-addr="+health, "--diagnostics-address="+diagnostics)
	// The pod's POD_NAMESPACE (from metadata.namespace); the same for both.
	if err := os.Setenv("POD_NAMESPACE", d.Namespace); err != nil {
		return err
	}

	user, err := c.env.AddUser(envtest.User{
		Name:   "system:serviceaccount:" + managerNamespace + ":" + d.Spec.Template.Spec.ServiceAccountName,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + managerNamespace, "system:authenticated"},
	}, nil)
	if err != nil {
		return err
	}
	kubeconfig := filepath.Join(workDir, "manager-kubeconfig-"+c.name)
	if err := managerproc.WriteKubeconfig(user.Config(), kubeconfig); err != nil {
		return err
	}
	c.mgr = &managerproc.Process{Bin: bin, Args: args, Kubeconfig: kubeconfig, LogPath: filepath.Join(workDir, "manager-"+c.name+".log")}
	if err := c.mgr.Start(); err != nil {
		return err
	}
	deadline := time.Now().Add(waitTimeout)
	for {
		code, _, err := managerproc.Get(ctx, http.DefaultClient, "http://"+health+"/readyz", "")
		if err == nil && code == 200 {
			return nil
		}
		if !c.mgr.Running() || time.Now().After(deadline) {
			return fmt.Errorf("the manager did not become ready (%v, %d):\n%s", err, code, c.mgr.Tail(40))
		}
		time.Sleep(pollInterval)
	}
}

// waitCRDsEstablished waits until every CRD clusterctl installed serves.
func (c *mgmt) waitCRDsEstablished(ctx context.Context) error {
	deadline := time.Now().Add(waitTimeout)
	for {
		crds := &apiextensionsv1.CustomResourceDefinitionList{}
		if err := c.k8s.List(ctx, crds, client.HasLabels{clusterctlv1.ClusterctlLabel}); err != nil {
			return err
		}
		pending := []string{}
		for _, crd := range crds.Items {
			established := false
			for _, cond := range crd.Status.Conditions {
				if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
					established = true
				}
			}
			if !established {
				pending = append(pending, crd.Name)
			}
		}
		if len(pending) == 0 && len(crds.Items) > len(coreCRDs) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("CRDs not established: %v", pending)
		}
		time.Sleep(pollInterval)
	}
}
