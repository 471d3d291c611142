package netboxsim

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"strings"
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
		// NetBox 4.7.3 takes the version from the token, not the keyword.
		{"v2 token sent with Token", "Token " + v2Token, http.MethodGet, 200, ""},
		{"v1 token sent with Bearer", "Bearer " + v1Token, http.MethodGet, 200, ""},
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
	assert.Equal(t, "4.7.3", st["netbox-version"])
	requireKeys(t, st, "django-version", "hostname", "installed_apps", "plugins", "python-version", "rq-workers-running")

	untrusting := client(t, s)
	_, err := untrusting.try(http.MethodGet, "/api/status/", nil)
	require.Error(t, err, "a client without the CA must not connect")
	plain := New()
	defer plain.Close()
	assert.Nil(t, plain.CACertPEM(), "plain HTTP has no certificate")
}

// A chunked body reaches Django under gunicorn as no body at all, so NetBox
// answers as if the fields were missing (seen on NetBox 4.7.3).
func TestChunkedBodyReadsAsEmpty(t *testing.T) {
	s := newSim(t)
	req, err := http.NewRequest(http.MethodPost, s.URL()+"/api/extras/tags/",
		io.NopCloser(strings.NewReader(`{"name":"k8s","slug":"k8s"}`))) // unknown length: sent chunked
	require.NoError(t, err)
	req.Header.Set("Authorization", "Token "+v1Token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
	assert.JSONEq(t, `{"name":["This field is required."],"slug":["This field is required."]}`, string(body))
}
