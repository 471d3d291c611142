// Package operatore2e installs the provider the way the cluster-api-operator
// does: the operator's own IPAMProvider reconciler (v0.29, run in the test
// process against envtest) reads the release from a ConfigMap, customizes
// the manager's Deployment from spec.manager and applies the components.
// The test then runs the manager binary with exactly the arguments the
// operator wrote, as the ServiceAccount the operator installed.
//
// The operator is a consumer of the provider's release, not a dependency of
// the provider, so it lives in this module and never in the provider's
// go.mod.
package operatore2e

import (
	"os"
	"testing"

	"github.com/go-logr/logr/funcr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/envtestenv"
)

// operatorLogs collects what the operator logs; a test that fails prints
// its tail, where a failed phase shows up first.
var operatorLogs = &envtestenv.LogBuffer{}

func TestMain(m *testing.M) {
	// The operator logs through controller-runtime's global logger (and
	// clusterctl's library through its own, which stays quiet).
	ctrllog.SetLogger(funcr.New(func(prefix, args string) { operatorLogs.WriteString(prefix + " " + args + "\n") },
		funcr.Options{Verbosity: 2}))
	os.Exit(m.Run())
}
