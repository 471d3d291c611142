package claim

import (
	"fmt"
	"testing"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/cmd/poolkinds"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/internal/apitest"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/pkg/poolkind"
)

// The tests that read or write objects share one API server (see apitest).
func TestMain(m *testing.M) { apitest.Main(m) }

// kindOf is pool's kind as the manager serves it; the zero kind for none.
func kindOf(pool poolkind.Pool) poolkind.Kind {
	for _, k := range poolkinds.All() {
		if pool != nil && fmt.Sprintf("%T", k.New()) == fmt.Sprintf("%T", pool) {
			return k
		}
	}
	return poolkind.Kind{}
}
