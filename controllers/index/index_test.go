package index

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/api/v1alpha1"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/internal/apitest"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/pkg/scheme"
)

// TestClusterWideIndexAnswersListsAcrossNamespaces pins what
// indexClusterWide assumes of controller-runtime: a List with
// MatchingFields and no namespace finds, through an index registered under
// its name, the IPAddresses of every namespace, as the guard lists them.
// It also checks that a field indexed with IndexField, which keys objects
// under both names, answers such a List the same way.
func TestClusterWideIndexAnswersListsAcrossNamespaces(t *testing.T) {
	cfg, c := apitest.Server(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	nsA, nsB := apitest.Namespace(t, c), apitest.Namespace(t, c)

	const controlField = "test.control"
	informers, err := cache.New(cfg, cache.Options{Scheme: scheme.New()})
	require.NoError(t, err)
	require.NoError(t, indexClusterWide(ctx, informers, &ipamv1.IPAddress{}, AddressScopeField, addressScopeKeys))
	require.NoError(t, informers.IndexField(ctx, &ipamv1.IPAddress{}, controlField, addressScopeKeys))
	go func() { _ = informers.Start(ctx) }()
	require.True(t, informers.WaitForCacheSync(ctx))

	address := func(ns, name, ip string) *ipamv1.IPAddress {
		return &ipamv1.IPAddress{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: map[string]string{
				v1alpha1.ReservationEndpointAnnotation: "https://netbox.example", v1alpha1.ReservationScopeAnnotation: "vrf/global"}},
			Spec: ipamv1.IPAddressSpec{Address: ip, Prefix: ptr.To[int32](24), PoolRef: apitest.PoolRef,
				ClaimRef: ipamv1.IPAddressClaimReference{Name: name}},
		}
	}
	for _, a := range []*ipamv1.IPAddress{
		address(nsA, "a", "10.9.0.7"), address(nsB, "b", "10.9.0.7"), address(nsA, "other", "10.9.0.8"),
	} {
		require.NoError(t, c.Create(ctx, a))
	}

	key := AddressScopeKey("https://netbox.example", "vrf/global", "10.9.0.7")
	for _, field := range []string{AddressScopeField, controlField} {
		require.EventuallyWithT(t, func(ct *assert.CollectT) {
			list := &ipamv1.IPAddressList{}
			require.NoError(ct, informers.List(ctx, list, client.MatchingFields{field: key}))
			var names []string
			for _, a := range list.Items {
				if a.Namespace == nsA || a.Namespace == nsB {
					names = append(names, a.Namespace+"/"+a.Name)
				}
			}
			assert.ElementsMatch(ct, []string{nsA + "/a", nsB + "/b"}, names, "index %s", field)
		}, 10*time.Second, 50*time.Millisecond)
	}
}
