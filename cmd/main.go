// Command manager runs the Cluster API IPAM provider for NetBox and Infoblox.
package main

import (
	"flag"
	"fmt"
	stdlog "log"
	"os"
	"runtime/debug"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/pflag"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/textlogger"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/pkg/scheme"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = ""

func main() {
	var (
		opts                 controllers.Options
		watchNamespace       string
		leaderElect          bool
		metricsAddr          string
		probeAddr            string
		showVersion          bool
		shutdownTimeout      time.Duration
		leaderElectionID     = "ipam-bridge.ipam.cluster.x-k8s.io"
		defaultManagerNSFrom = os.Getenv("POD_NAMESPACE")
	)
	if defaultManagerNSFrom == "" {
		defaultManagerNSFrom = "capi-ipam-bridge-system"
	}
	fs := pflag.CommandLine
	fs.StringVar(&watchNamespace, "namespace", "", "Namespace to watch for claims and pools; all namespaces when empty.")
	fs.StringVar(&opts.WatchFilterValue, "watch-filter", "", "Reconcile only objects labelled cluster.x-k8s.io/watch-filter=<value>.")
	fs.StringVar(&opts.ManagerNamespace, "manager-namespace", defaultManagerNSFrom, "Namespace holding the Secrets of Global pools (defaults to $POD_NAMESPACE).")
	fs.StringVar(&opts.Identity, "marker-identity", "", "Identity of this management cluster in reservation markers (lower-case letters, digits, '-' and '.'); the UID of its kube-system namespace when empty. A readable name helps the IPAM team tell management clusters apart.")
	fs.BoolVar(&leaderElect, "leader-elect", false, "Elect a leader so that only one replica reconciles.")
	fs.StringVar(&metricsAddr, "metrics-bind-address", ":8080", "Address of the metrics endpoint; 0 disables it.")
	fs.StringVar(&probeAddr, "health-probe-bind-address", ":9440", "Address of the health probes.")
	fs.IntVar(&opts.ClaimConcurrency, "ipaddressclaim-concurrency", 10, "Number of IPAddressClaims reconciled at once.")
	fs.IntVar(&opts.PoolConcurrency, "pool-concurrency", 2, "Number of pools of each kind reconciled at once.")
	fs.DurationVar(&opts.Backend.RequestTimeout, "backend-request-timeout", 15*time.Second, "Timeout of one request to NetBox or Infoblox.")
	fs.IntVar(&opts.Backend.MaxBatchSize, "max-batch-size", backends.DefaultMaxBatchSize, "Most claims of one pool that, allocated or released at once, share one marker search and one request to the IPAM system; 1 turns batching off.")
	fs.DurationVar(&opts.SyncPeriod, "pool-sync-period", 5*time.Minute, "How often pools are validated again and their counts refreshed.")
	fs.DurationVar(&opts.ExhaustedRetryInterval, "exhausted-retry-interval", time.Minute, "How often a claim on a full pool retries.")
	fs.DurationVar(&opts.AuditInterval, "audit-interval", controllers.DefaultAuditInterval, "How often each pool's records in the IPAM system are audited against the claims (docs/audit.md), jittered by up to a tenth.")
	fs.DurationVar(&opts.PoolRefreshInterval, "pool-refresh-interval", controllers.DefaultRefreshInterval, "Least time between two refreshes of a pool's address counts; a burst of allocations costs one refresh per interval.")
	fs.DurationVar(&opts.MaxRetryInterval, "max-retry-interval", controllers.DefaultMaxRetryInterval, "Longest wait before a claim or pool that is not ready, or whose reconcile failed, is looked at again.")
	fs.DurationVar(&shutdownTimeout, "graceful-shutdown-timeout", 30*time.Second, "How long running reconciles may take to finish on shutdown. A request cut short is harmless: its reservation carries the claim's marker and is adopted later.")
	fs.BoolVar(&showVersion, "version", false, "Print the version and exit.")
	klogFlags := flag.NewFlagSet("klog", flag.ExitOnError)
	klog.InitFlags(klogFlags)
	fs.AddGoFlagSet(klogFlags)
	pflag.Parse()

	if showVersion {
		fmt.Println(versionString())
		return
	}
	ctrl.SetLogger(textlogger.NewLogger(textlogger.NewConfig()))
	log := ctrl.Log.WithName("setup")
	// infoblox-go-client prints its request errors with the standard
	// logger; the backend reports the same errors, typed, on the objects.
	stdlog.SetFlags(0)
	stdlog.SetOutput(logWriter{ctrl.Log.WithName("infoblox-go-client").V(4)})

	mgrOpts := ctrl.Options{
		Scheme:           scheme.New(),
		LeaderElection:   leaderElect,
		LeaderElectionID: leaderElectionID,
		// The process exits right after the manager stops, so a successor
		// may take over without waiting for the lease to expire.
		LeaderElectionReleaseOnCancel: true,
		GracefulShutdownTimeout:       &shutdownTimeout,
		Metrics:                       metricsserver.Options{BindAddress: metricsAddr},
		HealthProbeBindAddress:        probeAddr,
		// Nothing reads managedFields, and at thousands of claims they are
		// a large share of what the cache holds.
		Cache: cache.Options{DefaultTransform: cache.TransformStripManagedFields()},
	}
	if watchNamespace != "" {
		// Global pools read their Secrets from the manager's namespace.
		mgrOpts.Cache.DefaultNamespaces = map[string]cache.Config{watchNamespace: {}, opts.ManagerNamespace: {}}
	}
	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), mgrOpts)
	if err != nil {
		log.Error(err, "Creating the manager")
		os.Exit(1)
	}
	ctx := ctrl.SetupSignalHandler()
	if err := controllers.Setup(ctx, mgr, opts); err != nil {
		log.Error(err, "Setting up the controllers")
		os.Exit(1)
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		log.Error(err, "Adding the health check")
		os.Exit(1)
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		log.Error(err, "Adding the ready check")
		os.Exit(1)
	}
	log.Info("Starting the manager", "version", versionString())
	if err := mgr.Start(ctx); err != nil {
		log.Error(err, "Running the manager")
		os.Exit(1)
	}
}

func versionString() string {
	if version != "" {
		return version
	}
	if info, ok := debug.ReadBuildInfo(); ok && info.Main.Version != "" && info.Main.Version != "(devel)" {
		return info.Main.Version
	}
	return "dev"
}

// logWriter sends the standard logger's lines to a logr logger.
type logWriter struct{ log logr.Logger }

func (w logWriter) Write(p []byte) (int, error) {
	w.log.Info(strings.TrimSpace(string(p)))
	return len(p), nil
}
