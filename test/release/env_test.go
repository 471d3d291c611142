package release

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/pkg/scheme"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/envtestenv"
)

// The API server is started once, on first use, and shared by the tests.
// Unlike envtestenv.Start it installs only Cluster API's CRDs: ours are
// installed by applying the release, as clusterctl init would. And it turns
// on the OwnerReferencesPermissionEnforcement admission plugin, which some
// distributions (OpenShift among them) enable, so the RBAC test proves the
// role suffices there too.
var (
	envOnce   sync.Once
	env       *envtest.Environment
	envConfig *rest.Config
	envErr    error
)

var capiCRDs = []string{
	"core/config/crd/bases/cluster.x-k8s.io_clusters.yaml",
	"core/config/crd/bases/ipam.cluster.x-k8s.io_ipaddressclaims.yaml",
	"core/config/crd/bases/ipam.cluster.x-k8s.io_ipaddresses.yaml",
}

// startEnv returns the shared API server's admin config and a client.
func startEnv(t *testing.T) (*rest.Config, client.Client) {
	t.Helper()
	envOnce.Do(func() {
		if os.Getenv("KUBEBUILDER_ASSETS") == "" {
			envErr = fmt.Errorf("KUBEBUILDER_ASSETS is not set: run through make test-release, or export KUBEBUILDER_ASSETS=$(hack/envtest-binaries.sh)")
			return
		}
		env, envConfig, envErr = newAPIServer()
	})
	require.NoError(t, envErr)
	return envConfig, adminClient(t, envConfig)
}

// newAPIServer starts an API server with Cluster API's CRDs.
func newAPIServer() (*envtest.Environment, *rest.Config, error) {
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/cluster-api")
	cmd.Dir = envtestenv.RepoRoot()
	out, err := cmd.Output()
	if err != nil {
		return nil, nil, fmt.Errorf("locating sigs.k8s.io/cluster-api: %w", err)
	}
	var paths []string
	for _, crd := range capiCRDs {
		paths = append(paths, filepath.Join(strings.TrimSpace(string(out)), crd))
	}
	e := &envtest.Environment{CRDDirectoryPaths: paths, ErrorIfCRDPathMissing: true}
	e.ControlPlane.GetAPIServer().Configure().
		Append("enable-admission-plugins", "OwnerReferencesPermissionEnforcement")
	cfg, err := e.Start()
	if err != nil {
		return nil, nil, fmt.Errorf("starting envtest: %w", err)
	}
	cfg.QPS, cfg.Burst = 500, 1000
	return e, cfg, nil
}

// adminClient is a client for cfg that also knows CRDs.
func adminClient(t *testing.T, cfg *rest.Config) client.Client {
	t.Helper()
	s := scheme.New()
	require.NoError(t, apiextensionsv1.AddToScheme(s))
	c, err := client.New(cfg, client.Options{Scheme: s})
	require.NoError(t, err)
	return c
}

func stopEnv() error {
	if env == nil {
		return nil
	}
	return env.Stop()
}
