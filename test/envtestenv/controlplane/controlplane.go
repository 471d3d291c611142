// Package controlplane starts a real kube-apiserver and etcd with the CRDs
// the provider works with: ours, and CAPI's Cluster, Machine,
// IPAddressClaim and IPAddress taken from the cluster-api module.
//
// It imports nothing of this module, so that any package's tests can use
// it, the controllers' included; envtestenv, which imports the controllers
// to run a manager, wraps it.
package controlplane

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"strings"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// CAPICRDs are the CAPI CRDs Start installs, relative to the cluster-api
// module.
var CAPICRDs = []string{
	"core/config/crd/bases/cluster.x-k8s.io_clusters.yaml",
	// The control-plane endpoint reads a ClusterClass's variables.
	"core/config/crd/bases/cluster.x-k8s.io_clusterclasses.yaml",
	"core/config/crd/bases/cluster.x-k8s.io_machines.yaml",
	"core/config/crd/bases/ipam.cluster.x-k8s.io_ipaddressclaims.yaml",
	"core/config/crd/bases/ipam.cluster.x-k8s.io_ipaddresses.yaml",
}

// RepoRoot is the root of this repository.
func RepoRoot() string {
	_, file, _, _ := goruntime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..")
}

// Start starts the API server. KUBEBUILDER_ASSETS must name the directory
// holding kube-apiserver and etcd (make test and make demo set it, from
// hack/envtest-binaries.sh). extraCRDPaths name further CRD files or
// directories, for example a consumer's.
func Start(extraCRDPaths ...string) (*envtest.Environment, *rest.Config, error) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		return nil, nil, fmt.Errorf("KUBEBUILDER_ASSETS is not set: run through make test, or export KUBEBUILDER_ASSETS=$(hack/envtest-binaries.sh)")
	}
	capiDir, err := ModuleDir(RepoRoot(), "sigs.k8s.io/cluster-api")
	if err != nil {
		return nil, nil, err
	}
	paths := []string{filepath.Join(RepoRoot(), "config", "crd", "bases")}
	for _, crd := range CAPICRDs {
		paths = append(paths, filepath.Join(capiDir, crd))
	}
	paths = append(paths, extraCRDPaths...)
	env := &envtest.Environment{
		CRDDirectoryPaths:     paths,
		ErrorIfCRDPathMissing: true,
	}
	cfg, err := env.Start()
	if err != nil {
		return nil, nil, fmt.Errorf("starting envtest: %w", err)
	}
	// Tests create objects in bursts; the client's default limits would
	// throttle them.
	cfg.QPS, cfg.Burst = 500, 1000
	return env, cfg, nil
}

// ModuleDir finds the directory, in the module cache, of a dependency of
// the module in dir.
func ModuleDir(dir, module string) (string, error) {
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", module)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("locating module %s: %w", module, err)
	}
	found := strings.TrimSpace(string(out))
	if found == "" {
		return "", fmt.Errorf("module %s is not downloaded; run go mod download", module)
	}
	return found, nil
}
