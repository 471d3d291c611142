package audit

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/api/v1alpha1"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/internal/apitest"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/reasons"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/reservation"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/pkg/poolkind"
)

// testIdentity is the management cluster's identity in the tests' markers.
const testIdentity = "test-cluster"

// memoryAuditor is the IPAM system's side of the audit's judgement: the
// records it lists, and the ones the audit deleted.
type memoryAuditor struct {
	records []backends.Record
	deleted []backends.Record
	// notOwned are the references of records someone took over since they
	// were listed: Delete leaves them.
	notOwned map[string]bool
}

var _ backends.Auditor = (*memoryAuditor)(nil)

func (m *memoryAuditor) Endpoint() string { return "memory" }

func (m *memoryAuditor) Lookup(context.Context, backends.Claim) (backends.Allocation, error) {
	return backends.Allocation{}, errors.New("the judgement looks nothing up")
}

func (m *memoryAuditor) Delete(_ context.Context, rec backends.Record) error {
	if m.notOwned[rec.Reference] {
		return backends.ErrNotOwned
	}
	i := slices.IndexFunc(m.records, func(r backends.Record) bool { return r.Reference == rec.Reference })
	if i < 0 {
		return nil
	}
	m.deleted = append(m.deleted, m.records[i])
	m.records = slices.Delete(m.records, i, i+1)
	return nil
}

func (m *memoryAuditor) Records(_ context.Context, prefix string) ([]backends.Record, error) {
	var out []backends.Record
	for _, rec := range m.records {
		if strings.HasPrefix(rec.Marker, prefix) {
			out = append(out, rec)
		}
	}
	return out, nil
}

func (m *memoryAuditor) Strays(context.Context, string, time.Duration) ([]backends.Record, error) {
	return nil, nil
}

func (m *memoryAuditor) Restore(context.Context, backends.Claim, netip.Prefix) (backends.Allocation, error) {
	return backends.Allocation{}, errors.New("the judgement restores nothing")
}

func (m *memoryAuditor) deletedAddresses() []string {
	var out []string
	for _, rec := range m.deleted {
		out = append(out, rec.Address.Addr().String())
	}
	return out
}

// emptyCache is a cache that has not seen the objects yet.
type emptyCache struct{ client.Client }

func (emptyCache) Get(_ context.Context, key client.ObjectKey, _ client.Object, _ ...client.GetOption) error {
	return apierrors.NewNotFound(schema.GroupResource{}, key.Name)
}

// testAuditReconciler is an AuditReconciler as SetupWithManager leaves it,
// reading through c and reader.
func testAuditReconciler(c client.Client, reader client.Reader) *AuditReconciler {
	return &AuditReconciler{
		Client: c, APIReader: reader, Recorder: events.NewFakeRecorder(100),
		Kind: poolkind.Kind{Kind: "NetboxIPPool"}, Identity: testIdentity,
		firstSeen: map[types.UID]map[string]time.Time{}, audited: map[types.UID]bool{},
	}
}

// judgeAt runs one audit's judgement of what backend lists, at now.
func judgeAt(t *testing.T, r *AuditReconciler, pool poolkind.Pool, backend *memoryAuditor, now time.Time) *auditRun {
	t.Helper()
	ctx := context.Background()
	records, err := backend.Records(ctx, r.Identity+"/")
	require.NoError(t, err)
	a := &auditRun{AuditReconciler: r, pool: pool, backend: backend, now: now, movedSeen: map[types.NamespacedName]string{}}
	require.NoError(t, a.judge(ctx, records))
	assert.Equal(t, int32(len(records)), a.status.Records)
	return a
}

type judged struct {
	Type     v1alpha1.FindingType
	Address  string
	Released bool
}

func TestAuditJudgesEachRecordByItsClaim(t *testing.T) {
	_, c := apitest.Server(t)
	ctx := context.Background()
	const minAge = 10 * time.Minute
	const bound = "10.0.0.5"
	for _, tc := range []struct {
		name   string
		policy v1alpha1.OrphanPolicy
		// claim is gone, allocating (no IPAddress), bound (at bound),
		// deleting (bound, with a deletion timestamp), or unseen (bound,
		// but not in the cache yet).
		claim string
		// moved: the IPAddress says the claim's record was moved.
		moved bool
		// records are the addresses of the records carrying the claim's
		// marker.
		records []string
		// want is what every audit finds, released or not.
		want []judged
		// releasedAtMinAge are the records the audit at minAge deletes;
		// the audits before it delete none.
		releasedAtMinAge []string
	}{
		{name: "a gone claim's record is an orphan, released under Release once minAge passed",
			policy: v1alpha1.OrphansRelease, claim: "gone", records: []string{bound},
			want: []judged{{Type: v1alpha1.FindingOrphan, Address: bound}}, releasedAtMinAge: []string{bound}},
		{name: "a gone claim's records under Report are orphans, never released",
			policy: v1alpha1.OrphansReport, claim: "gone", records: []string{bound, "10.0.0.9"},
			want: []judged{{Type: v1alpha1.FindingOrphan, Address: bound}, {Type: v1alpha1.FindingOrphan, Address: "10.0.0.9"}}},
		{name: "a bound claim's record elsewhere, beside one at its address, is a duplicate, released once minAge passed",
			policy: v1alpha1.OrphansReport, claim: "bound", records: []string{bound, "10.0.0.9"},
			want: []judged{{Type: v1alpha1.FindingDuplicate, Address: "10.0.0.9"}}, releasedAtMinAge: []string{"10.0.0.9"}},
		{name: "a record elsewhere of a claim whose IPAddress says its record moved is Moved, never released",
			policy: v1alpha1.OrphansRelease, claim: "bound", moved: true, records: []string{bound, "10.0.0.9"},
			want: []judged{{Type: v1alpha1.FindingMoved, Address: "10.0.0.9"}}},
		{name: "a record elsewhere while none holds the bound address is Moved, never released",
			policy: v1alpha1.OrphansRelease, claim: "bound", records: []string{"10.0.0.9"},
			want: []judged{{Type: v1alpha1.FindingMoved, Address: "10.0.0.9"}}},
		{name: "a claim's record at its bound address is no finding",
			policy: v1alpha1.OrphansRelease, claim: "bound", records: []string{bound}},
		{name: "the records of a claim being allocated are neither orphans nor duplicates",
			policy: v1alpha1.OrphansRelease, claim: "allocating", records: []string{bound, "10.0.0.9"}},
		{name: "the records of a claim being deleted are neither orphans nor duplicates",
			policy: v1alpha1.OrphansRelease, claim: "deleting", records: []string{bound, "10.0.0.9"}},
		{name: "the records of a claim the cache has not seen are not orphans",
			policy: v1alpha1.OrphansRelease, claim: "unseen", records: []string{bound, "10.0.0.9"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := apitest.Namespace(t, c)
			var cache client.Client = c
			switch tc.claim {
			case "gone":
			case "allocating":
				apitest.CreateClaim(t, c, ns, "m")
			case "bound", "unseen":
				var annotations map[string]string
				if tc.moved {
					annotations = map[string]string{v1alpha1.RecordMovedAnnotation: "10.0.0.9 (ipam.ipaddress/2)"}
				}
				apitest.CreateAddress(t, c, apitest.CreateClaim(t, c, ns, "m"), bound, annotations)
				if tc.claim == "unseen" {
					cache = emptyCache{c}
				}
			case "deleting":
				claim := apitest.CreateClaim(t, c, ns, "m", reservation.ClaimFinalizer)
				apitest.CreateAddress(t, c, claim, bound, nil)
				require.NoError(t, c.Delete(ctx, claim))
			default:
				t.Fatalf("unknown claim state %q", tc.claim)
			}
			backend := &memoryAuditor{}
			for i, addr := range tc.records {
				backend.records = append(backend.records, backends.Record{
					Address: netip.MustParsePrefix(addr + "/24"), Marker: backends.Marker(testIdentity, ns, "m"),
					Reference: fmt.Sprintf("ipam.ipaddress/%d", i+1),
				})
			}
			pool := &v1alpha1.NetboxIPPool{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: apitest.PoolRef.Name, UID: types.UID(ns)},
				Spec:       v1alpha1.NetboxIPPoolSpec{Orphans: v1alpha1.Orphans{Policy: tc.policy, MinAge: &metav1.Duration{Duration: minAge}}},
			}
			r := testAuditReconciler(cache, c)

			t0 := time.Now()
			for _, at := range []time.Duration{0, minAge - time.Second, minAge} {
				a := judgeAt(t, r, pool, backend, t0.Add(at))
				final := at == minAge
				var want, got []judged
				for _, f := range tc.want {
					f.Released = final && slices.Contains(tc.releasedAtMinAge, f.Address)
					want = append(want, f)
				}
				counts := map[v1alpha1.FindingType]int32{}
				for _, f := range a.status.Findings {
					got = append(got, judged{Type: f.Type, Address: f.Address, Released: f.Released})
					counts[f.Type]++
				}
				assert.ElementsMatch(t, want, got, "the findings of the audit at +%s", at)
				assert.Equal(t, counts[v1alpha1.FindingOrphan], a.status.Orphans, "orphans at +%s", at)
				assert.Equal(t, counts[v1alpha1.FindingDuplicate], a.status.Duplicates, "duplicates at +%s", at)
				assert.Equal(t, counts[v1alpha1.FindingMoved], a.status.Drifted, "drifted at +%s", at)
				if final {
					assert.ElementsMatch(t, tc.releasedAtMinAge, backend.deletedAddresses(), "released once minAge passed")
				} else {
					assert.Empty(t, backend.deletedAddresses(), "nothing is released before minAge, at +%s", at)
				}
				if at == 0 && len(tc.releasedAtMinAge) > 0 {
					assert.Equal(t, t0.Add(minAge), a.pendingAt, "the audit comes back when minAge passes")
				}
			}
		})
	}
}

func TestAuditDeletesATombstoneOnceItsGracePeriodIsOver(t *testing.T) {
	const grace = 10 * time.Minute
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	marker := backends.Marker(testIdentity, "ns", "gone")
	for _, tc := range []struct {
		name string
		// ago is when each tombstone's release was, before now.
		ago      []time.Duration
		notOwned bool
		// wantDeleted are the indices of the tombstones deleted.
		wantDeleted []int
		// wantNext is the earliest expiry still to come, from now; 0 for
		// none.
		wantNext time.Duration
	}{
		{name: "within its grace period it is kept", ago: []time.Duration{4 * time.Minute}, wantNext: 6 * time.Minute},
		{name: "its grace period just over", ago: []time.Duration{grace}, wantDeleted: []int{0}},
		{name: "long over", ago: []time.Duration{time.Hour}, wantDeleted: []int{0}},
		{name: "of several, the expired go and the earliest to come is next",
			ago: []time.Duration{2 * time.Minute, time.Hour, 7 * time.Minute}, wantDeleted: []int{1}, wantNext: 3 * time.Minute},
		{name: "one that changed hands since it was listed is left", ago: []time.Duration{time.Hour}, notOwned: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			backend := &memoryAuditor{notOwned: map[string]bool{}}
			for i, ago := range tc.ago {
				rec := backends.Record{
					Address:   netip.MustParsePrefix(fmt.Sprintf("10.0.0.%d/24", 10+i)),
					Marker:    backends.TombstoneMarker(marker, now.Add(-ago)),
					Reference: fmt.Sprintf("ipam.ipaddress/%d", i+1),
				}
				backend.records = append(backend.records, rec)
				backend.notOwned[rec.Reference] = tc.notOwned
			}
			listed := slices.Clone(backend.records)
			pool := &v1alpha1.NetboxIPPool{
				ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "pool", UID: "pool"},
				Spec: v1alpha1.NetboxIPPoolSpec{
					Orphans: v1alpha1.Orphans{Policy: v1alpha1.OrphansRelease, MinAge: &metav1.Duration{}},
					Release: v1alpha1.ReleaseSettings{GracePeriod: &metav1.Duration{Duration: grace}},
				},
			}
			// A tombstone reads no claim: the judgement needs no API
			// server for it.
			a := judgeAt(t, testAuditReconciler(nil, nil), pool, backend, now)

			var wantDeleted []backends.Record
			for _, i := range tc.wantDeleted {
				wantDeleted = append(wantDeleted, listed[i])
			}
			assert.ElementsMatch(t, wantDeleted, backend.deleted)
			assert.Equal(t, int32(len(tc.ago)-len(tc.wantDeleted)), a.status.Tombstones, "the tombstones kept")
			assert.Empty(t, a.status.Findings, "a tombstone is no orphan, though its claim is gone")
			assert.Zero(t, a.status.Orphans)
			if tc.wantNext == 0 {
				assert.Nil(t, a.status.NextTombstoneExpiry)
				assert.True(t, a.pendingAt.IsZero())
			} else if assert.NotNil(t, a.status.NextTombstoneExpiry) {
				assert.Equal(t, now.Add(tc.wantNext), a.status.NextTombstoneExpiry.Time)
				assert.Equal(t, now.Add(tc.wantNext), a.pendingAt, "the audit comes back when it expires")
			}
		})
	}
}

// restoringAuditor is an IPAM system whose record of a claim was deleted:
// a lookup finds the claim's record only once it is restored, and a restore
// is applied but its answer lost, as when the manager stops before it reads
// it.
type restoringAuditor struct {
	memoryAuditor
}

// Offers: the system creates a record at a given address.
func (m *restoringAuditor) Offers(r backends.Role) bool { return r == backends.RoleAddressRequester }

func (m *restoringAuditor) Lookup(_ context.Context, claim backends.Claim) (backends.Allocation, error) {
	for _, rec := range m.records {
		if rec.Marker == claim.Marker {
			return backends.Allocation{Address: rec.Address, Reference: rec.Reference}, nil
		}
	}
	return backends.Allocation{}, backends.ErrNotFound
}

func (m *restoringAuditor) Restore(_ context.Context, claim backends.Claim, address netip.Prefix) (backends.Allocation, error) {
	m.records = append(m.records, backends.Record{Address: address, Marker: claim.Marker, Reference: "ipam.ipaddress/7"})
	return backends.Allocation{}, errors.New("connection reset by peer")
}

// An audit that restores a deleted record and stops before it says so
// leaves the claim saying so: the next audit, which finds the record held,
// reports the deletion instead of saying nothing, and notes the record on
// the IPAddress.
func TestAuditReportsARestoreItStoppedBeforeSaying(t *testing.T) {
	_, c := apitest.Server(t)
	ctx := context.Background()
	ns := apitest.Namespace(t, c)
	claim := apitest.CreateClaim(t, c, ns, "m")
	address := apitest.CreateAddress(t, c, claim, "10.0.0.5", nil)
	pool := &v1alpha1.NetboxIPPool{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: apitest.PoolRef.Name, UID: types.UID(ns)}}
	backend := &restoringAuditor{}
	r := testAuditReconciler(c, c)
	audit := func() {
		t.Helper()
		held := map[string][]backends.Record{}
		for _, rec := range backend.records {
			key := rec.Marker + "|" + rec.Address.Addr().String()
			held[key] = append(held[key], rec)
		}
		a := &auditRun{AuditReconciler: r, pool: pool, backend: backend, now: time.Now(), movedSeen: map[types.NamespacedName]string{}}
		require.NoError(t, a.checkBound(ctx, address, held))
	}
	reserved := func() *metav1.Condition {
		t.Helper()
		got := &ipamv1.IPAddressClaim{}
		require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(claim), got))
		return conditions.Get(got, v1alpha1.AddressReservedCondition)
	}

	audit()
	require.Len(t, backend.records, 1, "restored, the answer lost")
	cond := reserved()
	require.NotNil(t, cond, "the claim says its record was deleted before it is held again")
	assert.Equal(t, metav1.ConditionFalse, cond.Status)
	assert.Equal(t, v1alpha1.RecordDeletedReason, cond.Reason)

	audit()
	cond = reserved()
	require.NotNil(t, cond)
	assert.Equal(t, metav1.ConditionTrue, cond.Status, cond.Message)
	assert.Equal(t, v1alpha1.RecordDeletedReason, cond.Reason, "the claim still says why it holds a new record")
	assert.Contains(t, cond.Message, "10.0.0.5")
	assert.Len(t, backend.records, 1, "held once")
	got := &ipamv1.IPAddress{}
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(address), got))
	assert.Equal(t, "ipam.ipaddress/7", got.Annotations[v1alpha1.ReservationRecordAnnotation],
		"the IPAddress names the restored record, which a release after a clusterctl move or under Retain goes by")
	assert.Equal(t, backend.records[0].Marker, got.Annotations[v1alpha1.ReservationMarkerAnnotation])
}

// A record handed over by the guard, or restored for a moved one, whose
// manager stopped before it noted the record on the IPAddress: the audit
// that finds the address held notes it, before it reports the move, so
// that a release under Retain, or after a clusterctl move, goes by the
// record that holds the machine's address.
func TestAuditNotesTheRecordOfAnAddressHeldAgain(t *testing.T) {
	_, c := apitest.Server(t)
	ctx := context.Background()
	ns := apitest.Namespace(t, c)
	claim := apitest.CreateClaim(t, c, ns, "m")
	address := apitest.CreateAddress(t, c, claim, "10.0.0.5", map[string]string{
		v1alpha1.RecordMovedAnnotation:       "10.0.0.9 (ipam.ipaddress/3)",
		v1alpha1.ReservationRecordAnnotation: "ipam.ipaddress/3",
	})
	pool := &v1alpha1.NetboxIPPool{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: apitest.PoolRef.Name, UID: types.UID(ns)}}
	r := testAuditReconciler(c, c)
	a := &auditRun{AuditReconciler: r, pool: pool, backend: &memoryAuditor{}, now: time.Now(), movedSeen: map[types.NamespacedName]string{}}
	marker := backends.Marker(r.Identity, ns, "m")
	held := map[string][]backends.Record{
		marker + "|10.0.0.5": {{Address: netip.MustParsePrefix("10.0.0.5/24"), Marker: marker, Reference: "ipam.ipaddress/7"}},
	}
	require.NoError(t, a.checkBound(ctx, address, held))

	got := &ipamv1.IPAddress{}
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(address), got))
	assert.Equal(t, "ipam.ipaddress/7", got.Annotations[v1alpha1.ReservationRecordAnnotation], "the record at the machine's address")
	reserved := &ipamv1.IPAddressClaim{}
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(claim), reserved))
	cond := conditions.Get(reserved, v1alpha1.AddressReservedCondition)
	require.NotNil(t, cond)
	assert.Equal(t, reasons.AddressHeldInClusterReason, cond.Reason, "the move is still reported")
}
