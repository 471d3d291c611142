// Command manager runs the Cluster API IPAM provider for NetBox and Infoblox.
package main

import (
	"context"
	"flag"
	"fmt"
	stdlog "log"
	"os"
	"runtime/debug"
	"strings"

	"github.com/go-logr/logr"
	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"
	cliflag "k8s.io/component-base/cli/flag"
	logsv1 "k8s.io/component-base/logs/api/v1"

	// Registers --logging-format=json, as Cluster API's managers do.
	_ "k8s.io/component-base/logs/json/register"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/cmd/poolkinds"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = ""

func main() {
	fs := pflag.CommandLine
	o := newOptions()
	o.addFlags(fs)
	// As Cluster API's managers: --leader_elect works like --leader-elect.
	fs.SetNormalizeFunc(cliflag.WordSepNormalizeFunc)
	fs.AddGoFlagSet(flag.CommandLine)
	pflag.Parse()

	if o.showVersion {
		fmt.Println(versionString())
		return
	}
	if err := logsv1.ValidateAndApply(o.logs, nil); err != nil {
		fmt.Fprintf(os.Stderr, "invalid logging flags: %v\n", err)
		os.Exit(2)
	}
	ctrl.SetLogger(klog.Background())
	log := ctrl.Log.WithName("setup")
	// infoblox-go-client prints its request errors with the standard
	// logger; the backend reports the same errors, typed, on the objects.
	stdlog.SetFlags(0)
	stdlog.SetOutput(logWriter{ctrl.Log.WithName("infoblox-go-client").V(4)})
	setGCPercent(log)
	setMemoryLimit(log, cgroupMemoryLimitFiles)

	mgrOpts, err := o.managerOptions()
	if err != nil {
		log.Error(err, "Invalid flags")
		os.Exit(2)
	}
	restConfig := ctrl.GetConfigOrDie()
	if err := checkLeaseNamespace(restConfig, mgrOpts); err != nil {
		log.Error(err, "Leader election cannot start")
		os.Exit(1)
	}
	mgr, err := ctrl.NewManager(restConfig, mgrOpts)
	if err != nil {
		log.Error(err, "Creating the manager")
		os.Exit(1)
	}
	ctx := ctrl.SetupSignalHandler()
	o.controllers.Kinds = poolkinds.All()
	if err := controllers.Setup(ctx, mgr, o.controllers); err != nil {
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

// checkLeaseNamespace refuses to start when the lease's namespace does not
// exist: the manager would otherwise wait for leadership for ever, quietly.
func checkLeaseNamespace(cfg *rest.Config, opts ctrl.Options) error {
	if !opts.LeaderElection {
		return nil
	}
	c, err := client.New(cfg, client.Options{Scheme: opts.Scheme})
	if err != nil {
		return err
	}
	ns := &corev1.Namespace{}
	err = c.Get(context.Background(), client.ObjectKey{Name: opts.LeaderElectionNamespace}, ns)
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("the namespace %q of the leader election lease does not exist: create it, or name another with --leader-election-namespace", opts.LeaderElectionNamespace)
	}
	// Anything else (say, no permission to read namespaces) is left to
	// leader election itself, which reports and retries.
	return nil
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
