package fidelity

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestFidelity runs the cases with the infoblox-go-client version pinned in
// go.mod; test/wapifidelity runs them with v2.11.0.
func TestFidelity(t *testing.T) {
	require.Equal(t, "v2.12.0", ClientVersion(t))
	Run(t)
}
