package infoblox_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends/infoblox"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/wapisim"
)

func TestCheckCredentials(t *testing.T) {
	sim := wapisim.NewTLS()
	t.Cleanup(sim.Close)
	cert, key := sim.IssueClientCert(user)
	for _, tc := range []struct {
		name               string
		username, password string
		cert, key          []byte
		want               error
	}{
		{"username and password", user, password, nil, nil, nil},
		{"certificate and key", "", "", cert, key, nil},
		{"both", user, password, cert, key, infoblox.ErrBothCredentials},
		{"username alone", user, "", nil, nil, infoblox.ErrPartialPassword},
		{"key alone", "", "", nil, key, infoblox.ErrPartialCert},
		{"nothing", "", "", nil, nil, infoblox.ErrNoCredentials},
		{"a pair that does not parse", "", "", cert, []byte("garbage"), infoblox.ErrBadKeyPair},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := infoblox.CheckCredentials(tc.username, tc.password, tc.cert, tc.key)
			if tc.want == nil {
				assert.NoError(t, err)
				return
			}
			assert.ErrorIs(t, err, tc.want)
			assert.ErrorIs(t, err, backends.ErrInvalidConfig)
			assert.NotContains(t, err.Error(), password, "no secret is quoted")
		})
	}
}
