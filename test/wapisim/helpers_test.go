package wapisim

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	ibclient "github.com/infobloxopen/infoblox-go-client/v2"
	"github.com/stretchr/testify/require"
)

const (
	adminUser  = "admin"
	writerUser = "cloud"
	readerUser = "viewer"
	password   = "infoblox"
	apiPrefix  = "/wapi/v2.12/"
)

// newSim starts a server with an admin (superuser), a writer and a
// read-only user, closed at cleanup.
func newSim(t *testing.T) *Server {
	t.Helper()
	s := New(
		WithUser(adminUser, password, Permissions{Write: true, Superuser: true}),
		WithUser(writerUser, password, Permissions{Write: true}),
		WithUser(readerUser, password, Permissions{}),
	)
	t.Cleanup(s.Close)
	return s
}

type apiClient struct {
	t          *testing.T
	base       string
	user, pass string
	hc         *http.Client
}

func client(t *testing.T, s *Server, user string) *apiClient {
	return &apiClient{t: t, base: s.URL(), user: user, pass: password, hc: &http.Client{}}
}

// do sends a request (path relative to /wapi/v2.12/ unless it starts with
// "/") with a JSON body (unless body is nil or a string, sent raw) and
// returns the status, body and response.
func (c *apiClient) do(method, path string, body any) (int, string, *http.Response) {
	c.t.Helper()
	resp, err := c.try(method, path, body)
	require.NoError(c.t, err)
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	require.NoError(c.t, err)
	return resp.StatusCode, string(out), resp
}

// try is do without failing on transport errors; the body is not read.
func (c *apiClient) try(method, path string, body any) (*http.Response, error) {
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
	if !strings.HasPrefix(path, "/") {
		path = apiPrefix + path
	}
	req, err := http.NewRequest(method, c.base+path, rd)
	require.NoError(c.t, err)
	req.Header.Set("Content-Type", "application/json")
	if c.user != "" {
		req.SetBasicAuth(c.user, c.pass)
	}
	return c.hc.Do(req)
}

// post creates an object and returns its reference, requiring 201.
func (c *apiClient) post(objtype string, body any) string {
	c.t.Helper()
	status, out, _ := c.do(http.MethodPost, objtype, body)
	require.Equal(c.t, http.StatusCreated, status, out)
	var ref string
	require.NoError(c.t, json.Unmarshal([]byte(out), &ref), out)
	return ref
}

// getList searches and decodes the result list, requiring 200.
func (c *apiClient) getList(path string) []map[string]any {
	c.t.Helper()
	status, out, _ := c.do(http.MethodGet, path, nil)
	require.Equal(c.t, http.StatusOK, status, out)
	var l []map[string]any
	require.NoError(c.t, json.Unmarshal([]byte(out), &l), out)
	return l
}

// wapiErr decodes a WAPI error body.
func wapiErr(t *testing.T, body string) map[string]string {
	t.Helper()
	var m map[string]string
	require.NoError(t, json.Unmarshal([]byte(body), &m), body)
	require.Len(t, m, 3, body)
	return m
}

// requireWAPIError checks status, content type and the three members. The
// "Error" member of database errors wraps the text as NIOS does.
func requireWAPIError(t *testing.T, status int, body string, resp *http.Response, wantStatus int, class, code, text string) {
	t.Helper()
	require.Equal(t, wantStatus, status, body)
	require.Equal(t, "application/json", resp.Header.Get("Content-Type"))
	errMember := class + ": " + text
	switch code {
	case codeData:
		errMember = class + ": None (IBDataError: IB.Data:" + text + ")"
	case codeDataConflict:
		errMember = class + ": None (IBDataConflictError: IB.Data.Conflict:" + text + ")"
	}
	require.Equal(t, map[string]string{"Error": errMember, "code": code, "text": text}, wapiErr(t, body))
}

// connector builds an infoblox-go-client connector for the server.
func connector(t *testing.T, s *Server, user string) *ibclient.Connector {
	t.Helper()
	scheme := "http"
	if s.ca != nil {
		scheme = "https"
	}
	conn, err := ibclient.NewConnector(
		ibclient.HostConfig{Scheme: scheme, Host: s.Host(), Port: s.Port(), Version: "2.12"},
		ibclient.AuthConfig{Username: user, Password: password},
		ibclient.NewTransportConfig("false", 10, 10),
		&ibclient.WapiRequestBuilder{}, &ibclient.WapiHttpRequestor{})
	require.NoError(t, err)
	return conn
}

func objectManager(t *testing.T, s *Server, user string) (*ibclient.Connector, ibclient.IBObjectManager) {
	conn := connector(t, s, user)
	return conn, ibclient.NewObjectManager(conn, "cmp", "tenant")
}
