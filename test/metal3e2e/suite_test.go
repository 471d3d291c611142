// Package metal3e2e runs CAPM3's own Metal3DataTemplate and Metal3Data
// reconcilers beside the provider's on a real kube-apiserver and etcd
// (envtest): CAPM3 creates the IPAddressClaims, our reconcilers fulfil them
// in NetBox (the simulator, or a real NetBox when NETBOX_URL is set) and in
// the Infoblox WAPI simulator, and CAPM3 renders the addresses into the
// machine's networkData Secret.
package metal3e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	bmov1alpha1 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	infrav1 "github.com/metal3-io/cluster-api-provider-metal3/api/v1beta2"
	"github.com/metal3-io/cluster-api-provider-metal3/baremetal"
	capm3 "github.com/metal3-io/cluster-api-provider-metal3/controllers"
	m3ipamv1 "github.com/metal3-io/ip-address-manager/api/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	ipamv1beta1 "sigs.k8s.io/cluster-api/api/ipam/v1beta1"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/pkg/scheme"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/envtestenv"
)

const (
	managerNamespace = "ipam-bridge-system"
	// identity is the manager's marker identity: markers read
	// metal3e2e/<namespace>/<claim>.
	identity    = "metal3e2e"
	waitTimeout = 60 * time.Second
	// releaseTimeout covers CAPM3's Metal3Data reconciler, which may find
	// the Metal3DataClaim still in its cache when the Metal3Data is
	// deleted, and then looks again 30s later.
	releaseTimeout = 2 * waitTimeout
	pollInterval   = 200 * time.Millisecond
)

// capm3CRDs are the CRDs CAPM3's data reconcilers read, relative to its module.
var capm3CRDs = []string{
	"config/crd/bases/infrastructure.cluster.x-k8s.io_metal3datatemplates.yaml",
	"config/crd/bases/infrastructure.cluster.x-k8s.io_metal3datas.yaml",
	"config/crd/bases/infrastructure.cluster.x-k8s.io_metal3dataclaims.yaml",
	"config/crd/bases/infrastructure.cluster.x-k8s.io_metal3machines.yaml",
	"examples/metal3crds/metal3.io_baremetalhosts.yaml",
}

var (
	k8s  client.Client
	logs = &envtestenv.LogBuffer{}
)

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
	capm3Dir, err := envtestenv.ModuleDir(".", "github.com/metal3-io/cluster-api-provider-metal3")
	if err != nil {
		return err
	}
	var crds []string
	for _, crd := range capm3CRDs {
		crds = append(crds, filepath.Join(capm3Dir, crd))
	}
	env, cfg, err := envtestenv.Start(crds...)
	if err != nil {
		return err
	}
	defer func() { _ = env.Stop() }()

	s := newScheme()
	if k8s, err = client.New(cfg, client.Options{Scheme: s}); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: managerNamespace}}); err != nil {
		return err
	}
	ctrl.SetLogger(funcr.New(func(prefix, args string) { logs.WriteString(prefix + " " + args + "\n") },
		funcr.Options{Verbosity: 2}))

	done, err := envtestenv.StartManagerWith(ctx, cfg, s, controllers.Options{
		Identity:         identity,
		ManagerNamespace: managerNamespace,
		ClaimConcurrency: 4,
		PoolConcurrency:  2,
		SyncPeriod:       time.Minute,
	}, func(mgr manager.Manager) error { return setupCAPM3(ctx, mgr) })
	if err != nil {
		return err
	}
	code := m.Run()
	cancel()
	<-done
	if code != 0 {
		if os.Getenv("SHOW_MANAGER_LOGS") != "" {
			fmt.Fprintln(os.Stderr, logs.String())
		}
		return fmt.Errorf("tests failed (SHOW_MANAGER_LOGS=1 prints what the controllers logged)")
	}
	return nil
}

// newScheme is the provider's scheme with CAPM3's kinds, and the ones its
// reconcilers list at setup: Metal3 IPAM's IPClaim and CAPI's v1beta1
// IPAddressClaim.
func newScheme() *runtime.Scheme {
	s := scheme.New()
	utilruntime.Must(infrav1.AddToScheme(s))
	utilruntime.Must(bmov1alpha1.AddToScheme(s))
	utilruntime.Must(m3ipamv1.AddToScheme(s))
	utilruntime.Must(ipamv1beta1.AddToScheme(s))
	return s
}

// setupCAPM3 registers CAPM3's data reconcilers as its main.go does; the
// cluster cache is for workload clusters, which these two never reach.
func setupCAPM3(ctx context.Context, mgr manager.Manager) error {
	if err := (&capm3.Metal3DataTemplateReconciler{
		Client:         mgr.GetClient(),
		ManagerFactory: baremetal.NewManagerFactory(mgr.GetClient()),
		Log:            ctrl.Log.WithName("capm3").WithName("Metal3DataTemplate"),
	}).SetupWithManager(ctx, mgr, controller.Options{}); err != nil {
		return fmt.Errorf("setting up CAPM3's Metal3DataTemplate controller: %w", err)
	}
	if err := (&capm3.Metal3DataReconciler{
		Client:         mgr.GetClient(),
		ClientReader:   mgr.GetAPIReader(),
		ManagerFactory: baremetal.NewManagerFactory(mgr.GetClient()),
		Log:            ctrl.Log.WithName("capm3").WithName("Metal3Data"),
	}).SetupWithManager(ctx, mgr, controller.Options{}); err != nil {
		return fmt.Errorf("setting up CAPM3's Metal3Data controller: %w", err)
	}
	return nil
}
