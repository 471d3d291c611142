// Package envtestenv starts a real kube-apiserver and etcd with the CRDs the
// provider works with: ours, and CAPI's Cluster, Machine, IPAddressClaim and
// IPAddress taken from the cluster-api module (see the controlplane package,
// which this one wraps), and runs the provider's manager against it.
package envtestenv

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"sync"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/cmd/poolkinds"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/pkg/cachetransform"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/envtestenv/controlplane"
)

// RepoRoot is the root of this repository.
func RepoRoot() string { return controlplane.RepoRoot() }

// Start starts the API server (see controlplane.Start). KUBEBUILDER_ASSETS
// must name the directory holding kube-apiserver and etcd (make test and
// make demo set it, from hack/envtest-binaries.sh). extraCRDPaths name
// further CRD files or directories, for example a consumer's.
func Start(extraCRDPaths ...string) (*envtest.Environment, *rest.Config, error) {
	return controlplane.Start(extraCRDPaths...)
}

// ModuleDir finds the directory, in the module cache, of a dependency of
// the module in dir.
func ModuleDir(dir, module string) (string, error) { return controlplane.ModuleDir(dir, module) }

// StartManager runs a manager with the provider's reconcilers until ctx
// ends; the returned channel closes when it has stopped. Metrics and probes
// are off, and controller names may repeat, so that one process can run
// several managers. mutate adjusts the manager's options.
func StartManager(ctx context.Context, cfg *rest.Config, scheme *runtime.Scheme, opts controllers.Options, mutate ...func(*manager.Options)) (<-chan struct{}, error) {
	return StartManagerWith(ctx, cfg, scheme, opts, nil, mutate...)
}

// StartManagerWith is StartManager with setup, when set, registering more
// controllers on the manager beside the provider's: a consumer's, for
// example.
func StartManagerWith(ctx context.Context, cfg *rest.Config, scheme *runtime.Scheme, opts controllers.Options,
	setup func(manager.Manager) error, mutate ...func(*manager.Options)) (<-chan struct{}, error) {
	if len(opts.Kinds) == 0 {
		opts.Kinds = poolkinds.All()
	}
	mgrOpts := manager.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
		// The binary's cache, transforms included: the suites run the
		// provider on what the manager really keeps of each object.
		Cache: cachetransform.CacheOptions(nil),
	}
	for _, m := range mutate {
		m(&mgrOpts)
	}
	mgr, err := manager.New(cfg, mgrOpts)
	if err != nil {
		return nil, fmt.Errorf("creating the manager: %w", err)
	}
	if err := controllers.Setup(ctx, mgr, opts); err != nil {
		return nil, err
	}
	if setup != nil {
		if err := setup(mgr); err != nil {
			return nil, err
		}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := mgr.Start(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "manager:", err)
		}
	}()
	return done, nil
}

// LogBuffer collects what managers log, from any goroutine, to print when
// a test fails.
type LogBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// WriteString appends s.
func (b *LogBuffer) WriteString(s string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.WriteString(s)
}

// String returns everything written.
func (b *LogBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
