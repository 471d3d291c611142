// Package release tests the provider's packaging: the clusterctl release
// assets rendered by clusterctl's own library and applied to a real
// kube-apiserver, the manager running under exactly the released RBAC, and
// the Dockerfile.
package release

import (
	"fmt"
	"os"
	"testing"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

func TestMain(m *testing.M) {
	// envtest logs through controller-runtime; the manager under test gets
	// its own logger.
	ctrllog.SetLogger(logr.Discard())
	code := m.Run()
	if err := stopEnv(); err != nil {
		fmt.Fprintln(os.Stderr, "stopping envtest:", err)
	}
	os.Exit(code)
}
