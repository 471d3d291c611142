package netboxsim

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestAuthentication(t *testing.T) {
	s := newSim(t)
	s.AddToken(v2Token, true)
	s.AddToken(roToken, false)

	tests := []struct {
		name       string
		auth       string
		method     string
		wantStatus int
		wantDetail string
	}{
		{"no header", "", http.MethodGet, 403, "Authentication credentials were not provided."},
		{"unknown scheme", "Basic dXNlcjpwYXNz", http.MethodGet, 403, "Authentication credentials were not provided."},
		{"unknown v1", "Token 1111111111111111111111111111111111111111", http.MethodGet, 403, "Invalid v1 token"},
		{"unknown v2", "Bearer nbt_nope.nope", http.MethodGet, 403, "Invalid v2 token"},
		{"v2 token sent as v1", "Token " + v2Token, http.MethodGet, 403, "Invalid v1 token"},
		{"v1 token sent as bearer", "Bearer " + v1Token, http.MethodGet, 403, "Invalid v2 token"},
		{"keyword only", "Token", http.MethodGet, 403, "Invalid token header. No credentials provided."},
		{"valid v1", "Token " + v1Token, http.MethodGet, 200, ""},
		{"valid v2", "Bearer " + v2Token, http.MethodGet, 200, ""},
		{"keyword is case-insensitive", "bearer " + v2Token, http.MethodGet, 200, ""},
		{"read-only token reads", "Token " + roToken, http.MethodGet, 200, ""},
		{"read-only token writes", "Token " + roToken, http.MethodPost, 403, "You do not have permission to perform this action."},
		{"write token writes", "Token " + v1Token, http.MethodPost, 201, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := client(t, s)
			c.auth = tt.auth
			var body any
			if tt.method == http.MethodPost {
				body = map[string]any{"name": tt.name, "slug": "t-" + tt.name[:3] + tt.name[len(tt.name)-3:]}
			}
			status, raw, _ := c.do(tt.method, "/api/extras/tags/", body)
			require.Equal(t, tt.wantStatus, status, string(raw))
			if tt.wantDetail != "" {
				assert.Equal(t, map[string]any{"detail": tt.wantDetail}, decode(t, raw))
			}
		})
	}

	t.Run("rejected requests are not recorded", func(t *testing.T) {
		s.ResetCalls()
		c := client(t, s)
		c.auth = ""
		c.do(http.MethodGet, "/api/status/", nil)
		assert.Empty(t, s.Calls())
	})
}

func TestStatusOverTLS(t *testing.T) {
	s := NewTLS()
	t.Cleanup(s.Close)
	s.AddToken(v1Token, false)

	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(s.CACertPEM()))
	c := client(t, s)
	c.hc = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	require.Regexp(t, `^https://127\.0\.0\.1:\d+$`, s.URL())

	st := obj(t, c.getJSON("/api/status/", 200))
	assert.Equal(t, "4.3.7", st["netbox-version"])
	requireKeys(t, st, "django-version", "installed-apps", "plugins", "python-version", "rq-workers-running")

	untrusting := client(t, s)
	_, err := untrusting.try(http.MethodGet, "/api/status/", nil)
	require.Error(t, err, "a client without the CA must not connect")
	plain := New()
	defer plain.Close()
	assert.Nil(t, plain.CACertPEM(), "plain HTTP has no certificate")
}
