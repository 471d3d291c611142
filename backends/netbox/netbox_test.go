package netbox_test

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends/netbox"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/httpfault"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/netboxsim"
)

const token = "0123456789abcdef0123456789abcdef01234567"

// newSim starts a simulator with a write token and the given prefixes, each
// with its first usable address recorded as the gateway.
func newSim(t testing.TB, prefixes ...string) *netboxsim.Server {
	t.Helper()
	sim := netboxsim.New()
	t.Cleanup(sim.Close)
	sim.AddToken(token, true)
	for _, p := range prefixes {
		sim.AddPrefixWithGateway(p, netboxsim.PrefixOptions{})
	}
	return sim
}

func prefixSources(cidrs ...string) []netbox.Source {
	var out []netbox.Source
	for _, c := range cidrs {
		out = append(out, netbox.Source{Kind: netbox.SourcePrefix, CIDR: netip.MustParsePrefix(c)})
	}
	return out
}

func newBackend(t testing.TB, sim *netboxsim.Server, mutate ...func(*netbox.Config)) backends.Backend {
	t.Helper()
	cfg := netbox.Config{
		URL: sim.URL(), Token: token,
		HTTP: netbox.HTTPOptions{RetryWaitMin: time.Millisecond, RetryWaitMax: 5 * time.Millisecond},
	}
	for _, m := range mutate {
		m(&cfg)
	}
	b, err := netbox.New(cfg)
	require.NoError(t, err)
	return b
}

func withSources(s ...netbox.Source) func(*netbox.Config) {
	return func(c *netbox.Config) { c.Sources = s }
}

func claim(name string) backends.Claim {
	return backends.Claim{Marker: "ns/" + name, Namespace: "ns", Name: name, ClusterName: "c1"}
}

func marked(sim *netboxsim.Server, marker string) []netboxsim.IPAddress {
	var out []netboxsim.IPAddress
	for _, ip := range sim.IPAddresses() {
		if ip.CustomFields["capi_ipam_claim"] == marker {
			out = append(out, ip)
		}
	}
	return out
}

func TestAllocateIsIdempotentAndCostsTwoRequests(t *testing.T) {
	sim := newSim(t, "10.0.0.0/24")
	b := newBackend(t, sim, withSources(prefixSources("10.0.0.0/24")...))
	ctx := context.Background()
	_, err := b.Validate(ctx)
	require.NoError(t, err)

	sim.ResetCalls()
	first, err := b.Allocate(ctx, claim("a"))
	require.NoError(t, err)
	assert.Equal(t, netip.MustParsePrefix("10.0.0.2/24"), first.Address)
	assert.Equal(t, netip.MustParseAddr("10.0.0.1"), first.Gateway)
	calls := sim.Calls()
	require.Len(t, calls, 2, "a new claim: the marker search and the reservation")
	assert.Equal(t, "GET", calls[0].Method)
	assert.Contains(t, calls[0].Query, "cf_capi_ipam_claim__isw=ns%2Fa", "one value finds the marker and its planned form")
	assert.Equal(t, "POST", calls[1].Method)
	assert.Equal(t, "/api/ipam/prefixes/1/available-ips/", calls[1].Path)

	sim.ResetCalls()
	again, err := b.Allocate(ctx, claim("a"))
	require.NoError(t, err)
	assert.Equal(t, first, again)
	assert.Len(t, sim.Calls(), 1, "an existing reservation: the marker search only")
	assert.Len(t, marked(sim, "ns/a"), 1)
}

func TestAllocateStampsTheReservation(t *testing.T) {
	sim := newSim(t, "10.0.0.0/24")
	sim.AddTenant("Platform", "platform")
	sim.AddTag("Kubernetes", "kubernetes")
	sim.AddCustomField("owner_team", "exact")
	b := newBackend(t, sim, withSources(prefixSources("10.0.0.0/24")...), func(c *netbox.Config) {
		c.Reservation = netbox.Reservation{
			Status: "reserved", Role: "vip", TenantSlug: "platform",
			DNSNamePattern: "{{ .ClaimName }}.{{ .ClusterName }}.example.com",
			Tags:           []string{"kubernetes"}, CustomFields: map[string]string{"owner_team": "platform"},
		}
	})
	_, err := b.Allocate(context.Background(), claim("m0"))
	require.NoError(t, err)

	records := marked(sim, "ns/m0")
	require.Len(t, records, 1)
	r := records[0]
	assert.Equal(t, "reserved", r.Status)
	assert.Equal(t, "vip", r.Role)
	assert.NotZero(t, r.Tenant)
	assert.Equal(t, "m0.c1.example.com", r.DNSName)
	assert.Equal(t, "Cluster API claim ns/m0 of cluster c1", r.Description)
	assert.ElementsMatch(t, []string{"cluster-api-ipam", "kubernetes"}, r.Tags)
	assert.Equal(t, "platform", r.CustomFields["owner_team"])
}

// The first attempt took the source's last free address and its answer was
// lost; the resent request finds the source full. The claim adopts the
// first record instead of reporting exhaustion or moving to the next source.
func TestResentRequestThatFindsTheSourceFullAdopts(t *testing.T) {
	sim := newSim(t, "10.0.0.0/29", "10.0.1.0/24")
	for _, a := range []string{"10.0.0.2/29", "10.0.0.3/29", "10.0.0.4/29", "10.0.0.5/29"} {
		sim.AddIPAddress(a, netboxsim.IPOptions{})
	}
	b := newBackend(t, sim, withSources(prefixSources("10.0.0.0/29", "10.0.1.0/24")...))
	ctx := context.Background()
	_, err := b.Validate(ctx)
	require.NoError(t, err)
	sim.InjectFault(netboxsim.Fault{Kind: netboxsim.FaultLoseResponse, Method: "POST", PathContains: "available-ips"})

	alloc, err := b.Allocate(ctx, claim("a"))
	require.NoError(t, err)
	assert.Equal(t, "10.0.0.6/29", alloc.Address.String(), "the last address, taken by the lost attempt")
	assert.Equal(t, 2, sim.CountCalls("POST", "/api/ipam/prefixes/"), "the POST was resent and found the prefix full")
	assert.Len(t, marked(sim, "ns/a"), 1)
}

// What the provider writes fits NetBox's limits: a long description is cut
// to 200 characters, and a DNS name NetBox would refuse is reported.
func TestRenderedTextFitsNetBoxLimits(t *testing.T) {
	sim := newSim(t, "10.0.0.0/24")
	ctx := context.Background()
	long := newBackend(t, sim, withSources(prefixSources("10.0.0.0/24")...), func(c *netbox.Config) {
		c.Reservation.DescriptionPattern = strings.Repeat("ä", 180) + " {{ .ClaimName }} {{ .ClaimName }}"
	})
	alloc, err := long.Allocate(ctx, claim(strings.Repeat("n", 60)))
	require.NoError(t, err)
	records := marked(sim, "ns/"+strings.Repeat("n", 60))
	require.Len(t, records, 1)
	assert.Equal(t, 200, utf8.RuneCountInString(records[0].Description))
	assert.True(t, strings.HasSuffix(records[0].Description, "…"))
	assert.Equal(t, "10.0.0.2/24", alloc.Address.String())

	badDNS := newBackend(t, sim, withSources(prefixSources("10.0.0.0/24")...), func(c *netbox.Config) {
		c.Reservation.DNSNamePattern = "{{ .ClaimName }} of {{ .ClusterName }}"
	})
	_, err = badDNS.Allocate(ctx, claim("b"))
	require.ErrorIs(t, err, backends.ErrInvalidConfig)
	assert.Contains(t, err.Error(), "is not a DNS name")
	assert.Empty(t, marked(sim, "ns/b"), "nothing was reserved")
}

func TestServerErrorsAreRetried(t *testing.T) {
	sim := newSim(t, "10.0.0.0/24")
	b := newBackend(t, sim, withSources(prefixSources("10.0.0.0/24")...))
	sim.InjectFault(netboxsim.Fault{Kind: netboxsim.FaultStatus, Status: 502, Times: 2})
	sim.InjectFault(netboxsim.Fault{Kind: netboxsim.FaultStatus, Status: 503, Method: "POST", Times: 2})

	_, err := b.Allocate(context.Background(), claim("a"))
	require.NoError(t, err)
	assert.Len(t, marked(sim, "ns/a"), 1)
}

func TestPersistentServerErrorIsUnavailable(t *testing.T) {
	sim := newSim(t, "10.0.0.0/24")
	b := newBackend(t, sim, withSources(prefixSources("10.0.0.0/24")...))
	sim.InjectFault(netboxsim.Fault{Kind: netboxsim.FaultStatus, Status: 503, Times: 100})

	_, err := b.Validate(context.Background())
	require.ErrorIs(t, err, backends.ErrUnavailable)
	assert.Contains(t, err.Error(), "HTTP 503")
	assert.NotContains(t, err.Error(), "<html>", "a proxy's HTML page is not quoted")
}

func TestSourcesInOrderThenExhausted(t *testing.T) {
	sim := newSim(t, "10.0.0.0/30", "10.0.1.0/30")
	b := newBackend(t, sim, withSources(prefixSources("10.0.0.0/30", "10.0.1.0/30")...))
	ctx := context.Background()

	a, err := b.Allocate(ctx, claim("a"))
	require.NoError(t, err)
	assert.Equal(t, "10.0.0.2/30", a.Address.String())
	c, err := b.Allocate(ctx, claim("b"))
	require.NoError(t, err)
	assert.Equal(t, "10.0.1.2/30", c.Address.String(), "the second source once the first is full")
	assert.Equal(t, "10.0.1.1", c.Gateway.String())

	_, err = b.Allocate(ctx, claim("c"))
	require.ErrorIs(t, err, backends.ErrExhausted)
	assert.Contains(t, err.Error(), "prefix 10.0.0.0/30")
	assert.Contains(t, err.Error(), "prefix 10.0.1.0/30")
	assert.Contains(t, err.Error(), "Insufficient resources are available to satisfy the request")
}

func TestIPRangeAndVRFSources(t *testing.T) {
	sim := newSim(t)
	prod := sim.AddVRF("prod", "65000:1")
	sim.AddPrefix("10.5.0.0/24", netboxsim.PrefixOptions{}) // same CIDR in the global table
	sim.AddPrefix("10.5.0.0/24", netboxsim.PrefixOptions{VRF: prod})
	sim.AddIPAddress("10.5.0.1/24", netboxsim.IPOptions{VRF: prod})
	rangeID := sim.AddIPRange("10.6.0.10/24", "10.6.0.11/24", netboxsim.RangeOptions{VRF: prod})

	b := newBackend(t, sim, withSources(
		netbox.Source{Kind: netbox.SourceIPRange, ID: rangeID},
		netbox.Source{Kind: netbox.SourcePrefix, CIDR: netip.MustParsePrefix("10.5.0.0/24"), VRF: "prod"},
	))
	ctx := context.Background()
	usage, err := b.Validate(ctx)
	require.NoError(t, err)
	assert.Equal(t, backends.Usage{Total: 2 + 254, Used: 1}, usage)

	var got []string
	for _, name := range []string{"a", "b", "c"} {
		alloc, err := b.Allocate(ctx, claim(name))
		require.NoError(t, err)
		got = append(got, alloc.Address.String())
	}
	assert.Equal(t, []string{"10.6.0.10/24", "10.6.0.11/24", "10.5.0.2/24"}, got)
	for _, r := range sim.IPAddresses() {
		if r.CustomFields["capi_ipam_claim"] != nil {
			assert.Equal(t, prod, r.VRF, "%s is in the VRF of its source", r.Address)
		}
	}
	usage, err = b.Usage(ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(4), usage.Used)
}

func TestGatewayAndPrefixLength(t *testing.T) {
	tests := []struct {
		name    string
		mutate  func(*netbox.Config)
		address string
		gateway string
	}{
		{"first usable", func(*netbox.Config) {}, "10.0.0.2/24", "10.0.0.1"},
		{"explicit", func(c *netbox.Config) { c.Gateway.Address = netip.MustParseAddr("10.0.0.1") }, "10.0.0.2/24", "10.0.0.1"},
		{"none", func(c *netbox.Config) { c.Gateway.None = true }, "10.0.0.2/24", "invalid IP"},
		{"prefix length override", func(c *netbox.Config) { c.PrefixLength = 16 }, "10.0.0.2/16", "10.0.0.1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sim := newSim(t, "10.0.0.0/24")
			b := newBackend(t, sim, withSources(prefixSources("10.0.0.0/24")...), tt.mutate)
			alloc, err := b.Allocate(context.Background(), claim("a"))
			require.NoError(t, err)
			assert.Equal(t, tt.address, alloc.Address.String())
			assert.Equal(t, tt.gateway, alloc.Gateway.String())
		})
	}
}

// prefixLength 24 splits a /23 source in two: the gateway of the second
// half, 10.0.1.1, must be recorded too, or NetBox could hand it out.
func TestGatewayDerivedAfterPrefixLengthNarrowsTheSourceIsChecked(t *testing.T) {
	sim := newSim(t, "10.0.0.0/23")
	b := newBackend(t, sim, withSources(prefixSources("10.0.0.0/23")...), func(c *netbox.Config) { c.PrefixLength = 24 })
	ctx := context.Background()
	_, err := b.Validate(ctx)
	require.ErrorIs(t, err, backends.ErrInvalidConfig)
	assert.Contains(t, err.Error(), "gateway 10.0.1.1")

	sim.AddIPAddress("10.0.1.1/23", netboxsim.IPOptions{Description: "router"})
	_, err = b.Validate(ctx)
	require.NoError(t, err)
	alloc, err := b.Allocate(ctx, claim("a"))
	require.NoError(t, err)
	assert.Equal(t, "10.0.0.2/24", alloc.Address.String())
	assert.Equal(t, "10.0.0.1", alloc.Gateway.String())
}

func TestIPv6(t *testing.T) {
	sim := newSim(t, "2001:db8::/64")
	b := newBackend(t, sim, withSources(prefixSources("2001:db8::/64")...))
	usage, err := b.Validate(context.Background())
	require.NoError(t, err)
	assert.Equal(t, int64(math.MaxInt64), usage.Total, "2^64-1 saturates")
	alloc, err := b.Allocate(context.Background(), claim("a"))
	require.NoError(t, err)
	assert.Equal(t, "2001:db8::2/64", alloc.Address.String())
	assert.Equal(t, "2001:db8::1", alloc.Gateway.String())
}

func TestReleaseDeletesOnlyMarkedRecords(t *testing.T) {
	sim := newSim(t, "10.0.0.0/24")
	b := newBackend(t, sim, withSources(prefixSources("10.0.0.0/24")...))
	ctx := context.Background()
	a, err := b.Allocate(ctx, claim("a"))
	require.NoError(t, err)
	other, err := b.Allocate(ctx, claim("b"))
	require.NoError(t, err)

	require.NoError(t, b.Release(ctx, claim("a"), a.Reservation()))
	assert.Empty(t, marked(sim, "ns/a"))
	assert.Len(t, marked(sim, "ns/b"), 1, "other claims keep theirs")

	t.Run("releasing again is not an error", func(t *testing.T) {
		require.NoError(t, b.Release(ctx, claim("a"), a.Reservation()))
	})
	t.Run("a record whose marker was removed is left in place", func(t *testing.T) {
		id := marked(sim, "ns/b")[0].ID
		sim.EditIPAddress(id, func(ip *netboxsim.IPAddress) { ip.CustomFields["capi_ipam_claim"] = "someone-else" })
		err := b.Release(ctx, claim("b"), other.Reservation())
		require.ErrorIs(t, err, backends.ErrNotOwned)
		assert.Contains(t, err.Error(), "someone-else")
		assert.Len(t, marked(sim, "someone-else"), 1)
	})
	t.Run("lookup reports no reservation", func(t *testing.T) {
		_, err := b.Lookup(ctx, claim("a"))
		require.ErrorIs(t, err, backends.ErrNotFound)
	})
}

func TestLooseMarkerFieldDoesNotConfuseSimilarClaims(t *testing.T) {
	sim := newSim(t, "10.0.0.0/24")
	sim.AddTag("cluster-api-ipam", "cluster-api-ipam")
	sim.AddCustomField("capi_ipam_claim", "loose") // matches substrings
	b := newBackend(t, sim, withSources(prefixSources("10.0.0.0/24")...))
	ctx := context.Background()
	ten, err := b.Allocate(ctx, claim("m-10"))
	require.NoError(t, err)

	one, err := b.Allocate(ctx, claim("m-1"))
	require.NoError(t, err)
	assert.NotEqual(t, ten.Address, one.Address, "ns/m-1 is not ns/m-10")
}

func TestMarkerFieldWithFilteringDisabledNeedsSetup(t *testing.T) {
	sim := newSim(t, "10.0.0.0/24")
	sim.AddCustomField("capi_ipam_claim", "disabled")
	b := newBackend(t, sim, withSources(prefixSources("10.0.0.0/24")...))
	_, err := b.Validate(context.Background())
	require.ErrorIs(t, err, backends.ErrSetupRequired)
	assert.Contains(t, err.Error(), "filter logic to exact")
}

// A marker field that someone else creates while the pool's setup creates
// it is checked as a field found at first: one with filtering disabled is
// refused, and the refusal is not remembered as a setup done.
func TestMarkerFieldCreatedMeanwhileIsCheckedAsOneFound(t *testing.T) {
	tests := []struct {
		logic   string
		refused bool
	}{
		{"disabled", true},
		{"exact", false},
		{"loose", false},
	}
	for _, tt := range tests {
		t.Run(tt.logic, func(t *testing.T) {
			sim := newSim(t, "10.0.0.0/24")
			sim.InjectFault(netboxsim.Fault{Kind: httpfault.Before, Method: http.MethodPost, PathContains: "/api/extras/custom-fields/", Times: 1,
				Then: func() { sim.AddCustomField("capi_ipam_claim", tt.logic) }})
			b := newBackend(t, sim, withSources(prefixSources("10.0.0.0/24")...))
			_, err := b.Validate(context.Background())
			if !tt.refused {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, backends.ErrSetupRequired)
			assert.Contains(t, err.Error(), "filter logic to exact")

			sim.ResetCalls()
			_, err = b.Validate(context.Background())
			require.ErrorIs(t, err, backends.ErrSetupRequired, "refused again")
			assert.True(t, slices.ContainsFunc(sim.Calls(), func(c netboxsim.Call) bool { return strings.Contains(c.Path, "/api/extras/custom-fields/") }),
				"the next check reads the field again")
		})
	}
}

func TestAuthentication(t *testing.T) {
	v2 := "nbt_abcdefghijkl." + strings.Repeat("Z", 40)
	readOnly := strings.Repeat("b", 40)
	tests := []struct {
		name  string
		token string
		setup func(*netboxsim.Server)
		want  error
	}{
		{"v1 token", token, nil, nil},
		{"v2 token is sent as Bearer", v2, func(s *netboxsim.Server) { s.AddToken(v2, true) }, nil},
		{"unknown token", strings.Repeat("c", 40), nil, backends.ErrUnauthorized},
		{"read-only token cannot create the tag", readOnly, func(s *netboxsim.Server) { s.AddToken(readOnly, false) }, backends.ErrSetupRequired},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sim := newSim(t, "10.0.0.0/24")
			if tt.setup != nil {
				tt.setup(sim)
			}
			b := newBackend(t, sim, withSources(prefixSources("10.0.0.0/24")...), func(c *netbox.Config) { c.Token = tt.token })
			_, err := b.Validate(context.Background())
			if tt.want == nil {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, tt.want)
			assert.NotContains(t, err.Error(), tt.token, "the token is never quoted")
		})
	}
}

func TestTLS(t *testing.T) {
	sim := netboxsim.NewTLS()
	t.Cleanup(sim.Close)
	sim.AddToken(token, true)
	sim.AddPrefix("10.0.0.0/24", netboxsim.PrefixOptions{})
	sim.AddIPAddress("10.0.0.1/24", netboxsim.IPOptions{})
	cfg := func(mutate func(*netbox.Config)) netbox.Config {
		c := netbox.Config{URL: sim.URL(), Token: token, Sources: prefixSources("10.0.0.0/24"),
			HTTP: netbox.HTTPOptions{RetryMax: 1, RetryWaitMin: time.Millisecond, RetryWaitMax: time.Millisecond}}
		mutate(&c)
		return c
	}

	t.Run("a CA bundle that does not parse fails closed", func(t *testing.T) {
		_, err := netbox.New(cfg(func(c *netbox.Config) { c.CABundle = []byte("not a certificate") }))
		require.ErrorIs(t, err, backends.ErrInvalidConfig)
	})
	t.Run("an untrusted certificate is a configuration error with a hint", func(t *testing.T) {
		b, err := netbox.New(cfg(func(*netbox.Config) {}))
		require.NoError(t, err)
		_, err = b.Validate(context.Background())
		require.ErrorIs(t, err, backends.ErrInvalidConfig)
		assert.Contains(t, err.Error(), `"ca.crt"`)
	})
	t.Run("the CA bundle makes it trusted", func(t *testing.T) {
		b, err := netbox.New(cfg(func(c *netbox.Config) { c.CABundle = sim.CACertPEM() }))
		require.NoError(t, err)
		_, err = b.Validate(context.Background())
		require.NoError(t, err)
	})
	t.Run("skipping verification is an explicit opt-in", func(t *testing.T) {
		b, err := netbox.New(cfg(func(c *netbox.Config) { c.InsecureSkipTLSVerify = true }))
		require.NoError(t, err)
		_, err = b.Validate(context.Background())
		require.NoError(t, err)
	})
}

func TestConfigErrors(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*netbox.Config)
		want   string
	}{
		{"token with a newline", func(c *netbox.Config) { c.Token = token + "\n" }, "white space"},
		{"empty token", func(c *netbox.Config) { c.Token = "" }, "token is empty"},
		{"no sources", func(c *netbox.Config) { c.Sources = nil }, "no address source"},
		{"bad URL", func(c *netbox.Config) { c.URL = "netbox:8000" }, "absolute http or https URL"},
		{"bad pattern", func(c *netbox.Config) { c.Reservation.DNSNamePattern = "{{ .Nope }}" }, "dnsName pattern"},
		{"unclosed pattern", func(c *netbox.Config) { c.Reservation.DescriptionPattern = "{{ .ClaimName" }, "description pattern"},
		{"custom field naming the marker", func(c *netbox.Config) {
			c.Reservation.CustomFields = map[string]string{netbox.DefaultMarkerField: "default/other"}
		}, "claim marker"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := netbox.Config{URL: "http://127.0.0.1:1", Token: token, Sources: prefixSources("10.0.0.0/24")}
			tt.mutate(&c)
			_, err := netbox.New(c)
			require.ErrorIs(t, err, backends.ErrInvalidConfig)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

func TestConcurrentAllocationsAreDistinct(t *testing.T) {
	sim := newSim(t, "10.0.0.0/24")
	b := newBackend(t, sim, withSources(prefixSources("10.0.0.0/24")...))
	const n = 100
	got := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			alloc, err := b.Allocate(context.Background(), claim(fmt.Sprintf("m-%d", i)))
			assert.NoError(t, err)
			got[i] = alloc.Address.String()
		})
	}
	wg.Wait()
	seen := map[string]bool{}
	for _, a := range got {
		assert.False(t, seen[a], "duplicate %s", a)
		seen[a] = true
	}
}

func TestBackendsRacingToSetUpAFreshNetBoxBothSucceed(t *testing.T) {
	sim := newSim(t, "10.0.0.0/24", "10.1.0.0/24")
	a := newBackend(t, sim, withSources(prefixSources("10.0.0.0/24")...))
	b := newBackend(t, sim, withSources(prefixSources("10.1.0.0/24")...))
	var wg sync.WaitGroup
	for _, backend := range []backends.Backend{a, b} {
		wg.Go(func() {
			_, err := backend.Validate(context.Background())
			assert.NoError(t, err)
		})
	}
	wg.Wait()
}
