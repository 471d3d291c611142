package claim

import (
	"context"
	"errors"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/api/v1alpha1"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/pkg/poolkind"
)

func TestRequestOf(t *testing.T) {
	annotated := func(v string) map[string]string { return map[string]string{v1alpha1.RequestedAddressAnnotation: v} }
	netboxPool := func(pre v1alpha1.PreAllocations) poolkind.Pool {
		return &v1alpha1.NetboxIPPool{ObjectMeta: metav1.ObjectMeta{Name: "pool"}, Spec: v1alpha1.NetboxIPPoolSpec{PreAllocations: pre}}
	}
	globalPool := func(pre v1alpha1.PreAllocations) poolkind.Pool {
		return &v1alpha1.GlobalInfobloxIPPool{ObjectMeta: metav1.ObjectMeta{Name: "pool"}, Spec: v1alpha1.InfobloxIPPoolSpec{PreAllocations: pre}}
	}
	for _, tc := range []struct {
		name        string
		annotations map[string]string
		pool        poolkind.Pool
		want        string // "" for none
		from        string
		err         string // "" for none
	}{
		{name: "nothing requested", pool: netboxPool(nil)},
		{name: "another claim's pre-allocation", pool: netboxPool(v1alpha1.PreAllocations{"other": "10.0.0.5"})},
		{name: "the annotation", annotations: annotated("10.0.0.5"), pool: netboxPool(nil), want: "10.0.0.5", from: "annotation"},
		{name: "an IPv6 annotation", annotations: annotated("2001:db8::5"), pool: netboxPool(nil), want: "2001:db8::5", from: "annotation"},
		{name: "an annotation with a prefix length", annotations: annotated("10.0.0.5/24"), pool: netboxPool(nil), err: "not an IPv4 or IPv6 address"},
		{name: "an empty annotation", annotations: annotated(""), pool: netboxPool(nil), err: "not an IPv4 or IPv6 address"},
		{name: "an annotation with a zone", annotations: annotated("fe80::1%eth0"), pool: netboxPool(nil), err: "has a zone"},
		{name: "an IPv4-mapped annotation", annotations: annotated("::ffff:10.0.0.5"), pool: netboxPool(nil), err: "write 10.0.0.5"},
		{name: "a pre-allocation by name", pool: netboxPool(v1alpha1.PreAllocations{"vip": "10.0.0.6"}), want: "10.0.0.6", from: "pre-allocation of pool pool"},
		{name: "a pre-allocation by namespace and name wins", pool: globalPool(v1alpha1.PreAllocations{"vip": "10.0.0.6", "ns/vip": "10.0.0.7", "other/vip": "10.0.0.8"}),
			want: "10.0.0.7", from: "pre-allocation"},
		{name: "an annotation that agrees", annotations: annotated("10.0.0.6"), pool: netboxPool(v1alpha1.PreAllocations{"vip": "10.0.0.6"}),
			want: "10.0.0.6", from: "annotation ipam-bridge.github.io/requested-address and the pre-allocation"},
		{name: "an annotation that disagrees", annotations: annotated("10.0.0.9"), pool: netboxPool(v1alpha1.PreAllocations{"vip": "10.0.0.6"}),
			err: "requests 10.0.0.9, but the pre-allocation of pool pool requests 10.0.0.6"},
		{name: "an unreadable annotation beside a pre-allocation", annotations: annotated("ten"), pool: netboxPool(v1alpha1.PreAllocations{"vip": "10.0.0.6"}),
			err: `annotation ipam-bridge.github.io/requested-address: "ten"`},
		{name: "an unreadable pre-allocation", pool: netboxPool(v1alpha1.PreAllocations{"vip": "10.0.0.256"}), err: "pre-allocation of pool pool"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			claim := &ipamv1.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "vip", Annotations: tc.annotations}}
			req := requestOf(claim, tc.pool)
			if tc.err != "" {
				require.ErrorIs(t, req.err, backends.ErrRequestedUnavailable)
				assert.Contains(t, req.err.Error(), tc.err)
				return
			}
			require.NoError(t, req.err)
			if tc.want == "" {
				assert.False(t, req.addr.IsValid())
				return
			}
			assert.Equal(t, netip.MustParseAddr(tc.want), req.addr)
			assert.Contains(t, req.from, tc.from)
		})
	}
}

// answeringBackend answers Allocate from a list and records what it was
// asked.
type answeringBackend struct {
	backends.Backend
	answers []backends.Allocation
	errs    []error
	asked   []backends.Claim
	deleted []backends.Record
}

func (b *answeringBackend) Allocate(_ context.Context, c backends.Claim) (backends.Allocation, error) {
	i := len(b.asked)
	b.asked = append(b.asked, c)
	return b.answers[i], b.errs[i]
}

func (b *answeringBackend) Delete(_ context.Context, r backends.Record) error {
	b.deleted = append(b.deleted, r)
	return nil
}

// TestAllocateRequested: the allocation of a claim that requests an address
// asks for it, and never lets a claim that was never bound keep another
// address; a bound claim keeps its machine's.
func TestAllocateRequested(t *testing.T) {
	at := func(addr string) backends.Allocation {
		return backends.Allocation{Address: netip.MustParsePrefix(addr), Reference: "ref/" + addr}
	}
	unavailable := &backends.RequestedUnavailableError{Address: netip.MustParseAddr("10.0.0.5"), Why: "it is held by someone"}
	for _, tc := range []struct {
		name    string
		req     addressRequest
		bound   bool
		answers []backends.Allocation
		errs    []error
		// asked is how often the backend is asked; deleted the records
		// released.
		asked   int
		deleted []string
		want    string
		err     error
		says    string
	}{
		{name: "an unreadable request asks nothing", req: addressRequest{err: backends.ErrRequestedUnavailable},
			err: backends.ErrRequestedUnavailable},
		{name: "the requested address", answers: []backends.Allocation{at("10.0.0.5/24")}, errs: []error{nil},
			asked: 1, want: "10.0.0.5/24"},
		{name: "unavailable", answers: []backends.Allocation{{}}, errs: []error{unavailable},
			asked: 1, err: backends.ErrRequestedUnavailable, says: "held by someone; requested by the annotation, the claim gets no other address"},
		{name: "another failure", answers: []backends.Allocation{{}}, errs: []error{backends.ErrUnavailable},
			asked: 1, err: backends.ErrUnavailable},
		{name: "an earlier record elsewhere is released", answers: []backends.Allocation{at("10.0.0.9/24"), at("10.0.0.5/24")}, errs: []error{nil, nil},
			asked: 2, deleted: []string{"ref/10.0.0.9/24"}, want: "10.0.0.5/24"},
		{name: "a bound claim keeps its address", bound: true, answers: []backends.Allocation{at("10.0.0.9/24")}, errs: []error{nil},
			asked: 1, want: "10.0.0.9/24"},
		{name: "an answer elsewhere twice", answers: []backends.Allocation{at("10.0.0.9/24"), at("10.0.0.10/24")}, errs: []error{nil, nil},
			asked: 2, deleted: []string{"ref/10.0.0.9/24"}, err: backends.ErrUnusableAnswer},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.req.err == nil {
				tc.req = addressRequest{addr: netip.MustParseAddr("10.0.0.5"), from: "the annotation"}
			}
			inner := &answeringBackend{answers: tc.answers, errs: tc.errs}
			r := &ClaimReconciler{}
			alloc, err := r.allocateRequested(context.Background(), inner, backends.Claim{Marker: "id/ns/vip", Namespace: "ns", Name: "vip"},
				requestedAllocation{req: tc.req, bound: tc.bound})

			require.Len(t, inner.asked, tc.asked)
			for _, c := range inner.asked {
				assert.Equal(t, netip.MustParseAddr("10.0.0.5"), c.Requested, "the backend is asked for the requested address")
			}
			var deleted []string
			for _, r := range inner.deleted {
				assert.Equal(t, "id/ns/vip", r.Marker, "only the claim's own record")
				deleted = append(deleted, r.Reference)
			}
			assert.Equal(t, tc.deleted, deleted)
			if tc.err != nil {
				require.True(t, errors.Is(err, tc.err), "%v", err)
				assert.Contains(t, err.Error(), tc.says)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, netip.MustParsePrefix(tc.want), alloc.Address)
		})
	}
}
