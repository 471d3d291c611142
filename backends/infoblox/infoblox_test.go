package infoblox_test

import (
	"context"
	"net/netip"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends/infoblox"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/wapisim"
)

// The generic behaviour (idempotence, markers, release, exhaustion, IPv6) is
// in test/conformance. These tests cover what is Infoblox's own, and each of
// infoblox-go-client v2.12.0's quirks the backend works around.

const (
	user     = "capi"
	password = "s3cret-Passw0rd"
)

func newSim(t testing.TB, networks ...string) *wapisim.Server {
	t.Helper()
	sim := wapisim.NewTLS()
	t.Cleanup(sim.Close)
	sim.AddUser(user, password, wapisim.Permissions{Write: true, Superuser: true})
	for _, n := range networks {
		sim.AddNetwork("default", n, nil)
		sim.AddFixedAddress("default", netip.MustParsePrefix(n).Addr().Next().String(), nil)
	}
	return sim
}

func config(sim *wapisim.Server, networks ...string) infoblox.Config {
	port, _ := strconv.Atoi(sim.Port())
	cfg := infoblox.Config{
		Host: sim.Host(), Port: port, Username: user, Password: password, CABundle: sim.CACertPEM(),
		HTTP: infoblox.HTTPOptions{RetryWaitMin: time.Millisecond, RetryWaitMax: 5 * time.Millisecond},
	}
	for _, n := range networks {
		cfg.Sources = append(cfg.Sources, infoblox.Source{Network: netip.MustParsePrefix(n)})
	}
	return cfg
}

func newBackend(t testing.TB, cfg infoblox.Config) backends.Backend {
	t.Helper()
	b, err := infoblox.New(cfg)
	require.NoError(t, err)
	return b
}

func claim(name string) backends.Claim {
	return backends.Claim{Marker: "ns/" + name, Namespace: "ns", Name: name, ClusterName: "c1"}
}

func markedWith(sim *wapisim.Server, objectType, marker string) []wapisim.Object {
	var out []wapisim.Object
	for _, o := range sim.Objects(objectType) {
		if o.EAs[infoblox.DefaultMarkerEA] == marker {
			out = append(out, o)
		}
	}
	return out
}

func TestCallsPerClaimLife(t *testing.T) {
	sim := newSim(t, "10.0.0.0/24")
	b := newBackend(t, config(sim, "10.0.0.0/24"))
	ctx := context.Background()
	_, err := b.Validate(ctx)
	require.NoError(t, err)

	sim.ResetCalls()
	alloc, err := b.Allocate(ctx, claim("a"))
	require.NoError(t, err)
	assert.Equal(t, "10.0.0.2/24", alloc.Address.String())
	assert.Equal(t, 2, len(sim.Calls()), "marker search, POST with func:nextavailableip that answers with the object: %v", sim.Calls())
	assert.Equal(t, 1, sim.CountObjectCalls("POST", "fixedaddress"))

	sim.ResetCalls()
	require.NoError(t, b.Release(ctx, claim("a"), alloc.Reservation()))
	assert.Equal(t, 2, len(sim.Calls()), "marker search and a guarded DELETE (one request object): %v", sim.Calls())
	assert.Equal(t, 1, sim.CountObjectCalls("POST", "request"))
	assert.Empty(t, markedWith(sim, "fixedaddress", "ns/a"), "the record is deleted")
}

func TestFixedAddressIsAReservationStampedWithTheClaim(t *testing.T) {
	sim := newSim(t, "10.0.0.0/24")
	sim.AddEADefinition("Owner", "STRING")
	cfg := config(sim, "10.0.0.0/24")
	cfg.Reservation.ExtensibleAttributes = map[string]string{"Owner": "platform-team"}
	b := newBackend(t, cfg)

	_, err := b.Allocate(context.Background(), claim("m0"))
	require.NoError(t, err)
	objs := markedWith(sim, "fixedaddress", "ns/m0")
	require.Len(t, objs, 1)
	o := objs[0]
	assert.Equal(t, "RESERVED", o.MatchClient, "a reservation needs no MAC")
	assert.Equal(t, "c1-m0", o.Name)
	assert.Equal(t, "Cluster API claim ns/m0 of cluster c1", o.Comment)
	assert.Equal(t, "platform-team", o.EAs["Owner"])
	assert.Equal(t, "default", o.NetworkView)
}

func TestIPv6FixedAddressCarriesADUIDDerivedFromTheClaim(t *testing.T) {
	sim := newSim(t, "2001:db8::/64")
	b := newBackend(t, config(sim, "2001:db8::/64"))
	_, err := b.Allocate(context.Background(), claim("six"))
	require.NoError(t, err)
	objs := markedWith(sim, "ipv6fixedaddress", "ns/six")
	require.Len(t, objs, 1)
	assert.Regexp(t, `^00:04(:[0-9a-f]{2}){16}$`, objs[0].DUID, "DUID-UUID")

	// The DUID is a function of the marker, so the same claim gets the same one.
	require.NoError(t, b.Release(context.Background(), claim("six"), backends.Reservation{}))
	_, err = b.Allocate(context.Background(), claim("six"))
	require.NoError(t, err)
	assert.Equal(t, objs[0].DUID, markedWith(sim, "ipv6fixedaddress", "ns/six")[0].DUID)
}

func TestHostRecordWithAndWithoutDNS(t *testing.T) {
	for _, tc := range []struct {
		name     string
		dns      *infoblox.DNS
		wantName string
	}{
		{"DNS off", nil, "c1-m0"},
		{"DNS on", &infoblox.DNS{Zone: "k8s.example.com"}, "c1-m0.k8s.example.com"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sim := newSim(t, "10.0.0.0/24")
			sim.AddZone("default", "k8s.example.com")
			cfg := config(sim, "10.0.0.0/24")
			cfg.Reservation = infoblox.Reservation{ObjectType: infoblox.HostRecord, DNS: tc.dns}
			b := newBackend(t, cfg)
			alloc, err := b.Allocate(context.Background(), claim("m0"))
			require.NoError(t, err)
			hosts := markedWith(sim, "record:host", "ns/m0")
			require.Len(t, hosts, 1)
			assert.Equal(t, tc.wantName, hosts[0].Name)
			assert.Equal(t, tc.dns != nil, hosts[0].ConfigureForDNS)
			assert.Equal(t, []netip.Addr{alloc.Address.Addr()}, hosts[0].Addresses)
		})
	}
}

func TestRangeSourceStaysInsideTheRange(t *testing.T) {
	sim := newSim(t, "10.0.0.0/24")
	sim.AddRange("default", "10.0.0.100", "10.0.0.101")
	cfg := config(sim)
	cfg.Sources = []infoblox.Source{{Start: netip.MustParseAddr("10.0.0.100"), End: netip.MustParseAddr("10.0.0.101")}}
	b := newBackend(t, cfg)
	ctx := context.Background()

	u, err := b.Validate(ctx)
	require.NoError(t, err)
	assert.Equal(t, backends.Usage{Total: 2, Used: 0}, u)
	var got []string
	for _, n := range []string{"a", "b"} {
		alloc, err := b.Allocate(ctx, claim(n))
		require.NoError(t, err)
		got = append(got, alloc.Address.String())
		assert.Equal(t, "10.0.0.1", alloc.Gateway.String(), "the range's network's first usable address")
	}
	assert.Equal(t, []string{"10.0.0.100/24", "10.0.0.101/24"}, got, "prefix length of the range's network")
	_, err = b.Allocate(ctx, claim("c"))
	require.ErrorIs(t, err, backends.ErrExhausted)
	assert.Contains(t, err.Error(), "Cannot find 1 available IP address(es)", "the grid's own words")
}

// prefixLength 24 splits a /23 source in two: the gateway of the second
// half, 10.0.1.1, must be held in the grid too.
func TestGatewayDerivedAfterPrefixLengthNarrowsTheSourceIsChecked(t *testing.T) {
	sim := newSim(t, "10.0.0.0/23")
	cfg := config(sim, "10.0.0.0/23")
	cfg.PrefixLength = 24
	b := newBackend(t, cfg)
	ctx := context.Background()
	_, err := b.Validate(ctx)
	require.ErrorIs(t, err, backends.ErrInvalidConfig)
	assert.Contains(t, err.Error(), "gateway 10.0.1.1")

	sim.AddFixedAddress("default", "10.0.1.1", nil)
	_, err = b.Validate(ctx)
	require.NoError(t, err)
}

// Quirk: ReleaseIP reports success when its lookup fails. Release must fail
// instead, so the claim keeps its finalizer and the address is not leaked.
func TestReleaseFailsWhenTheGridCannotBeSearched(t *testing.T) {
	sim := newSim(t, "10.0.0.0/24")
	b := newBackend(t, config(sim, "10.0.0.0/24"))
	ctx := context.Background()
	alloc, err := b.Allocate(ctx, claim("r"))
	require.NoError(t, err)

	sim.InjectFault(wapisim.Fault{Kind: wapisim.FaultStatus, Status: 503, Method: "GET", Times: 100})
	err = b.Release(ctx, claim("r"), alloc.Reservation())
	require.ErrorIs(t, err, backends.ErrUnavailable)
	sim.ClearFaults()
	assert.Len(t, markedWith(sim, "fixedaddress", "ns/r"), 1, "nothing was released")

	require.NoError(t, b.Release(ctx, claim("r"), alloc.Reservation()))
	assert.Empty(t, markedWith(sim, "fixedaddress", "ns/r"))
}

// Quirk: a client certificate that does not parse makes infoblox-go-client
// call log.Fatal. Here it is a configuration error, and the process lives.
func TestClientCertificateThatDoesNotParseIsAnError(t *testing.T) {
	sim := newSim(t, "10.0.0.0/24")
	cfg := config(sim, "10.0.0.0/24")
	cfg.Username, cfg.Password = "", ""
	cfg.ClientCert = []byte("-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n")
	cfg.ClientKey = []byte("garbage")
	_, err := infoblox.New(cfg)
	require.ErrorIs(t, err, backends.ErrInvalidConfig)
	assert.Contains(t, err.Error(), "client certificate")
}

func TestClientCertificateAuthenticates(t *testing.T) {
	sim := newSim(t, "10.0.0.0/24")
	certPEM, keyPEM := sim.IssueClientCert(user)
	cfg := config(sim, "10.0.0.0/24")
	cfg.Username, cfg.Password = "", ""
	cfg.ClientCert, cfg.ClientKey = certPEM, keyPEM
	b := newBackend(t, cfg)
	_, err := b.Allocate(context.Background(), claim("cert"))
	require.NoError(t, err)
	assert.Len(t, markedWith(sim, "fixedaddress", "ns/cert"), 1)
}

// Quirk: a CA file that fails to load makes infoblox-go-client turn TLS
// verification off. Here TLS fails closed.
func TestTLSFailsClosed(t *testing.T) {
	sim := newSim(t, "10.0.0.0/24")
	t.Run("a CA bundle that does not parse is an error", func(t *testing.T) {
		cfg := config(sim, "10.0.0.0/24")
		cfg.CABundle = []byte("not a certificate")
		_, err := infoblox.New(cfg)
		require.ErrorIs(t, err, backends.ErrInvalidConfig)
	})
	t.Run("a server the CA does not vouch for is refused", func(t *testing.T) {
		other := wapisim.NewTLS()
		t.Cleanup(other.Close)
		cfg := config(sim, "10.0.0.0/24")
		cfg.CABundle = other.CACertPEM()
		sim.ResetCalls()
		_, err := newBackend(t, cfg).Validate(context.Background())
		require.ErrorIs(t, err, backends.ErrInvalidConfig)
		assert.Contains(t, err.Error(), "ca.crt")
		assert.Empty(t, sim.Calls(), "no request got through")
	})
	t.Run("without a CA bundle the system roots are used, not nothing", func(t *testing.T) {
		cfg := config(sim, "10.0.0.0/24")
		cfg.CABundle = nil
		_, err := newBackend(t, cfg).Validate(context.Background())
		require.ErrorIs(t, err, backends.ErrInvalidConfig)
	})
}

// Quirk: the client types only 404; everything else is WAPI's JSON body in
// a string. The backend reads the body, so each failure gets its reason.
func TestWAPIErrorsAreTyped(t *testing.T) {
	ctx := context.Background()
	t.Run("wrong password", func(t *testing.T) {
		sim := newSim(t, "10.0.0.0/24")
		cfg := config(sim, "10.0.0.0/24")
		cfg.Password = "wrong"
		_, err := newBackend(t, cfg).Validate(ctx)
		require.ErrorIs(t, err, backends.ErrUnauthorized)
		assert.NotContains(t, err.Error(), "wrong", "the password never appears in errors")
	})
	t.Run("read-only user", func(t *testing.T) {
		sim := newSim(t, "10.0.0.0/24")
		sim.AddEADefinition(infoblox.DefaultMarkerEA, "STRING")
		sim.AddUser("reader", password, wapisim.Permissions{})
		cfg := config(sim, "10.0.0.0/24")
		cfg.Username = "reader"
		b := newBackend(t, cfg)
		_, err := b.Validate(ctx)
		require.NoError(t, err, "reading is allowed")
		_, err = b.Allocate(ctx, claim("ro"))
		require.ErrorIs(t, err, backends.ErrForbidden)
		assert.NotErrorIs(t, err, backends.ErrExhausted)
	})
	t.Run("marker attribute missing and not superuser", func(t *testing.T) {
		sim := newSim(t, "10.0.0.0/24")
		sim.AddUser("writer", password, wapisim.Permissions{Write: true})
		cfg := config(sim, "10.0.0.0/24")
		cfg.Username = "writer"
		_, err := newBackend(t, cfg).Validate(ctx)
		require.ErrorIs(t, err, backends.ErrSetupRequired)
		assert.Contains(t, err.Error(), `STRING extensible attribute definition named "CAPI-IPAM-Claim"`)
	})
	t.Run("marker attribute of the wrong type", func(t *testing.T) {
		sim := newSim(t, "10.0.0.0/24")
		sim.AddEADefinition(infoblox.DefaultMarkerEA, "INTEGER")
		_, err := newBackend(t, config(sim, "10.0.0.0/24")).Validate(ctx)
		require.ErrorIs(t, err, backends.ErrInvalidConfig)
	})
	t.Run("network deleted after validation", func(t *testing.T) {
		sim := newSim(t, "10.0.0.0/24", "10.0.1.0/24")
		b := newBackend(t, config(sim, "10.0.1.0/24"))
		_, err := b.Validate(ctx)
		require.NoError(t, err)
		for _, n := range sim.Objects("network") {
			if n.Prefix.String() == "10.0.1.0/24" {
				sim.DeleteObject(n.Ref)
			}
		}
		_, err = b.Allocate(ctx, claim("orphan"))
		require.Error(t, err)
		assert.NotErrorIs(t, err, backends.ErrExhausted, "a missing network is not a full one: %v", err)
	})
}

func TestValidationNamesWhatIsWrong(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		mutate func(*infoblox.Config)
		kind   error
		text   string
	}{
		{"unknown network", func(c *infoblox.Config) {
			c.Sources = []infoblox.Source{{Network: netip.MustParsePrefix("10.9.0.0/24")}}
		}, backends.ErrNotFound, "network 10.9.0.0/24 does not exist"},
		{"unknown range", func(c *infoblox.Config) {
			c.Sources = []infoblox.Source{{Start: netip.MustParseAddr("10.0.0.50"), End: netip.MustParseAddr("10.0.0.60")}}
		}, backends.ErrNotFound, "range 10.0.0.50-10.0.0.60 does not exist"},
		{"unknown network view", func(c *infoblox.Config) { c.NetworkView = "lab" }, backends.ErrNotFound, `network view "lab"`},
		{"gateway outside the network", func(c *infoblox.Config) {
			c.Gateway.Address = netip.MustParseAddr("192.168.0.1")
		}, backends.ErrInvalidConfig, "outside network 10.0.0.0/24"},
		{"gateway not held in the grid", func(c *infoblox.Config) {
			c.Gateway.Address = netip.MustParseAddr("10.0.0.254")
		}, backends.ErrInvalidConfig, "nothing holds it in the grid"},
		{"undefined extensible attribute", func(c *infoblox.Config) {
			c.Reservation.ExtensibleAttributes = map[string]string{"Nope": "x"}
		}, backends.ErrInvalidConfig, `"Nope" is not defined`},
		{"missing DNS zone", func(c *infoblox.Config) {
			c.Reservation = infoblox.Reservation{ObjectType: infoblox.HostRecord, DNS: &infoblox.DNS{Zone: "nowhere.example"}}
		}, backends.ErrInvalidConfig, `no authoritative zone "nowhere.example"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sim := newSim(t, "10.0.0.0/24")
			cfg := config(sim, "10.0.0.0/24")
			tc.mutate(&cfg)
			_, err := newBackend(t, cfg).Validate(ctx)
			require.ErrorIs(t, err, tc.kind)
			assert.Contains(t, err.Error(), tc.text)
		})
	}
}

func TestConfigurationErrorsNeedNoRequest(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*infoblox.Config)
	}{
		{"no credentials", func(c *infoblox.Config) { c.Username, c.Password = "", "" }},
		{"both kinds of credentials", func(c *infoblox.Config) { c.ClientCert, c.ClientKey = []byte("x"), []byte("y") }},
		{"bad WAPI version", func(c *infoblox.Config) { c.WAPIVersion = "v2" }},
		{"bad name pattern", func(c *infoblox.Config) { c.Reservation.NamePattern = "{{ .Nope }}" }},
		{"DNS on a fixed address", func(c *infoblox.Config) { c.Reservation.DNS = &infoblox.DNS{Zone: "x"} }},
		{"marker set as an extra attribute", func(c *infoblox.Config) {
			c.Reservation.ExtensibleAttributes = map[string]string{infoblox.DefaultMarkerEA: "x"}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sim := newSim(t)
			cfg := config(sim, "10.0.0.0/24")
			tc.mutate(&cfg)
			_, err := infoblox.New(cfg)
			require.ErrorIs(t, err, backends.ErrInvalidConfig)
		})
	}
}
