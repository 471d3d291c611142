// Package fidelity checks that the WAPI simulator (test/wapisim) answers
// clients other than our backend as NIOS does. Its cases drive the
// simulator through infoblox-go-client's own object manager and connector,
// and with raw HTTP requests modelled on the WAPI reference's examples;
// each case asserts the whole answer, so it fails if the simulator's answer
// changes.
//
// The cases are compiled once per client version: this module's test
// (fidelity_test.go) runs them with the infoblox-go-client version pinned in
// go.mod, the nested module test/wapifidelity with v2.11.0. Both versions
// have the same object-manager API, so the cases are written once here.
package fidelity

import (
	"reflect"
	"regexp"
	"runtime"
	"testing"

	ibclient "github.com/infobloxopen/infoblox-go-client/v2"
	"github.com/stretchr/testify/require"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/wapisim"
)

const (
	// ClientModule is the module path of infoblox-go-client.
	ClientModule = "github.com/infobloxopen/infoblox-go-client/v2"

	user     = "admin"
	password = "infoblox"
	// wapiVersion is the WAPI version the cases speak, the default of our pools.
	wapiVersion = "2.12"
)

// ClientVersion is the version of infoblox-go-client linked into the
// running test binary, e.g. "v2.12.0", read from the source path the
// compiler recorded for one of its functions (".../v2@v2.12.0/objects.go"):
// test binaries carry no module list in their build info.
func ClientVersion(t *testing.T) string {
	t.Helper()
	fn := runtime.FuncForPC(reflect.ValueOf(ibclient.NewQueryParams).Pointer())
	require.NotNil(t, fn)
	file, _ := fn.FileLine(fn.Entry())
	m := regexp.MustCompile(`infoblox-go-client/v2@(v[^/]+)/`).FindStringSubmatch(file)
	require.NotNil(t, m, "cannot tell the client version from %s", file)
	return m[1]
}

// Run runs every fidelity case against fresh simulators.
func Run(t *testing.T) {
	t.Run("client", func(t *testing.T) { runClientCases(t) })
	t.Run("http", func(t *testing.T) { runHTTPCases(t) })
}

// env is what a case gets: a fresh simulator with an admin user and the
// client's connector and object manager for it.
type env struct {
	s    *wapisim.Server
	conn *ibclient.Connector
	om   ibclient.IBObjectManager
}

func newEnv(t *testing.T) *env {
	t.Helper()
	s := wapisim.New(wapisim.WithUser(user, password, wapisim.Permissions{Write: true, Superuser: true}))
	t.Cleanup(s.Close)
	conn, err := ibclient.NewConnector(
		ibclient.HostConfig{Scheme: "http", Host: s.Host(), Port: s.Port(), Version: wapiVersion},
		ibclient.AuthConfig{Username: user, Password: password},
		ibclient.NewTransportConfig("false", 10, 10),
		&ibclient.WapiRequestBuilder{}, &ibclient.WapiHttpRequestor{})
	require.NoError(t, err)
	return &env{s: s, conn: conn, om: ibclient.NewObjectManager(conn, "fidelity", "tenant")}
}

// ref returns the reference of the only stored object of a type.
func (e *env) ref(t *testing.T, objtype string) string {
	t.Helper()
	objs := e.s.Objects(objtype)
	require.Len(t, objs, 1, objtype)
	return objs[0].Ref
}
