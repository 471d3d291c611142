package main

import (
	"testing"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/api/v1alpha1"
)

func TestManagerOptionsFromFlags(t *testing.T) {
	tests := []struct {
		name           string
		args           []string
		wantLeader     bool
		wantLease      string
		wantLeaseNS    string
		wantClaims     int
		wantMetrics    string
		wantSecure     bool
		wantErrContain string
	}{
		{name: "defaults", wantLeader: true, wantLease: defaultLeaderElectionID, wantLeaseNS: defaultManagerNamespace,
			wantClaims: 10, wantMetrics: ":8443", wantSecure: true},
		{name: "the operator's namespace/name lease", args: []string{"--leader-election-id=ops/lease"},
			wantLeader: true, wantLease: "lease", wantLeaseNS: "ops", wantClaims: 10, wantMetrics: ":8443", wantSecure: true},
		{name: "a lease namespace of its own", args: []string{"--leader-election-namespace=other", "--manager-namespace=mgr"},
			wantLeader: true, wantLease: defaultLeaderElectionID, wantLeaseNS: "other", wantClaims: 10, wantMetrics: ":8443", wantSecure: true},
		{name: "conflicting lease namespaces", args: []string{"--leader-election-id=ops/lease", "--leader-election-namespace=other"},
			wantErrContain: `names namespace "ops"`},
		{name: "max-concurrent-reconciles sets the claim workers", args: []string{"--max-concurrent-reconciles=5"},
			wantLeader: true, wantLease: defaultLeaderElectionID, wantLeaseNS: defaultManagerNamespace, wantClaims: 5, wantMetrics: ":8443", wantSecure: true},
		{name: "unless the claim workers are given", args: []string{"--max-concurrent-reconciles=5", "--ipaddressclaim-concurrency=7"},
			wantLeader: true, wantLease: defaultLeaderElectionID, wantLeaseNS: defaultManagerNamespace, wantClaims: 7, wantMetrics: ":8443", wantSecure: true},
		{name: "metrics-bind-addr names the same endpoint", args: []string{"--metrics-bind-addr=:9000", "--leader-elect=false"},
			wantLease: defaultLeaderElectionID, wantLeaseNS: defaultManagerNamespace, wantClaims: 10, wantMetrics: ":9000", wantSecure: true},
		{name: "insecure diagnostics", args: []string{"--insecure-diagnostics"},
			wantLeader: true, wantLease: defaultLeaderElectionID, wantLeaseNS: defaultManagerNamespace, wantClaims: 10, wantMetrics: ":8443"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("POD_NAMESPACE", "")
			fs := pflag.NewFlagSet("manager", pflag.ContinueOnError)
			o := newOptions()
			o.addFlags(fs)
			require.NoError(t, fs.Parse(tt.args))
			opts, err := o.managerOptions()
			if tt.wantErrContain != "" {
				require.ErrorContains(t, err, tt.wantErrContain)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.wantLeader, opts.LeaderElection)
			assert.Equal(t, tt.wantLease, opts.LeaderElectionID)
			assert.Equal(t, tt.wantLeaseNS, opts.LeaderElectionNamespace)
			assert.Equal(t, tt.wantClaims, o.controllers.ClaimConcurrency)
			assert.Equal(t, tt.wantMetrics, opts.Metrics.BindAddress)
			assert.Equal(t, tt.wantSecure, opts.Metrics.SecureServing)
		})
	}
}

func TestAllowedEndpointsFromFlags(t *testing.T) {
	for _, tc := range []struct {
		name, arg, want, wantErr string
	}{
		{name: "unset allows every endpoint", want: "*"},
		{name: "empty, as the release's variable defaults to", arg: "--allowed-endpoints=", want: "*"},
		{name: "a list", arg: "--allowed-endpoints=https://netbox.example.com,https://*.grid.example.com:8443",
			want: "https://netbox.example.com:443,https://*.grid.example.com:8443"},
		{name: "a path is refused", arg: "--allowed-endpoints=https://netbox.example.com/api", wantErr: "--allowed-endpoints"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := pflag.NewFlagSet("manager", pflag.ContinueOnError)
			o := newOptions()
			o.addFlags(fs)
			var args []string
			if tc.arg != "" {
				args = append(args, tc.arg)
			}
			require.NoError(t, fs.Parse(args))
			_, err := o.managerOptions()
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, o.controllers.AllowedEndpoints.String())
		})
	}
}

func TestCacheKeepsWhatTheProviderReads(t *testing.T) {
	fs := pflag.NewFlagSet("manager", pflag.ContinueOnError)
	o := newOptions()
	o.addFlags(fs)
	require.NoError(t, fs.Parse(nil))
	opts, err := o.managerOptions()
	require.NoError(t, err)
	require.NotNil(t, opts.Cache.DefaultTransform)

	claim := &ipamv1.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Name: "c",
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "m"}},
		Annotations:   map[string]string{corev1.LastAppliedConfigAnnotation: "{}"}}}
	_, err = opts.Cache.DefaultTransform(claim)
	require.NoError(t, err)
	assert.Nil(t, claim.ManagedFields)
	assert.Empty(t, claim.Annotations)

	var clusterTransform func(any) (any, error)
	for obj, by := range opts.Cache.ByObject {
		if _, ok := obj.(*clusterv1.Cluster); ok {
			clusterTransform = by.Transform
		}
	}
	require.NotNil(t, clusterTransform, "Clusters have a transform of their own")
	cluster := &clusterv1.Cluster{Spec: clusterv1.ClusterSpec{Paused: ptr.To(true), Topology: clusterv1.Topology{Version: "v1.33.0"}}}
	_, err = clusterTransform(cluster)
	require.NoError(t, err)
	assert.True(t, *cluster.Spec.Paused)
	assert.Empty(t, cluster.Spec.Topology.Version)
}

// The binary's cache holds only the Secrets labelled as pools' credentials,
// whether it watches every namespace or one.
func TestCacheHoldsOnlyCredentialsSecrets(t *testing.T) {
	for _, args := range [][]string{nil, {"--namespace=tenant"}} {
		fs := pflag.NewFlagSet("manager", pflag.ContinueOnError)
		o := newOptions()
		o.addFlags(fs)
		require.NoError(t, fs.Parse(args))
		opts, err := o.managerOptions()
		require.NoError(t, err)
		var selector labels.Selector
		for obj, by := range opts.Cache.ByObject {
			if _, ok := obj.(*corev1.Secret); ok {
				selector = by.Label
			}
		}
		require.NotNil(t, selector, "%v: Secrets are cached unselected", args)
		assert.True(t, selector.Matches(labels.Set{v1alpha1.CredentialsLabel: "true"}), "%v", args)
		assert.False(t, selector.Matches(labels.Set{}), "%v", args)
		assert.False(t, selector.Matches(labels.Set{v1alpha1.CredentialsLabel: "false"}), "%v", args)
	}
}
