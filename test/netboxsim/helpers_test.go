package netboxsim

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const (
	v1Token = "0123456789abcdef0123456789abcdef01234567"
	v2Token = "nbt_k3yk3yk3yk3y.s3cr3ts3cr3ts3cr3ts3cr3ts3cr3t"
	roToken = "fedcba9876543210fedcba9876543210fedcba98"
)

// newSim starts a server with a write-enabled v1 token, closed at cleanup.
func newSim(t *testing.T) *Server {
	t.Helper()
	s := New()
	t.Cleanup(s.Close)
	s.AddToken(v1Token, true)
	return s
}

type apiClient struct {
	t    *testing.T
	base string
	auth string
	hc   *http.Client
}

func client(t *testing.T, s *Server) *apiClient {
	return &apiClient{t: t, base: s.URL(), auth: "Token " + v1Token, hc: &http.Client{}}
}

// do sends a request with a JSON body (unless body is nil or a string,
// which is sent raw) and returns the status, body and response.
func (c *apiClient) do(method, path string, body any) (int, []byte, *http.Response) {
	c.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		require.NoError(c.t, err)
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, c.base+path, rd)
	require.NoError(c.t, err)
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.auth != "" {
		req.Header.Set("Authorization", c.auth)
	}
	resp, err := c.hc.Do(req)
	require.NoError(c.t, err)
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	require.NoError(c.t, err)
	return resp.StatusCode, out, resp
}

// try is do without failing the test on transport errors.
func (c *apiClient) try(method, path string, body any) (*http.Response, error) {
	raw, _ := json.Marshal(body)
	req, err := http.NewRequest(method, c.base+path, bytes.NewReader(raw))
	require.NoError(c.t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", c.auth)
	resp, err := c.hc.Do(req)
	if err == nil {
		_, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
	}
	return resp, err
}

func (c *apiClient) getJSON(path string, wantStatus int) any {
	c.t.Helper()
	status, body, _ := c.do(http.MethodGet, path, nil)
	require.Equal(c.t, wantStatus, status, string(body))
	return decode(c.t, body)
}

func decode(t *testing.T, b []byte) any {
	t.Helper()
	var v any
	require.NoError(t, json.Unmarshal(b, &v), string(b))
	return v
}

func obj(t *testing.T, v any) map[string]any {
	t.Helper()
	m, ok := v.(map[string]any)
	require.True(t, ok, "expected an object, got %T: %v", v, v)
	return m
}

func list(t *testing.T, v any) []any {
	t.Helper()
	l, ok := v.([]any)
	require.True(t, ok, "expected a list, got %T: %v", v, v)
	return l
}

// addresses extracts "address" from each object of a list.
func addresses(t *testing.T, v any) []string {
	t.Helper()
	var out []string
	for _, e := range list(t, v) {
		out = append(out, obj(t, e)["address"].(string))
	}
	return out
}

// requireKeys checks the keys go-netbox's strict decoder insists on.
func requireKeys(t *testing.T, m map[string]any, keys ...string) {
	t.Helper()
	for _, k := range keys {
		require.Contains(t, m, k)
	}
}
