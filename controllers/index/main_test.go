package index

import (
	"testing"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/internal/apitest"
)

// The tests that read or write objects share one API server (see apitest).
func TestMain(m *testing.M) { apitest.Main(m) }
