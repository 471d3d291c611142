// Package capve2e runs CAPV's own VSphereMachine, VSphereVM and
// VSphereCluster controllers (sigs.k8s.io/cluster-api-provider-vsphere
// v1.16.1), and Cluster API's own ClusterClass and topology reconcilers,
// against an in-process vCenter (govmomi's vcsim) beside the provider's
// manager binary, on a real kube-apiserver and etcd (envtest). CAPV creates the IPAddressClaims, the
// manager fulfils them in NetBox (the simulator, or a real NetBox when
// NETBOX_URL is set) and in the Infoblox WAPI simulator, and CAPV clones the
// VM and writes the addresses into its guest metadata.
//
// CAPV v1.16.1 is built for Cluster API v1.13 and controller-runtime v0.23,
// the provider for v1.14 and v0.24: this module is pinned to CAPV's versions
// and imports nothing of the provider's module. The manager and the IPAM
// systems run as processes built from the provider's module; they meet CAPV
// only through the API server (ipam.cluster.x-k8s.io/v1beta2 claims and
// addresses) and HTTP.
package capve2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/go-logr/logr/funcr"
	"github.com/vmware/govmomi"
	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/simulator"
	_ "github.com/vmware/govmomi/vapi/simulator" // the REST (tags) endpoints CAPV's session logs in to
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	runtimev1 "sigs.k8s.io/cluster-api/api/runtime/v1beta2"
	capicontrollers "sigs.k8s.io/cluster-api/controllers"
	"sigs.k8s.io/cluster-api/controllers/clustercache"

	infrav1 "sigs.k8s.io/cluster-api-provider-vsphere/api/govmomi/v1beta2"
	capv "sigs.k8s.io/cluster-api-provider-vsphere/controllers"
	capvcontext "sigs.k8s.io/cluster-api-provider-vsphere/pkg/context"
)

const (
	managerNamespace = "ipam-bridge-system"
	// identity is the manager's marker identity: markers read
	// capve2e/<namespace>/<claim>.
	identity = "capve2e"
	// templateName is the vcsim VM turned into the template CAPV clones.
	templateName = "ubuntu-2404-kube-v1.35"
)

// capiCRDs are the Cluster API CRDs CAPV and the provider read, relative to
// the cluster-api module at the version this module uses.
var capiCRDs = []string{
	"config/crd/bases/cluster.x-k8s.io_clusters.yaml",
	"config/crd/bases/cluster.x-k8s.io_machines.yaml",
	// The topology reconciler's: it reads the ClusterClass, watches the
	// MachineDeployments and MachinePools, lists MachineSets, and creates
	// the KubeadmControlPlane from its template.
	"config/crd/bases/cluster.x-k8s.io_clusterclasses.yaml",
	"config/crd/bases/cluster.x-k8s.io_machinedeployments.yaml",
	"config/crd/bases/cluster.x-k8s.io_machinepools.yaml",
	"config/crd/bases/cluster.x-k8s.io_machinesets.yaml",
	"config/crd/bases/cluster.x-k8s.io_machinehealthchecks.yaml",
	"config/crd/bases/runtime.cluster.x-k8s.io_extensionconfigs.yaml",
	"controlplane/kubeadm/config/crd/bases/controlplane.cluster.x-k8s.io_kubeadmcontrolplanes.yaml",
	"controlplane/kubeadm/config/crd/bases/controlplane.cluster.x-k8s.io_kubeadmcontrolplanetemplates.yaml",
	"config/crd/bases/ipam.cluster.x-k8s.io_ipaddressclaims.yaml",
	"config/crd/bases/ipam.cluster.x-k8s.io_ipaddresses.yaml",
}

var (
	k8s     client.Client
	sims    *ipamSims
	manager *process
	vc      *vcenter
	capvLog = &logBuffer{}
)

// vcenter is the vcsim instance CAPV talks to.
type vcenter struct {
	url    *url.URL // with the user and password
	client *govmomi.Client
}

func TestMain(m *testing.M) {
	os.Exit(runSuite(m))
}

func runSuite(m *testing.M) int {
	if err := run(m); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

func run(m *testing.M) error {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		return fmt.Errorf("KUBEBUILDER_ASSETS is not set: export KUBEBUILDER_ASSETS=$(../../hack/envtest-binaries.sh)")
	}
	workDir, err := os.MkdirTemp("", "capve2e-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(workDir)

	// The manager and the IPAM systems, built from the provider's module.
	managerBin, simsBin := filepath.Join(workDir, "manager"), filepath.Join(workDir, "ipamsim")
	if err := goBuild(managerBin, "./cmd"); err != nil {
		return err
	}
	if err := goBuild(simsBin, "./test/capve2e/ipamsim/main.go"); err != nil {
		return err
	}

	// The API server, with Cluster API's CRDs at this module's version,
	// CAPV's and ours.
	capiDir, err := moduleDir("sigs.k8s.io/cluster-api")
	if err != nil {
		return err
	}
	capvDir, err := moduleDir("sigs.k8s.io/cluster-api-provider-vsphere")
	if err != nil {
		return err
	}
	crds := []string{filepath.Join(repoRoot(), "config", "crd", "bases"), filepath.Join(capvDir, "config", "default", "crd", "bases")}
	for _, crd := range capiCRDs {
		crds = append(crds, filepath.Join(capiDir, crd))
	}
	env := &envtest.Environment{CRDDirectoryPaths: crds, ErrorIfCRDPathMissing: true}
	cfg, err := env.Start()
	if err != nil {
		return fmt.Errorf("starting envtest: %w", err)
	}
	defer func() { _ = env.Stop() }()
	cfg.QPS, cfg.Burst = 500, 1000
	if err := labelContracts(context.Background(), cfg, env.CRDs); err != nil {
		return err
	}

	s := newScheme()
	if k8s, err = client.New(cfg, client.Options{Scheme: s}); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: managerNamespace}}); err != nil {
		return err
	}

	if sims, err = startIPAMSims(simsBin, filepath.Join(workDir, "ipamsim.log")); err != nil {
		return err
	}
	defer sims.close()

	// The provider's manager, as released: its own process and kubeconfig.
	kubeconfig := filepath.Join(workDir, "kubeconfig")
	if err := writeKubeconfig(cfg, kubeconfig); err != nil {
		return err
	}
	cmd := exec.Command(managerBin,
		"--manager-namespace="+managerNamespace,
		"--marker-identity="+identity,
		"--leader-elect=false",
		"--diagnostics-address=0",
		"--health-addr=0",
		"--graceful-shutdown-timeout=5s",
	)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	if manager, err = startProcess(cmd, filepath.Join(workDir, "manager.log")); err != nil {
		return err
	}
	defer manager.stop()

	if vc, err = startVCenter(ctx); err != nil {
		return err
	}

	ctrl.SetLogger(funcr.New(func(prefix, args string) { capvLog.WriteString(prefix + " " + args + "\n") },
		funcr.Options{Verbosity: 4}))
	done, err := startCAPV(ctx, cfg, s)
	if err != nil {
		return err
	}

	code := m.Run()
	cancel()
	<-done
	if code != 0 {
		return fmt.Errorf("tests failed")
	}
	return nil
}

func newScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(clusterv1.AddToScheme(s))
	utilruntime.Must(ipamv1.AddToScheme(s))
	utilruntime.Must(runtimev1.AddToScheme(s)) // the ClusterClass reconciler watches ExtensionConfigs
	utilruntime.Must(infrav1.AddToScheme(s))
	return s
}

// startVCenter starts vcsim's vCenter model (one datacenter, a cluster of
// three hosts, a standalone host, a DVS port group) over HTTPS with its REST
// endpoints, and turns one of its VMs into the template CAPV clones.
func startVCenter(ctx context.Context) (*vcenter, error) {
	model := simulator.VPX()
	if err := model.Create(); err != nil {
		return nil, fmt.Errorf("vcsim: %w", err)
	}
	model.Service.Listen = &url.URL{Host: "127.0.0.1:0"}
	model.Service.TLS = new(tls.Config)
	model.Service.RegisterEndpoints = true
	server := model.Service.NewServer()
	go func() {
		<-ctx.Done()
		server.Close()
		model.Remove()
	}()

	c, err := govmomi.NewClient(ctx, server.URL, true)
	if err != nil {
		return nil, fmt.Errorf("vcsim: %w", err)
	}
	finder := find.NewFinder(c.Client, true)
	vm, err := finder.VirtualMachine(ctx, "/DC0/vm/DC0_C0_RP0_VM0")
	if err != nil {
		return nil, fmt.Errorf("vcsim: %w", err)
	}
	for _, step := range []func() (interface{ Wait(context.Context) error }, error){
		func() (interface{ Wait(context.Context) error }, error) { return vm.PowerOff(ctx) },
		func() (interface{ Wait(context.Context) error }, error) { return vm.Rename(ctx, templateName) },
	} {
		task, err := step()
		if err == nil {
			err = task.Wait(ctx)
		}
		if err != nil {
			return nil, fmt.Errorf("vcsim: preparing the template: %w", err)
		}
	}
	if err := vm.MarkAsTemplate(ctx); err != nil {
		return nil, fmt.Errorf("vcsim: marking the template: %w", err)
	}
	return &vcenter{url: server.URL, client: c}, nil
}

// startCAPV runs CAPV's VSphereMachine and VSphereVM controllers as its
// main.go does for a non-supervisor management cluster, with the vCenter
// credentials given to the manager; the cluster cache serves workload
// clusters, which this test has none of.
func startCAPV(ctx context.Context, cfg *rest.Config, s *runtime.Scheme) (<-chan struct{}, error) {
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 s,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		return nil, fmt.Errorf("creating CAPV's manager: %w", err)
	}
	password, _ := vc.url.User.Password()
	controllerCtx := &capvcontext.ControllerManagerContext{
		Namespace: "capv-system",
		Name:      "capv-controller-manager",
		Client:    mgr.GetClient(),
		Logger:    ctrl.Log.WithName("capv"),
		Scheme:    s,
		Username:  vc.url.User.Username(),
		Password:  password,
	}
	clusterCache, err := clustercache.SetupWithManager(ctx, mgr, clustercache.Options{
		SecretClient: mgr.GetClient(),
		Client:       clustercache.ClientOptions{UserAgent: "capve2e"},
	}, controller.Options{MaxConcurrentReconciles: 1})
	if err != nil {
		return nil, fmt.Errorf("setting up CAPV's cluster cache: %w", err)
	}
	if err := capv.AddMachineControllerToManager(ctx, controllerCtx, mgr, false, controller.Options{MaxConcurrentReconciles: 2}); err != nil {
		return nil, fmt.Errorf("setting up CAPV's VSphereMachine controller: %w", err)
	}
	if err := capv.AddVMControllerToManager(ctx, controllerCtx, mgr, clusterCache, controller.Options{MaxConcurrentReconciles: 2}); err != nil {
		return nil, fmt.Errorf("setting up CAPV's VSphereVM controller: %w", err)
	}
	if err := capv.AddClusterControllerToManager(ctx, controllerCtx, mgr, false, controller.Options{MaxConcurrentReconciles: 1}); err != nil {
		return nil, fmt.Errorf("setting up CAPV's VSphereCluster controller: %w", err)
	}
	// Cluster API's own ClusterClass and topology reconcilers, as its
	// main.go runs them: a ClusterClass cluster's variables flow through
	// the class's patches into the VSphereCluster and KubeadmControlPlane
	// they generate.
	if err := (&capicontrollers.ClusterClassReconciler{Client: mgr.GetClient()}).
		SetupWithManager(ctx, mgr, controller.Options{MaxConcurrentReconciles: 1}); err != nil {
		return nil, fmt.Errorf("setting up Cluster API's ClusterClass controller: %w", err)
	}
	if err := (&capicontrollers.ClusterTopologyReconciler{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), ClusterCache: clusterCache,
	}).SetupWithManager(ctx, mgr, controller.Options{MaxConcurrentReconciles: 1}); err != nil {
		return nil, fmt.Errorf("setting up Cluster API's topology controller: %w", err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := mgr.Start(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "CAPV's manager:", err)
		}
	}()
	return done, nil
}

// labelContracts labels the CRDs of CAPV and of the kubeadm control plane
// with the Cluster API contract they implement, as their releases'
// kustomizations do: the topology reconciler reads the label.
func labelContracts(ctx context.Context, cfg *rest.Config, crds []*apiextensionsv1.CustomResourceDefinition) error {
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		return err
	}
	for _, crd := range crds {
		if crd.Spec.Group != infrav1.GroupVersion.Group && crd.Spec.Group != "controlplane.cluster.x-k8s.io" {
			continue
		}
		patch := []byte(`{"metadata":{"labels":{"cluster.x-k8s.io/v1beta2":"v1beta2"}}}`)
		obj := &metav1.PartialObjectMetadata{}
		obj.SetGroupVersionKind(apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"))
		obj.SetName(crd.Name)
		if err := c.Patch(ctx, obj, client.RawPatch(types.MergePatchType, patch)); err != nil {
			return fmt.Errorf("labelling CRD %s with its contract: %w", crd.Name, err)
		}
	}
	return nil
}

// logBuffer collects what CAPV's controllers log, to show when a test
// fails.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) WriteString(s string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.WriteString(s)
}

// tail returns the last n lines.
func (b *logBuffer) tail(n int) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	lines := bytes.Split(bytes.TrimRight(b.buf.Bytes(), "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}
