package controllers

import (
	"context"
	"fmt"
	"time"

	eventsv1client "k8s.io/client-go/kubernetes/typed/events/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/audit"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/backendcache"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/claim"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/endpoint"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/index"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/macaddress"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/metrics"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/owners"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/pool"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/poolstate"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/reservation"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/subnet"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/pkg/endpointpolicy"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/pkg/eventrecorder"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/pkg/poolkind"
)

// Options configure the provider's reconcilers.
type Options struct {
	// Identity makes this management cluster's reservation markers distinct
	// when several share one IPAM system; empty means the UID of the
	// cluster's kube-system namespace.
	Identity string
	// ManagerNamespace holds the Secrets of cluster-scoped pools.
	ManagerNamespace string
	// WatchFilterValue limits reconciliation to objects labelled
	// cluster.x-k8s.io/watch-filter=<value>.
	WatchFilterValue string

	ClaimConcurrency int
	PoolConcurrency  int
	// SyncPeriod is how often pools are validated again.
	SyncPeriod time.Duration
	// ExhaustedRetryInterval is how often a claim on a full pool retries.
	ExhaustedRetryInterval time.Duration
	// PoolRefreshInterval is the least time between two count refreshes of
	// a pool (default 10s).
	PoolRefreshInterval time.Duration
	// AuditInterval is how often each pool is audited (default 10m).
	AuditInterval time.Duration
	// LateRecordWindow is the longest a create may still be applied after
	// it was sent (default 2m): once this process leads, and after a
	// create whose answer was lost, the audit sweeps for the duplicates such creates
	// leave (poolstate.LateRecords).
	LateRecordWindow time.Duration
	// MaxRetryInterval caps every wait that no event is guaranteed to end,
	// and the backoff of failed reconciles (default 5m).
	MaxRetryInterval time.Duration
	// FirstRetryInterval is the first wait of a claim that waits (default
	// 1s); tests lengthen it to prove that an event, not the backoff, ends
	// a wait.
	FirstRetryInterval time.Duration

	Backend poolkind.BackendOptions
	// AllowedEndpoints are the IPAM endpoints namespaced pools may reach;
	// nil allows every endpoint.
	AllowedEndpoints *endpointpolicy.Policy

	// Kinds are the pool kinds to serve (see package poolkinds); at
	// least one.
	Kinds poolkind.Kinds
}

// The manager's secure diagnostics endpoint (--diagnostics-address) asks the
// API server who a client is and whether it may read /metrics.
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

// Setup registers the indexes and reconcilers of every pool kind with mgr.
func Setup(ctx context.Context, mgr ctrl.Manager, opts Options) error {
	if opts.Identity == "" {
		identity, err := reservation.ClusterIdentity(ctx, mgr.GetAPIReader())
		if err != nil {
			return err
		}
		opts.Identity = identity
		ctrl.LoggerFrom(ctx).Info("Marking reservations with this management cluster's kube-system UID", "identity", identity)
	}
	if err := backends.ValidateIdentity(opts.Identity); err != nil {
		return err
	}
	metrics.Register()
	opts.Backend.Observe = metrics.ObserveRequests
	opts.Backend.ObserveBatch = metrics.ObserveBatches
	kinds := opts.Kinds
	if len(kinds) == 0 {
		return fmt.Errorf("no pool kinds to serve")
	}
	metrics.ZeroCounters(kinds)
	if err := index.Setup(ctx, mgr, kinds); err != nil {
		return err
	}
	recorder, err := eventRecorders(mgr)
	if err != nil {
		return err
	}
	// Its start is its first look at a pool, once this process leads: the
	// process before released the lead only after its controllers stopped,
	// and so sent its last create before (cmd exits once the manager does).
	lateRecords := poolstate.NewLateRecords(opts.LateRecordWindow, time.Time{})
	cache := &backendcache.Backends{
		Client:           mgr.GetClient(),
		APIReader:        mgr.GetAPIReader(),
		ManagerNamespace: opts.ManagerNamespace,
		Options:          opts.Backend,
		LateRecords:      lateRecords,
		AllowedEndpoints: opts.AllowedEndpoints,
	}
	if opts.AllowedEndpoints.Restricted() {
		ctrl.LoggerFrom(ctx).Info("Namespaced pools may reach only the allowed IPAM endpoints", "allowedEndpoints", opts.AllowedEndpoints.String())
	} else {
		ctrl.LoggerFrom(ctx).Info("Namespaced pools may reach any IPAM endpoint: set --allowed-endpoints where namespace editors may create pools")
	}
	inFlight := &poolstate.InFlight{}
	alarms := poolstate.NewAlarms()
	tombstones := &poolstate.Tombstones{}
	claims := &claim.ClaimReconciler{
		Client:                  mgr.GetClient(),
		APIReader:               mgr.GetAPIReader(),
		InFlight:                inFlight,
		Alarms:                  alarms,
		Tombstones:              tombstones,
		Recorder:                recorder("ipam-bridge-claim-controller"),
		Kinds:                   kinds,
		Backends:                cache,
		MachineNames:            &claim.MachineNames{Reader: mgr.GetAPIReader(), Follow: owners.ConsumerOwnerKinds},
		MACAddresses:            &macaddress.Sources{Reader: mgr.GetAPIReader(), Follow: owners.ConsumerOwnerKinds},
		Identity:                opts.Identity,
		WatchFilterValue:        opts.WatchFilterValue,
		MaxConcurrentReconciles: opts.ClaimConcurrency,
		ExhaustedRetryInterval:  opts.ExhaustedRetryInterval,
		MaxRetryInterval:        opts.MaxRetryInterval,
		FirstRetryInterval:      opts.FirstRetryInterval,
	}
	if err := claims.SetupWithManager(ctx, mgr); err != nil {
		return fmt.Errorf("setting up the claim controller: %w", err)
	}
	secrets := &pool.SecretReconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Kinds: kinds, ManagerNamespace: opts.ManagerNamespace}
	if err := secrets.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the credentials Secret controller: %w", err)
	}
	endpoints := &endpoint.Reconciler{
		Client:           mgr.GetClient(),
		APIReader:        mgr.GetAPIReader(),
		Recorder:         recorder("ipam-bridge-endpoint-controller"),
		WatchFilterValue: opts.WatchFilterValue,
		Kinds:            kinds,
	}
	if err := endpoints.SetupWithManager(ctx, mgr); err != nil {
		return fmt.Errorf("setting up the control-plane endpoint controller: %w", err)
	}
	subnets := &subnet.Reconciler{
		Client:           mgr.GetClient(),
		APIReader:        mgr.GetAPIReader(),
		Recorder:         recorder("ipam-bridge-subnet-controller"),
		WatchFilterValue: opts.WatchFilterValue,
		Kinds:            kinds,
		// A subnet's work is its claims'.
		MaxConcurrentReconciles: opts.ClaimConcurrency,
	}
	if err := subnets.SetupWithManager(ctx, mgr); err != nil {
		return fmt.Errorf("setting up the cluster subnet controller: %w", err)
	}
	for _, kind := range kinds {
		pools := &pool.PoolReconciler{
			Client:                  mgr.GetClient(),
			Recorder:                recorder("ipam-bridge-pool-controller"),
			Kind:                    kind,
			Backends:                cache,
			WatchFilterValue:        opts.WatchFilterValue,
			MaxConcurrentReconciles: opts.PoolConcurrency,
			SyncPeriod:              opts.SyncPeriod,
			MaxRetryInterval:        opts.MaxRetryInterval,
			RefreshInterval:         opts.PoolRefreshInterval,
			InFlight:                inFlight,
			Alarms:                  alarms,
		}
		if err := pools.SetupWithManager(ctx, mgr); err != nil {
			return fmt.Errorf("setting up the %s controller: %w", kind.Kind, err)
		}
		audits := &audit.AuditReconciler{
			Client:           mgr.GetClient(),
			APIReader:        mgr.GetAPIReader(),
			Recorder:         recorder("ipam-bridge-audit-controller"),
			Kind:             kind,
			Kinds:            kinds,
			Backends:         cache,
			Identity:         opts.Identity,
			WatchFilterValue: opts.WatchFilterValue,
			Interval:         opts.AuditInterval,
			Tombstones:       tombstones,
			LateRecords:      lateRecords,
		}
		if err := audits.SetupWithManager(ctx, mgr); err != nil {
			return fmt.Errorf("setting up the %s audit: %w", kind.Kind, err)
		}
	}
	return nil
}

// eventRecorders returns the reconcilers' event recorders: Normal events go
// straight to the API server, Warnings through the manager's recorder, which
// makes a series of a Warning a failing reconcile repeats (see package
// eventrecorder).
func eventRecorders(mgr ctrl.Manager) (func(name string) events.EventRecorder, error) {
	client, err := eventsv1client.NewForConfigAndClient(mgr.GetConfig(), mgr.GetHTTPClient())
	if err != nil {
		return nil, fmt.Errorf("building the events client: %w", err)
	}
	sender := eventrecorder.NewSender(&events.EventSinkImpl{Interface: client}, mgr.GetLogger().WithName("events"))
	if err := mgr.Add(sender); err != nil {
		return nil, fmt.Errorf("adding the events sender: %w", err)
	}
	return func(name string) events.EventRecorder {
		return sender.NewRecorder(mgr.GetScheme(), name, mgr.GetEventRecorder(name))
	}, nil
}
