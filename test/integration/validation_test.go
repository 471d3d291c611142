package integration

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/api/v1alpha1"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/netboxsim"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/netboxtarget"
)

func (f *fixture) waitNotPaused(claim *ipamv1.IPAddressClaim) {
	f.t.Helper()
	require.EventuallyWithT(f.t, func(c *assert.CollectT) {
		got := &ipamv1.IPAddressClaim{}
		require.NoError(c, k8s.Get(f.ctx, client.ObjectKeyFromObject(claim), got))
		assert.True(c, conditions.IsFalse(got, clusterv1.PausedCondition), "Paused condition false")
	}, waitTimeout, pollInterval)
}

// Bad input ends in a condition with a reason a human can act on, on the
// pool and on the claims that wait for it.
func TestBadPoolInputGivesAClearCondition(t *testing.T) {
	tests := []struct {
		name      string
		setup     func(f *fixture) *v1alpha1.NetboxIPPool
		reason    string
		inMessage string
	}{
		{
			name: "missing Secret",
			setup: func(f *fixture) *v1alpha1.NetboxIPPool {
				return f.createNetboxPool("pool", "10.40.0.0/24", func(s *v1alpha1.NetboxIPPoolSpec) {
					s.Connection.CredentialsSecretRef.Name = "does-not-exist"
				})
			},
			reason: v1alpha1.CredentialsSecretNotFoundReason, inMessage: "does-not-exist",
		},
		{
			name: "Secret without a token",
			setup: func(f *fixture) *v1alpha1.NetboxIPPool {
				f.createSecretData(f.ns, "empty", map[string][]byte{"username": []byte("admin")})
				return f.createNetboxPool("pool", "10.40.0.0/24", func(s *v1alpha1.NetboxIPPoolSpec) {
					s.Connection.CredentialsSecretRef.Name = "empty"
				})
			},
			reason: v1alpha1.InvalidCredentialsSecretReason, inMessage: `"token"`,
		},
		{
			name: "wrong token",
			setup: func(f *fixture) *v1alpha1.NetboxIPPool {
				f.createSecret(f.ns, "wrong", strings.Repeat("0", 40))
				return f.createNetboxPool("pool", "10.40.0.0/24", func(s *v1alpha1.NetboxIPPoolSpec) {
					s.Connection.CredentialsSecretRef.Name = "wrong"
				})
			},
			reason: v1alpha1.AuthenticationFailedReason, inMessage: "HTTP 403",
		},
		{
			name: "unknown prefix",
			setup: func(f *fixture) *v1alpha1.NetboxIPPool {
				return f.createNetboxPool("pool", "10.99.0.0/24")
			},
			reason: v1alpha1.SourceNotFoundReason, inMessage: "10.99.0.0/24",
		},
		{
			name: "unknown prefix id",
			setup: func(f *fixture) *v1alpha1.NetboxIPPool {
				return f.createNetboxPool("pool", "", withSources(v1alpha1.NetboxAddressSource{Prefix: &v1alpha1.NetboxPrefixSource{ID: ptr.To[int32](4242)}}))
			},
			reason: v1alpha1.SourceNotFoundReason, inMessage: "4242",
		},
		{
			name: "unknown VRF",
			setup: func(f *fixture) *v1alpha1.NetboxIPPool {
				return f.createNetboxPool("pool", "", withSources(v1alpha1.NetboxAddressSource{Prefix: &v1alpha1.NetboxPrefixSource{CIDR: "10.40.0.0/24", VRF: "nope"}}))
			},
			reason: v1alpha1.SourceNotFoundReason, inMessage: `VRF "nope"`,
		},
		{
			name: "gateway outside the prefix",
			setup: func(f *fixture) *v1alpha1.NetboxIPPool {
				return f.createNetboxPool("pool", "10.40.0.0/24", func(s *v1alpha1.NetboxIPPoolSpec) {
					s.Gateway.Address = "192.168.1.1"
				})
			},
			reason: v1alpha1.InvalidConfigurationReason, inMessage: "192.168.1.1 is outside prefix 10.40.0.0/24",
		},
		{
			name: "gateway not recorded in NetBox",
			setup: func(f *fixture) *v1alpha1.NetboxIPPool {
				return f.createNetboxPool("pool", "10.40.0.0/24", func(s *v1alpha1.NetboxIPPoolSpec) {
					s.Gateway.Address = "10.40.0.254"
				})
			},
			reason: v1alpha1.InvalidConfigurationReason, inMessage: "nothing holds it in NetBox",
		},
		{
			name: "gateway derived after prefixLength narrows the source, not recorded",
			setup: func(f *fixture) *v1alpha1.NetboxIPPool {
				f.seedNetwork("10.44.0.0/23")
				return f.createNetboxPool("pool", "10.44.0.0/23", func(s *v1alpha1.NetboxIPPoolSpec) {
					s.PrefixLength = ptr.To[int32](24)
				})
			},
			reason: v1alpha1.InvalidConfigurationReason, inMessage: "gateway 10.44.1.1",
		},
		{
			// The API server cannot see the family of a prefix named by id.
			name: "prefixLength longer than the family of a prefix named by id",
			setup: func(f *fixture) *v1alpha1.NetboxIPPool {
				id := f.seedPrefix("10.45.0.0/24", netboxsim.PrefixOptions{})
				return f.createNetboxPool("pool", "", withSources(v1alpha1.NetboxAddressSource{Prefix: &v1alpha1.NetboxPrefixSource{ID: ptr.To(id)}}),
					func(s *v1alpha1.NetboxIPPoolSpec) { s.PrefixLength = ptr.To[int32](64) })
			},
			reason: v1alpha1.InvalidConfigurationReason, inMessage: "prefixLength 64 is longer than an IPv4 address",
		},
		{
			name: "unknown tenant",
			setup: func(f *fixture) *v1alpha1.NetboxIPPool {
				return f.createNetboxPool("pool", "10.40.0.0/24", func(s *v1alpha1.NetboxIPPoolSpec) {
					s.Reservation.Tenant = "nobody"
				})
			},
			reason: v1alpha1.SourceNotFoundReason, inMessage: `tenant "nobody"`,
		},
		{
			name: "DNS name pattern naming an unknown field",
			setup: func(f *fixture) *v1alpha1.NetboxIPPool {
				return f.createNetboxPool("pool", "10.40.0.0/24", func(s *v1alpha1.NetboxIPPoolSpec) {
					s.Reservation.DNSNamePattern = "{{ .Machine }}.example.com"
				})
			},
			reason: v1alpha1.InvalidConfigurationReason, inMessage: "Machine",
		},
		{
			name: "unreachable NetBox",
			setup: func(f *fixture) *v1alpha1.NetboxIPPool {
				return f.createNetboxPool("pool", "10.40.0.0/24", func(s *v1alpha1.NetboxIPPoolSpec) {
					s.Connection.URL = "http://127.0.0.1:1"
				})
			},
			reason: v1alpha1.BackendUnavailableReason, inMessage: "127.0.0.1:1",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			f.seedPrefix("10.40.0.0/24", netboxsim.PrefixOptions{})
			pool := tt.setup(f)

			cond := f.waitPoolReason(pool, metav1.ConditionFalse, tt.reason)
			assert.Contains(t, cond.Message, tt.inMessage)
			f.waitEvent(f.ns, pool.Name, tt.reason)

			claim := f.createClaim("machine", pool.Name)
			claimCond := f.waitClaimReason(claim, ipamv1.IPAddressClaimReadyPoolNotReadyReason)
			assert.Contains(t, claimCond.Message, tt.inMessage, "the claim says why")
			assert.Empty(t, f.markedRecords())
		})
	}
}

func TestFixedSecretMakesThePoolReady(t *testing.T) {
	f := newFixture(t)
	f.seedPrefix("10.41.0.0/24", netboxsim.PrefixOptions{})
	f.createSecret(f.ns, "rotating", strings.Repeat("1", 40))
	pool := f.createNetboxPool("pool", "10.41.0.0/24", func(s *v1alpha1.NetboxIPPoolSpec) {
		s.Connection.CredentialsSecretRef.Name = "rotating"
	})
	f.waitPoolReason(pool, metav1.ConditionFalse, v1alpha1.AuthenticationFailedReason)
	claim := f.createClaim("machine", "pool")
	f.waitClaimReason(claim, ipamv1.IPAddressClaimReadyPoolNotReadyReason)

	secret := &corev1.Secret{}
	require.NoError(t, k8s.Get(f.ctx, client.ObjectKey{Namespace: f.ns, Name: "rotating"}, secret))
	secret.Data[v1alpha1.NetboxTokenKey] = []byte(f.token)
	require.NoError(t, k8s.Update(f.ctx, secret))

	f.waitPoolReady(pool)
	f.waitBound(claim)
}

func TestReadOnlyTokenGivesAClearCondition(t *testing.T) {
	f := newFixture(t)
	f.seedPrefix("10.42.0.0/24", netboxsim.PrefixOptions{})
	readOnly := strings.Repeat("a", 40)
	f.sim.AddToken(readOnly, false)
	f.createSecret(f.ns, "read-only", readOnly)

	t.Run("without the provider's tag and field in NetBox", func(t *testing.T) {
		netboxtarget.SimOnly(t, "a real NetBox of this run already holds the tag and field")
		pool := f.createNetboxPool("setup", "10.42.0.0/24", func(s *v1alpha1.NetboxIPPoolSpec) {
			s.Connection.CredentialsSecretRef.Name = "read-only"
		})
		cond := f.waitPoolReason(pool, metav1.ConditionFalse, v1alpha1.SetupRequiredReason)
		assert.Contains(t, cond.Message, `tag "cluster-api-ipam"`)
	})
	t.Run("with them, the first refused allocation marks the pool with the permission named", func(t *testing.T) {
		f.sim.AddTag("cluster-api-ipam", "cluster-api-ipam")
		f.sim.AddCustomField("capi_ipam_claim", "exact")
		pool := f.createNetboxPool("pool", "10.42.0.0/24", func(s *v1alpha1.NetboxIPPoolSpec) {
			s.Connection.CredentialsSecretRef.Name = "read-only"
		})
		f.waitPoolReady(pool)
		claim := f.createClaim("machine", "pool")
		poolCond := f.waitPoolReason(pool, metav1.ConditionFalse, v1alpha1.PermissionDeniedReason)
		assert.Contains(t, poolCond.Message, "You do not have permission to perform this action.")
		cond := f.waitClaimReason(claim, ipamv1.IPAddressClaimReadyPoolNotReadyReason)
		assert.Contains(t, cond.Message, "You do not have permission to perform this action.")
	})
}

func TestInvalidSpecsAreRejectedByTheAPIServer(t *testing.T) {
	f := newFixture(t)
	tests := []struct {
		name    string
		mutate  func(*v1alpha1.NetboxIPPoolSpec)
		message string
	}{
		{"bad CIDR", func(s *v1alpha1.NetboxIPPoolSpec) { s.Sources[0].Prefix.CIDR = "10.0.0.300/24" }, "cidr must be a network address"},
		{"CIDR with host bits", func(s *v1alpha1.NetboxIPPoolSpec) { s.Sources[0].Prefix.CIDR = "10.0.0.5/24" }, "cidr must be a network address"},
		{"prefix and range together", func(s *v1alpha1.NetboxIPPoolSpec) {
			s.Sources[0].IPRange = &v1alpha1.NetboxIPRangeSource{ID: ptr.To[int32](1)}
		}, "exactly one of prefix or ipRange"},
		{"prefix by id and cidr", func(s *v1alpha1.NetboxIPPoolSpec) { s.Sources[0].Prefix.ID = ptr.To[int32](3) }, "exactly one of id or cidr"},
		{"vrf with id", func(s *v1alpha1.NetboxIPPoolSpec) {
			s.Sources[0].Prefix = &v1alpha1.NetboxPrefixSource{ID: ptr.To[int32](3), VRF: "prod"}
		}, "vrf selects a prefix by cidr"},
		{"range of two families", func(s *v1alpha1.NetboxIPPoolSpec) {
			s.Sources[0] = v1alpha1.NetboxAddressSource{IPRange: &v1alpha1.NetboxIPRangeSource{Start: "10.0.0.1", End: "2001:db8::1"}}
		}, "same IP family"},
		{"range without end", func(s *v1alpha1.NetboxIPPoolSpec) {
			s.Sources[0] = v1alpha1.NetboxAddressSource{IPRange: &v1alpha1.NetboxIPRangeSource{Start: "10.0.0.1"}}
		}, "start and end go together"},
		{"no sources", func(s *v1alpha1.NetboxIPPoolSpec) { s.Sources = nil }, "spec.sources"},
		{"URL without scheme", func(s *v1alpha1.NetboxIPPoolSpec) { s.Connection.URL = "netbox.example.com" }, "absolute http or https URL"},
		{"gateway not an address", func(s *v1alpha1.NetboxIPPoolSpec) { s.Gateway.Address = "10.0.0.0/24" }, "must be an IPv4 or IPv6 address"},
		{"gateway address with policy None", func(s *v1alpha1.NetboxIPPoolSpec) {
			s.Gateway = v1alpha1.Gateway{Address: "10.0.0.1", Policy: v1alpha1.GatewayNone}
		}, "exclude each other"},
		{"unknown status", func(s *v1alpha1.NetboxIPPoolSpec) { s.Reservation.Status = "taken" }, "Unsupported value"},
		{"prefix length out of range", func(s *v1alpha1.NetboxIPPoolSpec) { s.PrefixLength = ptr.To[int32](129) }, "prefixLength"},
		{"negative request rate", func(s *v1alpha1.NetboxIPPoolSpec) {
			s.Connection.RateLimit = &v1alpha1.RateLimit{RequestsPerSecond: -1}
		}, "spec.connection.rateLimit.requestsPerSecond"},
		{"too many concurrent requests", func(s *v1alpha1.NetboxIPPoolSpec) {
			s.Connection.RateLimit = &v1alpha1.RateLimit{MaxConcurrentRequests: 1001}
		}, "spec.connection.rateLimit.maxConcurrentRequests"},
		{"custom field naming the marker", func(s *v1alpha1.NetboxIPPoolSpec) {
			s.Reservation.CustomFields = map[string]string{"capi_ipam_claim": "default/someone-else"}
		}, "customFields cannot set capi_ipam_claim"},
		{"child prefixes from an IP range", func(s *v1alpha1.NetboxIPPoolSpec) {
			s.ChildPrefixes = &v1alpha1.NetboxChildPrefixes{ChildPrefixes: v1alpha1.ChildPrefixes{Length: 28}}
			s.Sources = append(s.Sources, v1alpha1.NetboxAddressSource{IPRange: &v1alpha1.NetboxIPRangeSource{ID: ptr.To[int32](1)}})
		}, "every source must be a prefix"},
		{"child prefixes no longer than the source", func(s *v1alpha1.NetboxIPPoolSpec) {
			s.ChildPrefixes = &v1alpha1.NetboxChildPrefixes{ChildPrefixes: v1alpha1.ChildPrefixes{Length: 24}}
		}, "longer than every source prefix"},
		{"IPv4 child prefixes beyond /32", func(s *v1alpha1.NetboxIPPoolSpec) {
			s.ChildPrefixes = &v1alpha1.NetboxChildPrefixes{ChildPrefixes: v1alpha1.ChildPrefixes{Length: 64}}
		}, "fit its family"},
		{"child prefixes with a prefix length", func(s *v1alpha1.NetboxIPPoolSpec) {
			s.ChildPrefixes = &v1alpha1.NetboxChildPrefixes{ChildPrefixes: v1alpha1.ChildPrefixes{Length: 28}}
			s.PrefixLength = ptr.To[int32](28)
		}, "hands out networks"},
		{"child prefixes with a gateway", func(s *v1alpha1.NetboxIPPoolSpec) {
			s.ChildPrefixes = &v1alpha1.NetboxChildPrefixes{ChildPrefixes: v1alpha1.ChildPrefixes{Length: 28}}
			s.Gateway.Address = "10.0.0.1"
		}, "hands out networks"},
		{"child prefixes with a DNS name", func(s *v1alpha1.NetboxIPPoolSpec) {
			s.ChildPrefixes = &v1alpha1.NetboxChildPrefixes{ChildPrefixes: v1alpha1.ChildPrefixes{Length: 28}}
			s.Reservation.DNSNamePattern = "{{ .MachineName }}"
		}, "fields of IP addresses"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pool := &v1alpha1.NetboxIPPool{
				ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "invalid"},
				Spec:       f.poolSpec("10.0.0.0/24"),
			}
			tt.mutate(&pool.Spec)
			err := k8s.Create(f.ctx, pool)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.message)
		})
	}
}

// The token appears nowhere a human or another program can read: not in
// the manager's logs, events or conditions, whatever goes wrong.
func TestTokensNeverLeak(t *testing.T) {
	f := newFixture(t)
	f.seedPrefix("10.43.0.0/24", netboxsim.PrefixOptions{})
	wrong := "nbt_leakcheck12." + strings.Repeat("z", 40)
	f.createSecret(f.ns, "wrong", wrong)
	bad := f.createNetboxPool("bad", "10.43.0.0/24", func(s *v1alpha1.NetboxIPPoolSpec) {
		s.Connection.CredentialsSecretRef.Name = "wrong"
	})
	good := f.createNetboxPool("good", "10.43.0.0/24")
	f.waitPoolReason(bad, metav1.ConditionFalse, v1alpha1.AuthenticationFailedReason)
	f.waitPoolReady(good)
	f.sim.InjectFault(netboxsim.Fault{Kind: netboxsim.FaultStatus, Status: 500, Method: "POST", PathContains: "available-ips", Times: 10})
	failing := f.createClaim("failing", "good")
	f.waitClaimReason(failing, ipamv1.IPAddressClaimReadyAllocationFailedReason)
	f.sim.ClearFaults()
	f.waitBound(failing)
	f.createClaim("waiting", "bad")
	f.waitClaimReason(&ipamv1.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "waiting"}}, ipamv1.IPAddressClaimReadyPoolNotReadyReason)

	var readable strings.Builder
	readable.WriteString(managerLogs.String())
	for _, e := range f.events(f.ns, "bad") {
		readable.WriteString(e.Note)
	}
	for _, name := range []string{"good", "failing", "waiting"} {
		for _, e := range f.events(f.ns, name) {
			readable.WriteString(e.Note)
		}
	}
	for _, obj := range []client.Object{bad, good, failing, &ipamv1.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "waiting"}}} {
		require.NoError(t, k8s.Get(f.ctx, client.ObjectKeyFromObject(obj), obj))
		for _, c := range obj.(conditions.Getter).GetConditions() {
			readable.WriteString(c.Message)
		}
	}
	require.NotEmpty(t, readable.String())
	for _, token := range []string{wrong, f.token, "leakcheck12"} {
		assert.NotContains(t, readable.String(), token)
	}
}

// TestPrefixLengthBeyondTheFamilyIsRefused: a prefixLength longer than an
// IPv4 source's addresses is refused by the API server, before anything is
// reserved; an IPv6 source takes it.
func TestPrefixLengthBeyondTheFamilyIsRefused(t *testing.T) {
	f := newFixture(t)
	secret := v1alpha1.SecretReference{Name: "netbox"}
	netboxSpec := func(cidr string) v1alpha1.NetboxIPPoolSpec {
		return v1alpha1.NetboxIPPoolSpec{
			Connection:   v1alpha1.NetboxConnection{URL: "https://netbox.example.com", CredentialsSecretRef: secret},
			Sources:      []v1alpha1.NetboxAddressSource{prefixSource(cidr)},
			PrefixLength: ptr.To[int32](64),
		}
	}
	infobloxSpec := func(cidr string) v1alpha1.InfobloxIPPoolSpec {
		return v1alpha1.InfobloxIPPoolSpec{
			Connection:   v1alpha1.InfobloxConnection{Host: "gm.example.com", CredentialsSecretRef: secret},
			Sources:      []v1alpha1.InfobloxAddressSource{{Network: &v1alpha1.InfobloxNetworkSource{CIDR: cidr}}},
			PrefixLength: ptr.To[int32](64),
		}
	}
	meta := func(name string) metav1.ObjectMeta { return metav1.ObjectMeta{Namespace: f.ns, Name: name} }
	global := func(name string) metav1.ObjectMeta { return metav1.ObjectMeta{Name: f.ns + "-" + name} }
	tests := []struct {
		name    string
		pool    client.Object
		refused bool
	}{
		{"NetboxIPPool, IPv4", &v1alpha1.NetboxIPPool{ObjectMeta: meta("nb4"), Spec: netboxSpec("10.46.0.0/24")}, true},
		{"GlobalNetboxIPPool, IPv4", &v1alpha1.GlobalNetboxIPPool{ObjectMeta: global("nb4"), Spec: netboxSpec("10.46.0.0/24")}, true},
		{"InfobloxIPPool, IPv4", &v1alpha1.InfobloxIPPool{ObjectMeta: meta("ib4"), Spec: infobloxSpec("10.46.0.0/24")}, true},
		{"GlobalInfobloxIPPool, IPv4", &v1alpha1.GlobalInfobloxIPPool{ObjectMeta: global("ib4"), Spec: infobloxSpec("10.46.0.0/24")}, true},
		{"NetboxIPPool, IPv6", &v1alpha1.NetboxIPPool{ObjectMeta: meta("nb6"), Spec: netboxSpec("2001:db8:46::/48")}, false},
		{"InfobloxIPPool, IPv6", &v1alpha1.InfobloxIPPool{ObjectMeta: meta("ib6"), Spec: infobloxSpec("2001:db8:46::/48")}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := k8s.Create(f.ctx, tt.pool, client.DryRunAll)
			if !tt.refused {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), "prefixLength must be at most 32 when a source is IPv4")
		})
	}
}
