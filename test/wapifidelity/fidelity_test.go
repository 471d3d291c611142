// Package wapifidelity runs the simulator's fidelity cases with
// infoblox-go-client v2.11.0.
package wapifidelity

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/wapisim/fidelity"
)

func TestFidelityClientV2_11(t *testing.T) {
	require.Equal(t, "v2.11.0", fidelity.ClientVersion(t))
	fidelity.Run(t)
}
