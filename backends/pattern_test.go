package backends_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends"
)

func TestPatternRender(t *testing.T) {
	claim := backends.Claim{Marker: "id/ns/c-0", Namespace: "ns", Name: "c-0", ClusterName: "prod", MachineName: "prod-md-0-x7k2p"}
	tests := []struct {
		name, pattern, want string
	}{
		{"empty", "", ""},
		{"machine", "{{ .MachineName }}.{{ .ClusterName }}.example.com", "prod-md-0-x7k2p.prod.example.com"},
		{"every field", "{{ .Namespace }}/{{ .ClaimName }} {{ .ClusterName }} {{ .MachineName }}", "ns/c-0 prod prod-md-0-x7k2p"},
		{"optional machine", "{{ .ClaimName }}{{ with .MachineName }} on {{ . }}{{ end }}", "c-0 on prod-md-0-x7k2p"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := backends.ParsePattern("test", tt.pattern)
			require.NoError(t, err)
			got, err := p.Render(claim)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestParsePatternRejectsUnknownFields(t *testing.T) {
	for _, pattern := range []string{"{{ .Machine }}", "{{ .NodeName }}", "{{ .MachineName"} {
		_, err := backends.ParsePattern("test", pattern)
		assert.ErrorIs(t, err, backends.ErrInvalidConfig, pattern)
	}
}
