package subnet

import (
	"testing"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/internal/apitest"
)

func TestMain(m *testing.M) { apitest.Main(m) }
