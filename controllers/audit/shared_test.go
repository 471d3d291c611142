package audit

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/api/v1alpha1"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/internal/apitest"
)

// A periodic audit, or a new pool's first, takes a listing of strays
// shared with the namespace's other pools; one asked for by annotation
// lists anew.
func TestOnlyAnAuditAskedForListsStraysAnew(t *testing.T) {
	for _, tc := range []struct {
		name       string
		annotation string
		last       *v1alpha1.AuditStatus
		want       time.Duration
	}{
		{name: "first audit", want: SharedStraysAge},
		{name: "first audit, asked for at creation or after failed audits", annotation: "now", want: 0},
		{name: "periodic", last: &v1alpha1.AuditStatus{}, want: SharedStraysAge},
		{name: "periodic after an answered request", annotation: "1", last: &v1alpha1.AuditStatus{Request: "1"}, want: SharedStraysAge},
		{name: "asked for", annotation: "2", last: &v1alpha1.AuditStatus{Request: "1"}, want: 0},
		{name: "asked for the first time", annotation: "1", last: &v1alpha1.AuditStatus{}, want: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pool := &v1alpha1.NetboxIPPool{}
			if tc.annotation != "" {
				pool.Annotations = map[string]string{v1alpha1.AuditAnnotation: tc.annotation}
			}
			pool.Status.Audit = tc.last
			assert.Equal(t, tc.want, straysMaxAge(pool))
		})
	}
}

// movingAuditor lists strays as a listing shared with another pool a
// moment ago shows them (shared) and as a fresh one does (fresh); the
// pool's own scope holds none of the claim's records, and Restore holds
// the address again.
type movingAuditor struct {
	memoryAuditor
	shared, fresh []backends.Record
	listings      []time.Duration
	restored      int
}

func (m *movingAuditor) Strays(_ context.Context, _ string, maxAge time.Duration) ([]backends.Record, error) {
	m.listings = append(m.listings, maxAge)
	if maxAge > 0 {
		return m.shared, nil
	}
	return m.fresh, nil
}

func (m *movingAuditor) Lookup(context.Context, backends.Claim) (backends.Allocation, error) {
	// Not in the pool's scope (an Infoblox lookup searches the pool's
	// network view only).
	return backends.Allocation{}, backends.ErrNotFound
}

func (m *movingAuditor) Restore(_ context.Context, _ backends.Claim, p netip.Prefix) (backends.Allocation, error) {
	m.restored++
	return backends.Allocation{Address: p, Reference: "fixedaddress/restored"}, nil
}

// What an audit does to a claim follows the IPAM system as it is, whatever
// a listing of strays shared a moment ago showed: a move the shared listing
// missed is held and named as a move, a record deleted or moved back since
// it was listed is not taken for moved. The shared listing's own findings
// are reported as listed.
func TestAnAuditActsOnlyOnMovesItSeesNow(t *testing.T) {
	_, c := apitest.Server(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		// shared and fresh: whether the listings show the claim's record
		// moved to another network view.
		shared, fresh bool
		// held: the pool's own listing holds the claim's record.
		held bool
		// asked: the audit was asked for, and lists strays anew.
		asked bool

		wantRestored int
		wantReason   string
		wantNoted    bool
		wantFindings []v1alpha1.FindingType
		wantListings []time.Duration
	}{
		{name: "moved a moment ago, missed by the shared listing", fresh: true,
			wantRestored: 1, wantReason: v1alpha1.RecordMovedReason, wantNoted: true,
			wantFindings: []v1alpha1.FindingType{v1alpha1.FindingMoved}, wantListings: []time.Duration{SharedStraysAge, 0}},
		{name: "still moved", shared: true, fresh: true,
			wantRestored: 1, wantReason: v1alpha1.RecordMovedReason, wantNoted: true,
			wantFindings: []v1alpha1.FindingType{v1alpha1.FindingMoved}, wantListings: []time.Duration{SharedStraysAge, 0}},
		{name: "deleted since the shared listing", shared: true,
			wantRestored: 1, wantReason: v1alpha1.RecordDeletedReason,
			wantFindings: []v1alpha1.FindingType{v1alpha1.FindingMoved, v1alpha1.FindingRestored}, wantListings: []time.Duration{SharedStraysAge, 0}},
		{name: "moved back since the shared listing", shared: true, held: true,
			wantFindings: []v1alpha1.FindingType{v1alpha1.FindingMoved}, wantListings: []time.Duration{SharedStraysAge, 0}},
		{name: "held, and no listing shows a move", held: true,
			wantListings: []time.Duration{SharedStraysAge}},
		{name: "asked for: one fresh listing", asked: true, shared: true, fresh: true,
			wantRestored: 1, wantReason: v1alpha1.RecordMovedReason, wantNoted: true,
			wantFindings: []v1alpha1.FindingType{v1alpha1.FindingMoved}, wantListings: []time.Duration{0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := apitest.Namespace(t, c)
			claim := apitest.CreateClaim(t, c, ns, "m")
			address := apitest.CreateAddress(t, c, claim, "10.0.0.5", nil)
			marker := backends.Marker(testIdentity, ns, "m")
			moved := backends.Record{Address: netip.MustParsePrefix("10.0.0.5/32"), Marker: marker, Reference: "fixedaddress/moved:10.0.0.5/other-view"}
			auditor := &movingAuditor{}
			if tc.shared {
				auditor.shared = []backends.Record{moved}
			}
			if tc.fresh {
				auditor.fresh = []backends.Record{moved}
			}
			held := map[string][]backends.Record{}
			if tc.held {
				held[marker+"|10.0.0.5"] = []backends.Record{{Address: netip.MustParsePrefix("10.0.0.5/24"), Marker: marker, Reference: "ipam.ipaddress/5"}}
			}
			pool := &v1alpha1.NetboxIPPool{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: apitest.PoolRef.Name, UID: types.UID(ns)}}
			a := &auditRun{AuditReconciler: testAuditReconciler(c, c), pool: pool, backend: auditor, now: time.Now(),
				movedSeen: map[types.NamespacedName]string{}, straysMaxAge: SharedStraysAge}
			if tc.asked {
				a.straysMaxAge = 0
			}
			require.NoError(t, a.findStrays(ctx))
			require.NoError(t, a.checkBound(ctx, address, held))
			require.Empty(t, a.failures)

			assert.Equal(t, tc.wantRestored, auditor.restored, "the address held again")
			got := &ipamv1.IPAddressClaim{}
			require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(claim), got))
			reason := ""
			if cond := conditions.Get(got, v1alpha1.AddressReservedCondition); cond != nil {
				reason = cond.Reason
			}
			assert.Equal(t, tc.wantReason, reason, "what the claim says of its record")
			gotAddress := &ipamv1.IPAddress{}
			require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(address), gotAddress))
			_, noted := gotAddress.Annotations[v1alpha1.RecordMovedAnnotation]
			assert.Equal(t, tc.wantNoted, noted, "the IPAddress notes a move")
			var findings []v1alpha1.FindingType
			for _, f := range a.status.Findings {
				findings = append(findings, f.Type)
			}
			assert.Equal(t, tc.wantFindings, findings)
			assert.Equal(t, tc.wantListings, auditor.listings, "the listings of strays, by the age each accepted")
		})
	}
}
