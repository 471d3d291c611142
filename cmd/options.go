package main

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/component-base/featuregate"
	"k8s.io/component-base/logs"
	logsv1 "k8s.io/component-base/logs/api/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	"sigs.k8s.io/cluster-api/util/flags"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/audit"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/pool"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/poolstate"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/retry"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/pkg/cachetransform"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/pkg/endpointpolicy"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/pkg/scheme"
)

// defaultManagerNamespace is where `clusterctl init` installs the manager;
// outside a pod it holds the Global pools' Secrets and the leader election
// lease unless flags say otherwise.
const defaultManagerNamespace = "capi-ipam-bridge-system"

// defaultLeaderElectionID names the lease.
const defaultLeaderElectionID = "capi-ipam-bridge-leader"

// options are the manager's flags. The names of the shared ones are Cluster
// API's (sigs.k8s.io/cluster-api/util/flags and its managers' own), so that
// the cluster-api-operator can customize the manager as it customizes
// theirs.
type options struct {
	controllers controllers.Options
	diagnostics flags.ManagerOptions
	logs        *logsv1.LoggingConfiguration
	features    featuregate.MutableFeatureGate

	watchNamespace       string
	healthAddr           string
	profilerAddress      string
	syncPeriod           time.Duration
	shutdownTimeout      time.Duration
	showVersion          bool
	maxConcurrent        int
	webhookPort          int
	webhookHost          string
	webhookCertDir       string
	leaderElect          bool
	leaderElectionID     string
	leaseNamespace       string
	leaseDuration        time.Duration
	claimConcurrencyFlag *pflag.Flag
	allowedEndpoints     []string
	renewDeadline        time.Duration
	retryPeriod          time.Duration
}

func newOptions() *options {
	return &options{logs: logs.NewOptions(), features: featuregate.NewFeatureGate()}
}

func (o *options) addFlags(fs *pflag.FlagSet) {
	managerNamespace := os.Getenv("POD_NAMESPACE")
	if managerNamespace == "" {
		managerNamespace = defaultManagerNamespace
	}
	logsv1.AddFlags(o.logs, fs)
	flags.AddManagerOptions(fs, &o.diagnostics)
	// --metrics-bind-addr is what the cluster-api-operator writes for
	// spec.manager.metrics.bindAddress; older Cluster API managers served
	// plain metrics there. Here it names the same secure endpoint.
	fs.StringVar(&o.diagnostics.DiagnosticsAddress, "metrics-bind-addr", o.diagnostics.DiagnosticsAddress, "Deprecated: use --diagnostics-address.")
	_ = fs.MarkDeprecated("metrics-bind-addr", "use --diagnostics-address (served over HTTPS unless --insecure-diagnostics)")
	o.features.AddFlag(fs)

	fs.StringVar(&o.watchNamespace, "namespace", "", "Namespace to watch for claims and pools; all namespaces when empty.")
	fs.StringVar(&o.controllers.WatchFilterValue, "watch-filter", "", "Reconcile only objects labelled cluster.x-k8s.io/watch-filter=<value>.")
	fs.StringVar(&o.controllers.ManagerNamespace, "manager-namespace", managerNamespace, "Namespace holding the Secrets of Global pools and, by default, the leader election lease ($POD_NAMESPACE, else "+defaultManagerNamespace+").")
	fs.StringVar(&o.controllers.Identity, "marker-identity", "", "Identity of this management cluster in reservation markers (lower-case letters, digits, '-' and '.'); the UID of its kube-system namespace when empty. A readable name helps the IPAM team tell management clusters apart.")

	fs.BoolVar(&o.leaderElect, "leader-elect", true, "Elect a leader so that only one replica reconciles. Turn it off only when exactly one manager runs.")
	fs.StringVar(&o.leaderElectionID, "leader-election-id", defaultLeaderElectionID, "Name of the leader election lease, or <namespace>/<name>.")
	fs.StringVar(&o.leaseNamespace, "leader-election-namespace", "", "Namespace of the leader election lease; --manager-namespace when empty, so that it also works outside a pod.")
	fs.DurationVar(&o.leaseDuration, "leader-elect-lease-duration", 15*time.Second, "How long a lease lasts: how long other replicas wait before taking over from a leader that stopped renewing.")
	fs.DurationVar(&o.renewDeadline, "leader-elect-renew-deadline", 10*time.Second, "How long the leader keeps trying to renew its lease before it gives up leadership.")
	fs.DurationVar(&o.retryPeriod, "leader-elect-retry-period", 2*time.Second, "How long replicas wait between tries to acquire or renew the lease.")

	fs.StringVar(&o.healthAddr, "health-addr", ":9440", "Address of the health probes (/healthz, /readyz).")
	fs.StringVar(&o.profilerAddress, "profiler-address", "", "Address of a plain-HTTP pprof endpoint (for example localhost:6060); off when empty. The secure diagnostics endpoint serves pprof too.")
	fs.DurationVar(&o.syncPeriod, "sync-period", 10*time.Minute, "How often the cache lists every watched object again.")
	fs.DurationVar(&o.shutdownTimeout, "graceful-shutdown-timeout", 30*time.Second, "How long running reconciles may take to finish on shutdown. A request cut short is harmless: its reservation carries the claim's marker and is adopted later.")
	fs.BoolVar(&o.showVersion, "version", false, "Print the version and exit.")

	fs.IntVar(&o.controllers.ClaimConcurrency, "ipaddressclaim-concurrency", 10, "Number of IPAddressClaims reconciled at once.")
	fs.IntVar(&o.maxConcurrent, "max-concurrent-reconciles", 0, "Number of IPAddressClaims reconciled at once when --ipaddressclaim-concurrency is not given (the cluster-api-operator's spec.manager.maxConcurrentReconciles).")
	fs.IntVar(&o.controllers.PoolConcurrency, "pool-concurrency", 2, "Number of pools of each kind reconciled at once.")
	fs.DurationVar(&o.controllers.Backend.RequestTimeout, "backend-request-timeout", 15*time.Second, "Timeout of one request to NetBox or Infoblox.")
	fs.IntVar(&o.controllers.Backend.MaxBatchSize, "max-batch-size", backends.DefaultMaxBatchSize, "Most claims of one pool that, allocated or released at once, share one marker search and one request to the IPAM system; 1 turns batching off.")
	fs.DurationVar(&o.controllers.SyncPeriod, "pool-sync-period", 5*time.Minute, "How often pools are validated again and their counts refreshed.")
	fs.DurationVar(&o.controllers.ExhaustedRetryInterval, "exhausted-retry-interval", time.Minute, "How often a claim on a full pool retries.")
	fs.StringSliceVar(&o.allowedEndpoints, "allowed-endpoints", nil, "The IPAM endpoints that namespaced pools may reach, each scheme://host[:port] (a host may be *.domain); a namespaced pool naming any other is refused before any connection (EndpointNotAllowed). Empty, or \"*\", allows every endpoint: set it wherever namespace editors may create pools (docs/security.md). Global pools are not held to it.")
	fs.DurationVar(&o.controllers.LateRecordWindow, "late-record-window", poolstate.DefaultLateRecordWindow, "The longest a create sent to an IPAM system may still be applied (a request queued in the system, or sent by a manager that died): once the manager takes the lead (for the pools that existed then), and after a create whose answer was lost, each pool is audited a quarter, a half and the whole of it later, and the duplicates such creates left are deleted at once (docs/audit.md).")
	fs.DurationVar(&o.controllers.AuditInterval, "audit-interval", audit.DefaultAuditInterval, "How often each pool's records in the IPAM system are audited against the claims (docs/audit.md), jittered by up to a tenth.")
	fs.DurationVar(&o.controllers.PoolRefreshInterval, "pool-refresh-interval", pool.DefaultRefreshInterval, "Least time between two refreshes of a pool's address counts; a burst of allocations costs one refresh per interval.")
	fs.DurationVar(&o.controllers.MaxRetryInterval, "max-retry-interval", retry.DefaultMaxRetryInterval, "Longest wait before a claim or pool that is not ready, or whose reconcile failed, is looked at again.")

	// The cluster-api-operator writes these from spec.manager.webhook. The
	// provider serves no webhooks, so they are accepted and change nothing.
	fs.IntVar(&o.webhookPort, "webhook-port", 9443, "Not used: the provider serves no webhooks (accepted for the cluster-api-operator).")
	fs.StringVar(&o.webhookHost, "webhook-host", "", "Not used: the provider serves no webhooks (accepted for the cluster-api-operator).")
	fs.StringVar(&o.webhookCertDir, "webhook-cert-dir", "", "Not used: the provider serves no webhooks (accepted for the cluster-api-operator).")
	o.claimConcurrencyFlag = fs.Lookup("ipaddressclaim-concurrency")
}

// managerOptions turns the flags into the manager's options.
func (o *options) managerOptions() (ctrl.Options, error) {
	if o.maxConcurrent > 0 && !o.claimConcurrencyFlag.Changed {
		o.controllers.ClaimConcurrency = o.maxConcurrent
	}
	allowed, err := endpointpolicy.Parse(o.allowedEndpoints)
	if err != nil {
		return ctrl.Options{}, fmt.Errorf("--allowed-endpoints: %w", err)
	}
	o.controllers.AllowedEndpoints = allowed
	_, metrics, err := flags.GetManagerOptions(o.diagnostics)
	if err != nil {
		return ctrl.Options{}, err
	}
	leaseNamespace, leaseName := o.leaseNamespace, o.leaderElectionID
	if ns, name, ok := strings.Cut(o.leaderElectionID, "/"); ok {
		if leaseNamespace != "" && leaseNamespace != ns {
			return ctrl.Options{}, fmt.Errorf("--leader-election-id names namespace %q, --leader-election-namespace %q", ns, leaseNamespace)
		}
		leaseNamespace, leaseName = ns, name
	}
	if leaseNamespace == "" {
		leaseNamespace = o.controllers.ManagerNamespace
	}
	opts := ctrl.Options{
		Scheme:                     scheme.New(),
		LeaderElection:             o.leaderElect,
		LeaderElectionID:           leaseName,
		LeaderElectionNamespace:    leaseNamespace,
		LeaderElectionResourceLock: resourcelock.LeasesResourceLock,
		LeaseDuration:              &o.leaseDuration,
		RenewDeadline:              &o.renewDeadline,
		RetryPeriod:                &o.retryPeriod,
		// The process exits right after the manager stops, so a successor
		// may take over without waiting for the lease to expire.
		LeaderElectionReleaseOnCancel: true,
		GracefulShutdownTimeout:       &o.shutdownTimeout,
		Metrics:                       *metrics,
		HealthProbeBindAddress:        o.healthAddr,
		PprofBindAddress:              o.profilerAddress,
		// Only what the provider reads, each string and label set that
		// thousands of claims and IPAddresses repeat once, and of Clusters
		// only their metadata and spec.paused.
		Cache: cachetransform.CacheOptions(&o.syncPeriod),
	}
	if o.watchNamespace != "" {
		// Global pools read their Secrets from the manager's namespace.
		opts.Cache.DefaultNamespaces = map[string]cache.Config{o.watchNamespace: {}, o.controllers.ManagerNamespace: {}}
	}
	return opts, nil
}
