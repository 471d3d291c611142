package endpoint

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/api/v1alpha1"
)

func TestParseOptIn(t *testing.T) {
	const (
		pool     = v1alpha1.ControlPlaneEndpointPoolAnnotation
		group    = v1alpha1.ControlPlaneEndpointPoolGroupAnnotation
		port     = v1alpha1.ControlPlaneEndpointPortAnnotation
		variable = v1alpha1.ControlPlaneEndpointVariableAnnotation
	)
	tests := []struct {
		name        string
		annotations map[string]string
		want        optIn
		wantErr     string
	}{
		{"defaults", map[string]string{pool: "NetboxIPPool/prod"},
			optIn{pool: ipamv1.IPPoolReference{APIGroup: "ipam-bridge.github.io", Kind: "NetboxIPPool", Name: "prod"}, port: 6443}, ""},
		{"everything", map[string]string{pool: "InClusterIPPool/vips", group: "ipam.cluster.x-k8s.io", port: "443", variable: "controlPlaneIpAddr"},
			optIn{pool: ipamv1.IPPoolReference{APIGroup: "ipam.cluster.x-k8s.io", Kind: "InClusterIPPool", Name: "vips"}, port: 443,
				variable: "controlPlaneIpAddr"}, ""},
		{"no pool", map[string]string{port: "6443"}, optIn{}, "is missing"},
		{"no kind", map[string]string{pool: "prod"}, optIn{}, "want <Kind>/<name>"},
		{"lower-case kind", map[string]string{pool: "netboxippool/prod"}, optIn{}, "want <Kind>/<name>"},
		{"bad name", map[string]string{pool: "NetboxIPPool/Prod_1"}, optIn{}, "is not valid"},
		{"bad group", map[string]string{pool: "NetboxIPPool/prod", group: "Not A Group"}, optIn{}, "not an API group"},
		{"port zero", map[string]string{pool: "NetboxIPPool/prod", port: "0"}, optIn{}, "from 1 to 65535"},
		{"port too high", map[string]string{pool: "NetboxIPPool/prod", port: "65536"}, optIn{}, "from 1 to 65535"},
		{"port not a number", map[string]string{pool: "NetboxIPPool/prod", port: "https"}, optIn{}, "from 1 to 65535"},
		{"empty variable", map[string]string{pool: "NetboxIPPool/prod", variable: ""}, optIn{}, "want the name of a variable"},
		{"builtin variable", map[string]string{pool: "NetboxIPPool/prod", variable: "builtin"}, optIn{}, "want the name of a variable"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.True(t, optedIn(tt.annotations))
			got, err := parseOptIn(tt.annotations)
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
	assert.False(t, optedIn(map[string]string{"other": "x"}))
}
