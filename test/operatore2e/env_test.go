package operatore2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	operatorv1 "sigs.k8s.io/cluster-api-operator/api/v1alpha2"
	operatorcontroller "sigs.k8s.io/cluster-api-operator/controller"
	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/envtestenv"
)

// capiCRDs are the Cluster API CRDs the manager watches, relative to the
// cluster-api module; the provider's own CRDs are installed by the
// operator, from the release.
var capiCRDs = []string{
	"core/config/crd/bases/cluster.x-k8s.io_clusters.yaml",
	"core/config/crd/bases/ipam.cluster.x-k8s.io_ipaddressclaims.yaml",
	"core/config/crd/bases/ipam.cluster.x-k8s.io_ipaddresses.yaml",
}

// operatorCRDs are the operator's seven provider kinds, relative to its
// module. All seven are needed although only the IPAMProvider reconciler
// runs: the preflight checks list providers of every kind.
var operatorCRDs = []string{
	"config/crd/bases/operator.cluster.x-k8s.io_addonproviders.yaml",
	"config/crd/bases/operator.cluster.x-k8s.io_bootstrapproviders.yaml",
	"config/crd/bases/operator.cluster.x-k8s.io_controlplaneproviders.yaml",
	"config/crd/bases/operator.cluster.x-k8s.io_coreproviders.yaml",
	"config/crd/bases/operator.cluster.x-k8s.io_infrastructureproviders.yaml",
	"config/crd/bases/operator.cluster.x-k8s.io_ipamproviders.yaml",
	"config/crd/bases/operator.cluster.x-k8s.io_runtimeextensionproviders.yaml",
}

// startEnv starts an API server with Cluster API's and the operator's CRDs
// and returns it, stopped when the test ends.
func startEnv(t *testing.T) *envtest.Environment {
	t.Helper()
	require.NotEmpty(t, os.Getenv("KUBEBUILDER_ASSETS"),
		"KUBEBUILDER_ASSETS is not set: export KUBEBUILDER_ASSETS=$(../../hack/envtest-binaries.sh)")
	// Both modules as this module resolves them: the operator's pinned
	// version, and the Cluster API the provider is built with.
	capiDir, err := envtestenv.ModuleDir(".", "sigs.k8s.io/cluster-api")
	require.NoError(t, err)
	operatorDir, err := envtestenv.ModuleDir(".", "sigs.k8s.io/cluster-api-operator")
	require.NoError(t, err)
	var paths []string
	for _, crd := range capiCRDs {
		paths = append(paths, filepath.Join(capiDir, crd))
	}
	for _, crd := range operatorCRDs {
		paths = append(paths, filepath.Join(operatorDir, crd))
	}
	env := &envtest.Environment{CRDDirectoryPaths: paths, ErrorIfCRDPathMissing: true}
	cfg, err := env.Start()
	require.NoError(t, err, "starting envtest")
	cfg.QPS, cfg.Burst = 500, 1000
	t.Cleanup(func() { require.NoError(t, env.Stop()) })
	return env
}

// operatorScheme is the operator's scheme, as its cmd/main.go builds it.
func operatorScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(operatorv1.AddToScheme(s))
	utilruntime.Must(apiextensionsv1.AddToScheme(s))
	utilruntime.Must(clusterctlv1.AddToScheme(s))
	return s
}

// startOperator runs the operator's IPAMProvider reconciler and its health
// check on a manager of their own until the test ends, with the options the
// operator's cmd/main.go gives them. The CoreProvider reconciler does not
// run: the test marks the CoreProvider ready by hand.
func startOperator(t *testing.T, cfg *rest.Config, s *runtime.Scheme) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 s,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		// As the operator: ConfigMaps (the release) and Secrets are read
		// from the API server, never cached.
		Client: client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{&corev1.ConfigMap{}, &corev1.Secret{}}}},
	})
	require.NoError(t, err)

	// The reconciler keeps the provider it reconciles in a field: it must
	// run one reconcile at a time, as the operator's --concurrency=1 default.
	one := controller.Options{MaxConcurrentReconciles: 1}
	require.NoError(t, (&operatorcontroller.GenericProviderReconciler{
		Provider:                 &operatorv1.IPAMProvider{},
		ProviderList:             &operatorv1.IPAMProviderList{},
		Client:                   mgr.GetClient(),
		Config:                   mgr.GetConfig(),
		WatchCoreProviderChanges: true,
	}).SetupWithManager(ctx, mgr, one))
	require.NoError(t, (&operatorcontroller.GenericProviderHealthCheckReconciler{
		Client:   mgr.GetClient(),
		Provider: &operatorv1.IPAMProvider{},
	}).SetupWithManager(mgr, one))

	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := mgr.Start(ctx); err != nil {
			operatorLogs.WriteString("operator manager: " + err.Error() + "\n")
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
