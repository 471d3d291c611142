package integration

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/api/v1alpha1"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends/infoblox"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/wapisim"
)

// The tests here are Infoblox's own; the contract, marker and concurrency
// tests run for InfobloxIPPool through forEachSystem.

func (f *fixture) wapi() *wapisim.Server { return f.sys.(*infobloxSystem).sim }

func (f *fixture) createInfobloxPool(name, cidr string, mutate func(*v1alpha1.InfobloxIPPoolSpec)) *v1alpha1.InfobloxIPPool {
	f.t.Helper()
	pool := f.sys.newPool(f.ns, name, cidr, f.secret, false).(*v1alpha1.InfobloxIPPool)
	pool.Labels = f.labels()
	if mutate != nil {
		mutate(&pool.Spec)
	}
	require.NoError(f.t, k8s.Create(f.ctx, pool))
	return pool
}

func TestInfobloxBadInputGivesAClearCondition(t *testing.T) {
	certPEMOf := func(f *fixture) []byte { c, _ := f.wapi().IssueClientCert("capi"); return c }
	tests := []struct {
		name      string
		setup     func(f *fixture) *v1alpha1.InfobloxIPPool
		reason    string
		inMessage string
	}{
		{
			name: "client certificate that does not parse",
			setup: func(f *fixture) *v1alpha1.InfobloxIPPool {
				f.createSecretData(f.ns, "bad-cert", map[string][]byte{
					v1alpha1.InfobloxClientCertKey: []byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"),
					v1alpha1.InfobloxClientKeyKey:  []byte("not a key"),
				})
				return f.createInfobloxPool("pool", "10.60.0.0/24", func(s *v1alpha1.InfobloxIPPoolSpec) {
					s.Connection.CredentialsSecretRef.Name = "bad-cert"
				})
			},
			reason: v1alpha1.InvalidCredentialsSecretReason, inMessage: `"tls.crt" and "tls.key" are not a PEM certificate and matching key`,
		},
		{
			name: "certificate without its key",
			setup: func(f *fixture) *v1alpha1.InfobloxIPPool {
				f.createSecretData(f.ns, "half-cert", map[string][]byte{v1alpha1.InfobloxClientCertKey: certPEMOf(f)})
				return f.createInfobloxPool("pool", "10.60.0.0/24", func(s *v1alpha1.InfobloxIPPoolSpec) {
					s.Connection.CredentialsSecretRef.Name = "half-cert"
				})
			},
			reason: v1alpha1.InvalidCredentialsSecretReason, inMessage: `needs both "tls.crt" and "tls.key"`,
		},
		{
			name: "CA bundle that does not parse",
			setup: func(f *fixture) *v1alpha1.InfobloxIPPool {
				data := f.sys.secretData()
				data[v1alpha1.CABundleKey] = []byte("not PEM")
				f.createSecretData(f.ns, "bad-ca", data)
				return f.createInfobloxPool("pool", "10.60.0.0/24", func(s *v1alpha1.InfobloxIPPoolSpec) {
					s.Connection.CredentialsSecretRef.Name = "bad-ca"
				})
			},
			reason: v1alpha1.InvalidCredentialsSecretReason, inMessage: `"ca.crt" holds no PEM certificate`,
		},
		{
			name: "wrong password",
			setup: func(f *fixture) *v1alpha1.InfobloxIPPool {
				data := f.sys.secretData()
				data[v1alpha1.InfobloxPasswordKey] = []byte("leakcheck-password")
				f.createSecretData(f.ns, "wrong", data)
				return f.createInfobloxPool("pool", "10.60.0.0/24", func(s *v1alpha1.InfobloxIPPoolSpec) {
					s.Connection.CredentialsSecretRef.Name = "wrong"
				})
			},
			reason: v1alpha1.AuthenticationFailedReason, inMessage: "HTTP 401",
		},
		{
			name: "marker attribute missing and the user may not define it",
			setup: func(f *fixture) *v1alpha1.InfobloxIPPool {
				f.wapi().AddUser("writer", "writer-pw", wapisim.Permissions{Write: true})
				data := f.sys.secretData()
				data[v1alpha1.InfobloxUsernameKey], data[v1alpha1.InfobloxPasswordKey] = []byte("writer"), []byte("writer-pw")
				f.createSecretData(f.ns, "writer", data)
				return f.createInfobloxPool("pool", "10.60.0.0/24", func(s *v1alpha1.InfobloxIPPoolSpec) {
					s.Connection.CredentialsSecretRef.Name = "writer"
				})
			},
			reason: v1alpha1.SetupRequiredReason, inMessage: `ask a grid administrator to add a STRING extensible attribute definition named "CAPI-IPAM-Claim"`,
		},
		{
			name: "unknown network",
			setup: func(f *fixture) *v1alpha1.InfobloxIPPool {
				return f.createInfobloxPool("pool", "10.61.0.0/24", nil)
			},
			reason: v1alpha1.SourceNotFoundReason, inMessage: `network 10.61.0.0/24 does not exist in network view "default"`,
		},
		{
			name: "gateway nothing holds",
			setup: func(f *fixture) *v1alpha1.InfobloxIPPool {
				return f.createInfobloxPool("pool", "10.60.0.0/24", func(s *v1alpha1.InfobloxIPPoolSpec) {
					s.Gateway.Address = "10.60.0.254"
				})
			},
			reason: v1alpha1.InvalidConfigurationReason, inMessage: "nothing holds it in the grid",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newInfobloxFixture(t)
			f.seedNetwork("10.60.0.0/24")
			pool := tt.setup(f)
			cond := f.waitPoolReason(pool, metav1.ConditionFalse, tt.reason)
			assert.Contains(t, cond.Message, tt.inMessage)
			f.waitEvent(f.ns, pool.Name, tt.reason)

			claim := f.createClaim("machine", pool.Name)
			cond = f.waitClaimReason(claim, ipamv1.IPAddressClaimReadyPoolNotReadyReason)
			assert.Contains(t, cond.Message, tt.inMessage)
			assert.NotContains(t, managerLogs.String(), "leakcheck-password")
		})
	}
}

func TestInfobloxSetupRequiredClearsOnceTheAttributeExists(t *testing.T) {
	f := newInfobloxFixture(t)
	f.seedNetwork("10.62.0.0/24")
	f.wapi().AddUser("writer", "writer-pw", wapisim.Permissions{Write: true})
	data := f.sys.secretData()
	data[v1alpha1.InfobloxUsernameKey], data[v1alpha1.InfobloxPasswordKey] = []byte("writer"), []byte("writer-pw")
	f.createSecretData(f.ns, "writer", data)
	pool := f.createInfobloxPool("pool", "10.62.0.0/24", func(s *v1alpha1.InfobloxIPPoolSpec) {
		s.Connection.CredentialsSecretRef.Name = "writer"
	})
	f.waitPoolReason(pool, metav1.ConditionFalse, v1alpha1.SetupRequiredReason)

	// The grid administrator adds the definition, and someone nudges the pool.
	f.wapi().AddEADefinition(infoblox.DefaultMarkerEA, "STRING")
	f.update(pool, func() { pool.Annotations = map[string]string{"example.com/nudge": "1"} })
	f.waitPoolReady(pool)
	f.waitBound(f.createClaim("machine", "pool"))
}

// The first claim refused for a user that may read but not write makes the
// pool PermissionDenied at once; the claim waits for the pool, with its
// message.
func TestInfobloxReadOnlyUserGivesPermissionDenied(t *testing.T) {
	f := newInfobloxFixture(t)
	f.seedNetwork("10.63.0.0/24")
	f.wapi().AddEADefinition(infoblox.DefaultMarkerEA, "STRING")
	f.wapi().AddUser("reader", "reader-pw", wapisim.Permissions{})
	data := f.sys.secretData()
	data[v1alpha1.InfobloxUsernameKey], data[v1alpha1.InfobloxPasswordKey] = []byte("reader"), []byte("reader-pw")
	f.createSecretData(f.ns, "reader", data)
	pool := f.createInfobloxPool("pool", "10.63.0.0/24", func(s *v1alpha1.InfobloxIPPoolSpec) {
		s.Connection.CredentialsSecretRef.Name = "reader"
	})
	f.waitPoolReady(pool)

	claim := f.createClaim("machine", "pool")
	poolCond := f.waitPoolReason(pool, metav1.ConditionFalse, v1alpha1.PermissionDeniedReason)
	assert.Contains(t, poolCond.Message, "HTTP 403")
	cond := f.waitClaimReason(claim, ipamv1.IPAddressClaimReadyPoolNotReadyReason)
	assert.Contains(t, cond.Message, "HTTP 403")
	assert.Empty(t, f.markedRecords())
}

func TestInfobloxHostRecordWithDNSAndClientCertificate(t *testing.T) {
	f := newInfobloxFixture(t)
	f.seedNetwork("10.64.0.0/24")
	f.wapi().AddZone("default", "k8s.example.com")
	f.wapi().AddEADefinition("Owner", "STRING")
	certPEM, keyPEM := f.wapi().IssueClientCert("capi")
	f.createSecretData(f.ns, "cert", map[string][]byte{
		v1alpha1.InfobloxClientCertKey: certPEM, v1alpha1.InfobloxClientKeyKey: keyPEM, v1alpha1.CABundleKey: f.wapi().CACertPEM(),
	})
	pool := f.createInfobloxPool("pool", "10.64.0.0/24", func(s *v1alpha1.InfobloxIPPoolSpec) {
		s.Connection.CredentialsSecretRef.Name = "cert"
		s.Reservation = v1alpha1.InfobloxReservation{
			ObjectType:           v1alpha1.InfobloxHostRecord,
			NamePattern:          "{{ .ClaimName }}.{{ .ClusterName }}",
			DNS:                  &v1alpha1.InfobloxDNS{Zone: "k8s.example.com"},
			ExtensibleAttributes: map[string]string{"Owner": "platform"},
		}
	})
	f.waitPoolReady(pool)
	f.createCluster("edge")

	address := f.waitBound(f.createClaim("cp-0", "pool", inCluster("edge")))
	assert.Equal(t, "10.64.0.2", address.Spec.Address)
	assert.Equal(t, int32(24), ptr.Deref(address.Spec.Prefix, 0))
	var hosts []wapisim.Object
	for _, o := range f.wapi().Objects("record:host") {
		if o.EAs[infoblox.DefaultMarkerEA] == f.marker("cp-0") {
			hosts = append(hosts, o)
		}
	}
	require.Len(t, hosts, 1)
	assert.Equal(t, "cp-0.edge.k8s.example.com", hosts[0].Name)
	assert.True(t, hosts[0].ConfigureForDNS)
	assert.Equal(t, "platform", hosts[0].EAs["Owner"])
	assert.Equal(t, "Cluster API claim "+f.ns+"/cp-0 of cluster edge", hosts[0].Comment)
}

func TestInvalidInfobloxSpecsAreRejectedByTheAPIServer(t *testing.T) {
	f := newInfobloxFixture(t)
	tests := []struct {
		name    string
		mutate  func(*v1alpha1.InfobloxIPPoolSpec)
		message string
	}{
		{"host with a scheme", func(s *v1alpha1.InfobloxIPPoolSpec) { s.Connection.Host = "https://grid.example.com" }, "host must be a DNS name or an IP address"},
		{"bad WAPI version", func(s *v1alpha1.InfobloxIPPoolSpec) { s.Connection.WAPIVersion = "v2.12" }, "wapiVersion"},
		{"network and range in one source", func(s *v1alpha1.InfobloxIPPoolSpec) {
			s.Sources[0].Range = &v1alpha1.InfobloxRangeSource{Start: "10.0.0.1", End: "10.0.0.9"}
		}, "exactly one of network or range must be set"},
		{"range of two families", func(s *v1alpha1.InfobloxIPPoolSpec) {
			s.Sources = []v1alpha1.InfobloxAddressSource{{Range: &v1alpha1.InfobloxRangeSource{Start: "10.0.0.1", End: "2001:db8::9"}}}
		}, "start and end must be of the same IP family"},
		{"network not on its boundary", func(s *v1alpha1.InfobloxIPPoolSpec) { s.Sources[0].Network.CIDR = "10.0.0.7/24" }, "cidr must be a network address"},
		{"DNS on a fixed address", func(s *v1alpha1.InfobloxIPPoolSpec) {
			s.Reservation.DNS = &v1alpha1.InfobloxDNS{Zone: "k8s.example.com"}
		}, "dns applies to host records only"},
		{"machine MAC on a host record", func(s *v1alpha1.InfobloxIPPoolSpec) {
			s.Reservation = v1alpha1.InfobloxReservation{ObjectType: v1alpha1.InfobloxHostRecord, MACAddress: v1alpha1.InfobloxMACMachine}
		}, "macAddress Machine applies to fixed addresses only"},
		{"unknown MAC source", func(s *v1alpha1.InfobloxIPPoolSpec) { s.Reservation.MACAddress = "BareMetalHost" }, "macAddress"},
		{"zone with a trailing dot", func(s *v1alpha1.InfobloxIPPoolSpec) {
			s.Reservation = v1alpha1.InfobloxReservation{ObjectType: v1alpha1.InfobloxHostRecord, DNS: &v1alpha1.InfobloxDNS{Zone: "k8s.example.com."}}
		}, "zone must be a DNS name without a trailing dot"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pool := f.sys.newPool(f.ns, "invalid", "10.0.0.0/24", f.secret, false).(*v1alpha1.InfobloxIPPool)
			tt.mutate(&pool.Spec)
			err := k8s.Create(f.ctx, pool)
			require.Error(t, err)
			assert.True(t, strings.Contains(err.Error(), tt.message), "%v", err)
		})
	}
}
