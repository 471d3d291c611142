package wapisim

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"net/http/cookiejar"
	"testing"

	ibclient "github.com/infobloxopen/infoblox-go-client/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestBasicAuth(t *testing.T) {
	s := newSim(t)
	tests := []struct {
		name, user, pass string
		wantStatus       int
	}{
		{"admin", adminUser, password, http.StatusOK},
		{"read-only user may read", readerUser, password, http.StatusOK},
		{"wrong password", adminUser, "nope", http.StatusUnauthorized},
		{"unknown user", "mallory", password, http.StatusUnauthorized},
		{"no credentials", "", "", http.StatusUnauthorized},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := client(t, s, tt.user)
			c.pass = tt.pass
			status, body, resp := c.do(http.MethodGet, "networkview", nil)
			require.Equal(t, tt.wantStatus, status, body)
			if tt.wantStatus == http.StatusUnauthorized {
				assert.Equal(t, "text/html; charset=iso-8859-1", resp.Header.Get("Content-Type"))
				assert.Contains(t, body, "<title>401 Authorization Required</title>")
				assert.Contains(t, resp.Header.Get("WWW-Authenticate"), "Basic realm=")
				assert.Empty(t, resp.Cookies())
			} else {
				assert.Contains(t, body, `"name": "default"`)
			}
		})
	}
	assert.Equal(t, 2, s.CountCalls("GET", "/wapi/"), "rejected requests are not recorded")
}

func TestSessionCookie(t *testing.T) {
	s := newSim(t)
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	c := client(t, s, adminUser)
	c.hc.Jar = jar

	status, _, resp := c.do(http.MethodGet, "networkview", nil)
	require.Equal(t, http.StatusOK, status)
	var ck *http.Cookie
	for _, x := range resp.Cookies() {
		if x.Name == "ibapauth" {
			ck = x
		}
	}
	require.NotNil(t, ck, "NIOS sets ibapauth after a login")
	assert.Contains(t, ck.Value, "user=admin")
	assert.True(t, ck.HttpOnly)

	c.user = "" // the cookie alone authenticates
	status, body, _ := c.do(http.MethodGet, "networkview", nil)
	assert.Equal(t, http.StatusOK, status, body)

	c.user, c.pass = adminUser, "wrong" // wrong credentials win over a cookie
	status, _, _ = c.do(http.MethodGet, "networkview", nil)
	assert.Equal(t, http.StatusUnauthorized, status)

	c.user, c.pass = "", ""
	status, _, _ = c.do(http.MethodPost, "logout", nil)
	require.Equal(t, http.StatusOK, status)
	status, _, _ = c.do(http.MethodGet, "networkview", nil)
	assert.Equal(t, http.StatusUnauthorized, status, "logout ends the session")
}

func TestPermissions(t *testing.T) {
	s := newSim(t)
	s.AddNetwork("default", "10.0.0.0/24", nil)
	tests := []struct {
		name, user, objtype string
		body                any
		wantStatus          int
	}{
		{"read-only user cannot create", readerUser, "fixedaddress",
			map[string]any{"ipv4addr": "10.0.0.5", "match_client": "RESERVED"}, http.StatusForbidden},
		{"writer creates a fixed address", writerUser, "fixedaddress",
			map[string]any{"ipv4addr": "10.0.0.6", "match_client": "RESERVED"}, http.StatusCreated},
		{"writer cannot define an EA", writerUser, "extensibleattributedef",
			map[string]any{"name": "CAPI-Claim", "type": "STRING"}, http.StatusForbidden},
		{"superuser defines an EA", adminUser, "extensibleattributedef",
			map[string]any{"name": "CAPI-Claim", "type": "STRING"}, http.StatusCreated},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, body, resp := client(t, s, tt.user).do(http.MethodPost, tt.objtype, tt.body)
			require.Equal(t, tt.wantStatus, status, body)
			if status == http.StatusForbidden {
				assert.Equal(t, "text/html; charset=iso-8859-1", resp.Header.Get("Content-Type"))
				assert.Contains(t, body, "You don't have permission to access /wapi/v2.12/"+tt.objtype)
			}
		})
	}
	assert.Len(t, s.Objects("fixedaddress"), 1)
	assert.Len(t, s.Objects("extensibleattributedef"), 1)

	t.Run("go client", func(t *testing.T) {
		_, om := objectManager(t, s, writerUser)
		name := "Other"
		_, err := om.CreateEADefinition(ibclient.EADefinition{Name: &name, Type: "STRING"})
		require.Error(t, err)
		assert.Contains(t, err.Error(), "403")
		_, om = objectManager(t, s, adminUser)
		def, err := om.CreateEADefinition(ibclient.EADefinition{Name: &name, Type: "STRING"})
		require.NoError(t, err)
		assert.Regexp(t, `^extensibleattributedef/\w+:Other$`, def.Ref)
		got, err := om.GetEADefinition("Other")
		require.NoError(t, err)
		assert.Equal(t, "STRING", got.Type)
	})
}

func TestTLSAndClientCertificates(t *testing.T) {
	s := NewTLS(WithUser(adminUser, password, Permissions{Write: true, Superuser: true}))
	t.Cleanup(s.Close)
	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(s.CACertPEM()))

	do := func(t *testing.T, certs []tls.Certificate, user string) int {
		hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: certs}}}
		req, err := http.NewRequest(http.MethodGet, s.URL()+apiPrefix+"networkview", nil)
		require.NoError(t, err)
		if user != "" {
			req.SetBasicAuth(user, password)
		}
		resp, err := hc.Do(req)
		require.NoError(t, err, "the server certificate verifies against CACertPEM")
		resp.Body.Close()
		return resp.StatusCode
	}
	pair := func(user string) []tls.Certificate {
		c, k := s.IssueClientCert(user)
		cert, err := tls.X509KeyPair(c, k)
		require.NoError(t, err)
		return []tls.Certificate{cert}
	}

	assert.Equal(t, http.StatusOK, do(t, nil, adminUser), "basic auth over TLS")
	assert.Equal(t, http.StatusUnauthorized, do(t, nil, ""))
	assert.Equal(t, http.StatusOK, do(t, pair(adminUser), ""), "a certificate of a known user authenticates")
	assert.Equal(t, http.StatusUnauthorized, do(t, pair("stranger"), ""), "a certificate of an unknown user does not")

	t.Run("go client with a client certificate", func(t *testing.T) {
		c, k := s.IssueClientCert(adminUser)
		conn, err := ibclient.NewConnector(
			ibclient.HostConfig{Scheme: "https", Host: s.Host(), Port: s.Port(), Version: "2.12"},
			ibclient.AuthConfig{ClientCert: c, ClientKey: k},
			ibclient.NewTransportConfig("false", 10, 10),
			&ibclient.WapiRequestBuilder{}, &ibclient.WapiHttpRequestor{})
		require.NoError(t, err)
		nv, err := ibclient.NewObjectManager(conn, "cmp", "tenant").GetNetworkView("default")
		require.NoError(t, err)
		assert.Equal(t, "default", *nv.Name)
	})
}

func TestVersionsAndUnknownPaths(t *testing.T) {
	s := newSim(t)
	c := client(t, s, adminUser)
	for _, v := range []string{"1.0", "1.4.2", "2.5", "2.12", "2.12.3", "2.13.6"} {
		status, body, _ := c.do(http.MethodGet, "/wapi/v"+v+"/networkview", nil)
		assert.Equal(t, http.StatusOK, status, "v%s: %s", v, body)
	}
	for _, v := range []string{"2.14", "3.0", "0.9", "2", "2.x", "2.05"} {
		status, body, resp := c.do(http.MethodGet, "/wapi/v"+v+"/networkview", nil)
		assert.Equal(t, http.StatusBadRequest, status, v)
		assert.Equal(t, "Version "+v+" not supported", body)
		assert.Equal(t, "text/plain", resp.Header.Get("Content-Type"))
	}

	status, body, resp := c.do(http.MethodGet, "record:bogus", nil)
	requireWAPIError(t, status, body, resp, 400, "AdmConProtoError", "Client.Ibap.Proto", "Unknown object type (record:bogus)")

	status, _, _ = c.do(http.MethodGet, "/api/whatever", nil)
	assert.Equal(t, http.StatusNotFound, status)
}
