package endpointpolicy

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestAllows(t *testing.T) {
	policy, err := Parse([]string{"https://netbox.example.com", "http://10.0.0.5:8000", "https://*.ipam.example.org:8443", "https://[fd00::1]"})
	require.NoError(t, err)
	require.True(t, policy.Restricted())
	for _, tc := range []struct {
		endpoint string
		allowed  bool
	}{
		{"https://netbox.example.com", true},
		{"https://netbox.example.com/", true},
		{"https://NetBox.Example.com./api/", true},
		{"https://netbox.example.com:443/netbox", true},
		{"https://netbox.example.com:8443", false},
		{"http://netbox.example.com", false},
		{"https://netbox.example.com.evil.test", false},
		{"https://netbox.example.com@169.254.169.254", false},
		{"https://evil.test#@netbox.example.com", false},
		{"http://10.0.0.5:8000", true},
		{"http://10.0.0.5", false},
		{"http://[::ffff:10.0.0.5]:8000", true},
		{"https://grid.ipam.example.org:8443", true},
		{"https://a.b.ipam.example.org:8443", true},
		{"https://ipam.example.org:8443", false},
		{"https://xipam.example.org:8443", false},
		{"https://[fd00:0::1]:443", true},
		{"https://kubernetes.default.svc", false},
		// A zone that looks like an allowed domain is dropped when the
		// connection is made: the address dialled is the IP's.
		{"https://[::ffff:10.96.0.1%25x.ipam.example.org]:8443/", false},
		{"https://[fe80::1%25eth0]:8443/", false},
		{"https://[::1%25a.ipam.example.org]:8443/", false},
		{"https://10.0.0.1.ipam.example.org:8443", true},
		{"not a url", false},
		{"", false},
	} {
		assert.Equal(t, tc.allowed, policy.Allows(tc.endpoint), tc.endpoint)
	}
	assert.Equal(t, "https://netbox.example.com:443,http://10.0.0.5:8000,https://*.ipam.example.org:8443,https://[fd00::1]:443", policy.String())
}

func TestAWildcardWithATrailingDotMatches(t *testing.T) {
	policy, err := Parse([]string{"https://*.example.com.", "https://netbox.example.org."})
	require.NoError(t, err)
	assert.True(t, policy.Allows("https://grid.example.com"))
	assert.True(t, policy.Allows("https://netbox.example.org/"))
}

func TestAnUnrestrictedPolicyAllowsEveryEndpoint(t *testing.T) {
	for _, specs := range [][]string{nil, {}, {""}, {"*"}} {
		policy, err := Parse(specs)
		require.NoError(t, err)
		assert.False(t, policy.Restricted(), "%q", specs)
		assert.True(t, policy.Allows("https://anything.test"), "%q", specs)
		assert.Equal(t, "*", policy.String())
	}
	var none *Policy
	assert.True(t, none.Allows("https://anything.test"))
}

func TestDescribeNamesNoCredential(t *testing.T) {
	assert.Equal(t, "https://netbox.example.com:443", Describe("https://user:s3cret@NetBox.example.com/api/?token=x"))
	assert.Equal(t, "http://[fd00::1]:8000", Describe("http://[fd00::1]:8000"))
	assert.Equal(t, "an endpoint that is no URL", Describe("::"))
}

func TestParseRefuses(t *testing.T) {
	for _, spec := range [][]string{
		{"netbox.example.com"},
		{"ftp://netbox.example.com"},
		{"https://netbox.example.com/api"},
		{"https://user@netbox.example.com"},
		{"https://netbox.example.com?x=1"},
		{"https://"},
		{"https://net*box.example.com"},
		{"https://*."},
		{"https://[fe80::1%25eth0]"},
		{"*", "https://netbox.example.com"},
	} {
		_, err := Parse(spec)
		assert.Error(t, err, "%q", spec)
	}
}
