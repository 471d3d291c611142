package netbox

import (
	"context"
	"fmt"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/httpfault"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/netboxsim"
)

const internalToken = "0123456789abcdef0123456789abcdef01234567"

// A search whose page overflows is repeated claim by claim, and each claim's
// search covers both forms of its marker: had the next request searched the
// planned form again, the claim's adopted record would be found twice, and
// keep would release the "duplicate" the claim holds.
func TestMarkerSearchFindsAnAdoptedRecordOnceWhenAPageOverflows(t *testing.T) {
	sim := netboxsim.New()
	t.Cleanup(sim.Close)
	sim.AddToken(internalToken, true)
	sim.AddCustomField("capi_ipam_claim", "exact")
	b, _, err := newDriver(Config{
		URL: sim.URL(), Token: internalToken,
		HTTP:        HTTPOptions{RetryWaitMin: time.Millisecond, RetryWaitMax: 5 * time.Millisecond},
		Reservation: Reservation{DNSNamePattern: "{{ .ClaimName }}.example.com"},
		Planned:     &Planned{Tag: "planned"},
		Sources:     []Source{{Kind: SourcePrefix, CIDR: netip.MustParsePrefix("10.0.0.0/24")}},
	})
	require.NoError(t, err)

	// Find markers whose search the value-by-value split would cut between
	// a marker and its planned form.
	const path = "/api/ipam/ip-addresses/"
	base := url.Values{}
	base.Set("limit", strconv.Itoa(maxPage))
	base.Set("ordering", "id")
	line := http.MethodGet + " " + b.baseURL + path + "? HTTP/1.1"
	field := "cf_" + b.cfg.MarkerField
	var markers []string
	var cut string
	for n := 0; n < 40 && cut == ""; n++ {
		markers = nil
		var singles [][]string
		for i := range 60 {
			m := fmt.Sprintf("ns/%s-%02d", strings.Repeat("m", 40+n), i)
			markers = append(markers, m)
			singles = append(singles, []string{m}, []string{backends.PlannedMarker(m)})
		}
		first := markerChunks(line, base, field, singles)[0]
		if last := first[len(first)-1]; !strings.HasSuffix(last, "#planned") {
			cut = last
		}
	}
	require.NotEmpty(t, cut, "no split between a marker and its planned form")

	// The first chunk's page overflows; the cut claim adopted a planned record.
	for i := range maxPage + 1 {
		sim.AddIPAddress(fmt.Sprintf("10.1.%d.%d/16", i/250, i%250+1), netboxsim.IPOptions{
			CustomFields: map[string]any{"capi_ipam_claim": markers[0]},
		})
	}
	sim.AddIPAddress("10.0.0.9/24", netboxsim.IPOptions{
		CustomFields: map[string]any{"capi_ipam_claim": backends.PlannedMarker(cut)},
	})

	found, err := b.Search(context.Background(), markers, backends.InPool)
	require.NoError(t, err)
	assert.Len(t, found[cut], 1, "the adopted record, once")
}

// A marker field whose filter logic is loose has no "starts with" lookup,
// and NetBox ignores the filter: the search notices the unfiltered answer
// and searches by exact values, finding the marker and its planned form,
// and nothing else.
func TestMarkerSearchOfALooseFieldFallsBackToExactValues(t *testing.T) {
	for _, logic := range []string{"exact", "loose"} {
		t.Run(logic, func(t *testing.T) {
			_, b, seeded := markerSearchSim(t, logic)

			found, err := b.Search(context.Background(), []string{"id/ns/a", "id/ns/b"}, backends.InPool)
			require.NoError(t, err)
			assert.Equal(t, map[string][]int32{"id/ns/a": {seeded.own}, "id/ns/b": {seeded.adopted}}, foundIDs(found))
			assert.True(t, found["id/ns/b"][0].planned)
		})
	}
}

// An administrator may set NetBox's MAX_PAGE_SIZE below the limit the
// driver asks: the searches and the audit's listing then page by what
// NetBox answered, and find every record, whatever the field's logic.
func TestSearchesPageWhereNetBoxAnswersShorterPages(t *testing.T) {
	for _, logic := range []string{"exact", "loose"} {
		t.Run(logic, func(t *testing.T) {
			sim, b, seeded := markerSearchSim(t, logic)
			sim.SetMaxPageSize(3)
			want := []int32{seeded.own}
			for i := range 7 {
				want = append(want, sim.AddIPAddress(fmt.Sprintf("10.0.0.%d/24", 20+i), netboxsim.IPOptions{
					CustomFields: map[string]any{"capi_ipam_claim": "id/ns/a"},
				}))
			}

			found, err := b.Search(context.Background(), []string{"id/ns/a"}, backends.InPool)
			require.NoError(t, err)
			assert.Equal(t, map[string][]int32{"id/ns/a": want}, foundIDs(found), "the search")

			pool, err := b.Prepare(context.Background())
			require.NoError(t, err)
			listed, err := b.Marked(context.Background(), pool, "id/ns/", backends.InPool, 0)
			require.NoError(t, err)
			var refs []string
			for _, r := range listed {
				refs = append(refs, r.Reference)
			}
			var wantRefs []string
			for _, id := range append(want, seeded.adopted, seeded.longer, seeded.tombstone, seeded.other) {
				wantRefs = append(wantRefs, fmt.Sprintf("%s%d", recordRefPrefix, id))
			}
			assert.ElementsMatch(t, wantRefs, refs, "the audit's listing: every marked record")
		})
	}
}

// A field known to ignore the lookup is searched by exact values split at
// the top: markers that one lookup request holds need two by exact values,
// and the two go out together, as the lookup's chunks do.
func TestSearchOfAKnownLooseFieldSendsItsRequestsTogether(t *testing.T) {
	sim, b, _ := markerSearchSim(t, "loose")
	_, err := b.Prepare(context.Background())
	require.NoError(t, err)
	var markers []string
	for i := range 60 {
		markers = append(markers, fmt.Sprintf("id/ns/m-%05d", i))
	}
	path := "/api/ipam/ip-addresses/"
	line := http.MethodGet + " " + b.baseURL + path + "? HTTP/1.1"
	base := url.Values{"limit": {strconv.Itoa(maxPage)}, "ordering": {"id"}}
	require.Len(t, markerChunks(line, base, "cf_capi_ipam_claim__isw", claimValues(markers)), 1, "one lookup request holds them")
	exact := exactChunks(line, base, "cf_capi_ipam_claim", markers)
	require.Len(t, exact, 2, "exact values need two")

	together := httpfault.NewGathering(2, 10*time.Second)
	sim.InjectFault(netboxsim.Fault{Kind: httpfault.Gather, Method: http.MethodGet, PathContains: path, Gathering: together})
	sim.ResetCalls()
	_, err = b.Search(context.Background(), markers, backends.InPool)
	require.NoError(t, err)
	assert.Len(t, sim.Calls(), 2, "the two requests by exact values")
	assert.True(t, together.Complete(), "sent together")
}

// markerSearchSeed names the records markerSearchSim seeds that a search
// of claims a and b finds.
type markerSearchSeed struct {
	field        int32
	own, adopted int32
	// longer, tombstone and other carry markers a search of a and b must
	// not find: a longer one, a's tombstone, another claim's.
	longer, tombstone, other int32
}

// markerSearchSim starts a simulator whose marker field has the filter
// logic, holding the prefix 10.0.0.0/24 and, in it, claim id/ns/a's record,
// the plan claim id/ns/b adopted, and records a search of the two must not
// find (a longer marker, a's tombstone, another claim's, an unmarked one);
// and a driver of a pool of that prefix. Confirmed setups are forgotten
// before and after.
func markerSearchSim(t *testing.T, logic string) (*netboxsim.Server, *driver, markerSearchSeed) {
	t.Helper()
	backends.ForgetConfirmedSetups()
	t.Cleanup(backends.ForgetConfirmedSetups)
	sim := netboxsim.New()
	t.Cleanup(sim.Close)
	sim.AddToken(internalToken, true)
	seed := markerSearchSeed{field: sim.AddCustomField("capi_ipam_claim", logic)}
	sim.AddPrefix("10.0.0.0/24", netboxsim.PrefixOptions{})
	b, _, err := newDriver(Config{
		URL: sim.URL(), Token: internalToken,
		HTTP:    HTTPOptions{RetryWaitMin: time.Millisecond, RetryWaitMax: 5 * time.Millisecond},
		Sources: []Source{{Kind: SourcePrefix, CIDR: netip.MustParsePrefix("10.0.0.0/24")}},
	})
	require.NoError(t, err)
	marked := func(addr, marker string) int32 {
		return sim.AddIPAddress(addr, netboxsim.IPOptions{CustomFields: map[string]any{"capi_ipam_claim": marker}})
	}
	seed.own = marked("10.0.0.2/24", "id/ns/a")
	seed.adopted = marked("10.0.0.3/24", backends.PlannedMarker("id/ns/b"))
	seed.longer = marked("10.0.0.4/24", "id/ns/a-longer")
	seed.tombstone = marked("10.0.0.5/24", backends.TombstoneMarker("id/ns/a", time.Unix(0, 0)))
	seed.other = marked("10.0.0.6/24", "id/ns/other")
	sim.AddIPAddress("10.0.0.7/24", netboxsim.IPOptions{})
	return sim, b, seed
}

// foundIDs is what a search found, as record IDs by marker.
func foundIDs(found map[string][]ipRecord) map[string][]int32 {
	ids := map[string][]int32{}
	for m, records := range found {
		for _, r := range records {
			ids[m] = append(ids[m], r.ID)
		}
	}
	return ids
}

// NetBox ignores the "starts with" lookup of a loose marker field. Once the
// driver knows, from the pool's setup check, which reads the field, or from
// a search that found the lookup ignored, it searches by exact values at
// once, without the page of unrelated objects the ignored lookup answers.
// A field set to exact meanwhile is still searched right, and the next
// setup check brings the lookup back.
func TestSearchesOfALooseFieldSkipTheIgnoredLookup(t *testing.T) {
	setUp := func(t *testing.T, b *driver) {
		_, err := b.Prepare(context.Background())
		require.NoError(t, err)
	}
	search := func(t *testing.T, b *driver) {
		_, err := b.Search(context.Background(), []string{"id/ns/a"}, backends.InPool)
		require.NoError(t, err)
	}
	for _, tc := range []struct {
		name  string
		logic string
		// learn is what the driver did before the search looked at.
		learn []func(*testing.T, *driver)
		// exactSince: the IPAM team set the field to exact after learn.
		exactSince bool
		// then runs after exactSince.
		then       []func(*testing.T, *driver)
		wantLookup bool
	}{
		{name: "an exact field", logic: "exact", learn: []func(*testing.T, *driver){setUp}, wantLookup: true},
		{name: "a loose field read at set-up", logic: "loose", learn: []func(*testing.T, *driver){setUp}},
		{name: "a loose field a search found", logic: "loose", learn: []func(*testing.T, *driver){search}},
		{name: "a loose field set to exact since", logic: "loose", learn: []func(*testing.T, *driver){search}, exactSince: true},
		{name: "a loose field set to exact, then set up", logic: "loose", learn: []func(*testing.T, *driver){search}, exactSince: true,
			then: []func(*testing.T, *driver){setUp}, wantLookup: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sim, b, seeded := markerSearchSim(t, tc.logic)
			for _, learn := range tc.learn {
				learn(t, b)
			}
			if tc.exactSince {
				sim.SetCustomFieldFilterLogic(seeded.field, "exact")
			}
			for _, then := range tc.then {
				then(t, b)
			}
			sim.ResetCalls()

			found, err := b.Search(context.Background(), []string{"id/ns/a", "id/ns/b"}, backends.InPool)
			require.NoError(t, err)
			assert.Equal(t, map[string][]int32{"id/ns/a": {seeded.own}, "id/ns/b": {seeded.adopted}}, foundIDs(found))
			var lookups int
			for _, c := range sim.Calls() {
				if strings.Contains(c.Query, "__isw") {
					lookups++
				}
			}
			if tc.wantLookup {
				assert.Equal(t, 1, lookups, "the search asks the lookup")
				assert.Len(t, sim.Calls(), 1, "and nothing else")
			} else {
				assert.Zero(t, lookups, "the search skips the ignored lookup")
				require.Len(t, sim.Calls(), 1, "one request, by exact values")
				query, err := url.ParseQuery(sim.Calls()[0].Query)
				require.NoError(t, err)
				assert.ElementsMatch(t, []string{"id/ns/a", backends.PlannedMarker("id/ns/a"), "id/ns/b", backends.PlannedMarker("id/ns/b")},
					query["cf_capi_ipam_claim"], "each marker and its planned form")
			}
		})
	}
}

// A write that follows a read of a record sends the record's ETag as
// If-Match (NetBox 4.6 and later): a record whose marker changed between
// the read and the write is never written, and one whose other fields
// changed is read again and written.
func TestWritesAfterAReadAreConditional(t *testing.T) {
	const marker = "mgmt-a/ns/claim"
	for _, tc := range []struct {
		name    string
		edit    func(*netboxsim.IPAddress)
		write   func(*driver, context.Context, ipRecord) error
		wantErr error
		// kept: the record is still there afterwards, with this marker.
		kept string
	}{
		{
			name:    "a deletion after the marker changed",
			edit:    func(ip *netboxsim.IPAddress) { ip.CustomFields["capi_ipam_claim"] = "mgmt-b/ns/claim" },
			write:   func(b *driver, ctx context.Context, r ipRecord) error { return b.Drop(ctx, r) },
			wantErr: backends.ErrNotOwned,
			kept:    "mgmt-b/ns/claim",
		},
		{
			name:  "a deletion after the description changed",
			edit:  func(ip *netboxsim.IPAddress) { ip.Description = "edited by the IPAM team" },
			write: func(b *driver, ctx context.Context, r ipRecord) error { return b.Drop(ctx, r) },
		},
		{
			name: "a re-mark after the marker changed",
			edit: func(ip *netboxsim.IPAddress) { ip.CustomFields["capi_ipam_claim"] = "mgmt-b/ns/claim" },
			write: func(b *driver, ctx context.Context, r ipRecord) error {
				return b.Mark(ctx, r, "mgmt-a/ns/other", "")
			},
			wantErr: backends.ErrNotOwned,
			kept:    "mgmt-b/ns/claim",
		},
		{
			name: "a re-mark after the description changed",
			edit: func(ip *netboxsim.IPAddress) { ip.Description = "edited by the IPAM team" },
			write: func(b *driver, ctx context.Context, r ipRecord) error {
				return b.Mark(ctx, r, "mgmt-a/ns/other", "")
			},
			kept: "mgmt-a/ns/other",
		},
		{
			// What a resend of a re-mark whose answer was lost meets.
			name: "a re-mark that already landed",
			edit: func(ip *netboxsim.IPAddress) { ip.CustomFields["capi_ipam_claim"] = "mgmt-a/ns/other" },
			write: func(b *driver, ctx context.Context, r ipRecord) error {
				return b.Mark(ctx, r, "mgmt-a/ns/other", "")
			},
			kept: "mgmt-a/ns/other",
		},
		{
			// What a resend of a disown whose answer was lost meets.
			name:  "a disown after the marker was removed",
			edit:  func(ip *netboxsim.IPAddress) { ip.CustomFields["capi_ipam_claim"] = nil },
			write: func(b *driver, ctx context.Context, r ipRecord) error { return b.Disown(ctx, r) },
			kept:  "<nil>",
		},
		{
			name:    "a disown after the marker changed",
			edit:    func(ip *netboxsim.IPAddress) { ip.CustomFields["capi_ipam_claim"] = "mgmt-b/ns/claim" },
			write:   func(b *driver, ctx context.Context, r ipRecord) error { return b.Disown(ctx, r) },
			wantErr: backends.ErrNotOwned,
			kept:    "mgmt-b/ns/claim",
		},
		{
			name:  "a disown after the description changed",
			edit:  func(ip *netboxsim.IPAddress) { ip.Description = "edited by the IPAM team" },
			write: func(b *driver, ctx context.Context, r ipRecord) error { return b.Disown(ctx, r) },
			kept:  "<nil>",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sim, b, r := conditionalFixture(t, marker)
			ctx := context.Background()
			id := r.ID

			// The edit lands in a later microsecond than the read's
			// last_updated, as any edit by a person does.
			time.Sleep(2 * time.Microsecond)
			sim.EditIPAddress(id, tc.edit)
			err := tc.write(b, ctx, r)
			if tc.wantErr != nil {
				require.ErrorIs(t, err, tc.wantErr)
			} else {
				require.NoError(t, err)
			}
			var left []string
			for _, ip := range sim.IPAddresses() {
				left = append(left, fmt.Sprint(ip.CustomFields["capi_ipam_claim"]))
			}
			if tc.kept == "" {
				assert.Empty(t, left, "the record is deleted")
			} else {
				assert.Equal(t, []string{tc.kept}, left)
			}
		})
	}
}

// conditionalFixture is a NetBox simulator holding one record with marker,
// a driver, and the record as the driver read it (with its ETag).
func conditionalFixture(t *testing.T, marker string) (*netboxsim.Server, *driver, ipRecord) {
	t.Helper()
	sim := netboxsim.New()
	t.Cleanup(sim.Close)
	sim.AddToken(internalToken, true)
	sim.AddCustomField("capi_ipam_claim", "exact")
	id := sim.AddIPAddress("10.0.0.5/24", netboxsim.IPOptions{CustomFields: map[string]any{"capi_ipam_claim": marker}})
	b, _, err := newDriver(Config{
		URL: sim.URL(), Token: internalToken,
		HTTP:    HTTPOptions{RetryWaitMin: time.Millisecond, RetryWaitMax: 5 * time.Millisecond},
		Sources: []Source{{Kind: SourcePrefix, CIDR: netip.MustParsePrefix("10.0.0.0/24")}},
	})
	require.NoError(t, err)
	r, found, err := b.getRecord(context.Background(), id)
	require.NoError(t, err)
	require.True(t, found)
	require.NotEmpty(t, r.etag)
	return sim, b, r
}

// A record the IPAM team keeps editing under each write is given up after
// three refusals, and left as it is: a transient failure, retried later,
// never a write without the precondition.
func TestAConditionalWriteGivesUpAfterThreeRefusals(t *testing.T) {
	const marker = "mgmt-a/ns/claim"
	sim, b, r := conditionalFixture(t, marker)
	edits := 0
	sim.InjectFault(netboxsim.Fault{Kind: httpfault.Before, Method: http.MethodPatch, PathContains: "/api/ipam/ip-addresses/", Times: 3,
		Then: func() {
			edits++
			time.Sleep(2 * time.Microsecond)
			sim.EditIPAddress(r.ID, func(ip *netboxsim.IPAddress) { ip.Description = fmt.Sprintf("edit %d", edits) })
		}})
	sim.ResetCalls()
	err := b.Mark(context.Background(), r, "mgmt-a/ns/other", "")
	require.ErrorIs(t, err, backends.ErrUnavailable)
	assert.Contains(t, err.Error(), "changed under each of 3 writes")
	assert.Equal(t, 3, sim.CountCalls(http.MethodPatch, "/api/ipam/ip-addresses/"), "three conditional writes, no fourth")
	left := sim.IPAddresses()
	require.Len(t, left, 1)
	assert.Equal(t, marker, left[0].CustomFields["capi_ipam_claim"], "the record keeps its marker")
	assert.Equal(t, "edit 3", left[0].Description, "and the IPAM team's last edit")
}

// A record deleted between the read and the write: a deletion has nothing
// left to do, a re-mark says the record is gone; and a record deleted
// after a refusal, before it is read again, likewise.
func TestAConditionalWriteOfARecordDeletedMeanwhile(t *testing.T) {
	ctx := context.Background()
	t.Run("before the write", func(t *testing.T) {
		sim, b, r := conditionalFixture(t, "mgmt-a/ns/claim")
		sim.DeleteIPAddress(r.ID)
		require.NoError(t, b.Drop(ctx, r), "nothing left to release is no error")
		require.ErrorIs(t, b.Mark(ctx, r, "mgmt-a/ns/other", ""), backends.ErrNotFound)
		assert.Empty(t, sim.IPAddresses(), "nothing was recreated")
	})
	t.Run("after a refusal", func(t *testing.T) {
		sim, b, r := conditionalFixture(t, "mgmt-a/ns/claim")
		sim.InjectFault(netboxsim.Fault{Kind: httpfault.Before, Method: http.MethodPatch, PathContains: "/api/ipam/ip-addresses/",
			Then: func() {
				time.Sleep(2 * time.Microsecond)
				sim.EditIPAddress(r.ID, func(ip *netboxsim.IPAddress) { ip.Description = "edited" })
			}})
		sim.InjectFault(netboxsim.Fault{Kind: httpfault.Before, Method: http.MethodGet, PathContains: fmt.Sprintf("/api/ipam/ip-addresses/%d/", r.ID),
			Then: func() { sim.DeleteIPAddress(r.ID) }})
		err := b.Mark(ctx, r, "mgmt-a/ns/other", "")
		require.ErrorIs(t, err, backends.ErrNotFound)
		assert.Contains(t, err.Error(), "was deleted meanwhile")
		assert.Empty(t, sim.IPAddresses())
	})
}

// Reads of the records at one address, of planned records and of a source's
// gateways page as searches do: with MAX_PAGE_SIZE 2, what they look for
// lies beyond the first page (an address space reused in many VRFs, a
// team's duplicates, many gateways).
func TestReadsByAddressPageWhereNetBoxAnswersShorterPages(t *testing.T) {
	ctx := context.Background()
	sim, d, _ := markerSearchSim(t, "exact")
	sim.SetMaxPageSize(2)
	var vrfs []int32
	for i := range 5 {
		vrfs = append(vrfs, sim.AddVRF(fmt.Sprintf("tenant-%d", i), ""))
	}
	pool, err := d.Prepare(ctx)
	require.NoError(t, err)

	t.Run("holders", func(t *testing.T) {
		var want []int32
		for range 5 {
			want = append(want, sim.AddIPAddress("10.0.0.9/24", netboxsim.IPOptions{}))
		}
		holders, err := d.Holders(ctx, pool.sources[0], netip.MustParseAddr("10.0.0.9"))
		require.NoError(t, err)
		assert.Equal(t, want, recordIDs(holders))
	})
	t.Run("at an address reused in other VRFs", func(t *testing.T) {
		for _, vrf := range vrfs {
			sim.AddIPAddress("10.0.0.10/24", netboxsim.IPOptions{VRF: vrf})
		}
		ours := sim.AddIPAddress("10.0.0.10/24", netboxsim.IPOptions{})
		held, err := d.AtAddress(ctx, pool, netip.MustParseAddr("10.0.0.10"))
		require.NoError(t, err)
		assert.Equal(t, []int32{ours}, recordIDs(held), "the pool's VRF's record, on the last page")
	})
	t.Run("gateways", func(t *testing.T) {
		var gws []netip.Addr
		for i := range 5 {
			gw := netip.MustParseAddr(fmt.Sprintf("10.0.0.%d", 30+i))
			sim.AddIPAddress(gw.String()+"/24", netboxsim.IPOptions{})
			gws = append(gws, gw)
		}
		unheld, err := d.Unheld(ctx, pool.sources[0], append(gws, netip.MustParseAddr("10.0.0.40")))
		require.NoError(t, err)
		assert.Equal(t, []netip.Addr{netip.MustParseAddr("10.0.0.40")}, unheld, "every recorded gateway found")
	})
	t.Run("planned", func(t *testing.T) {
		planned, _, err := newDriver(Config{
			URL: sim.URL(), Token: internalToken,
			Sources:     []Source{{Kind: SourcePrefix, CIDR: netip.MustParsePrefix("10.0.0.0/24")}},
			Reservation: Reservation{DNSNamePattern: "{{ .ClaimName }}.example.com"},
			Planned:     &Planned{Status: "reserved"},
		})
		require.NoError(t, err)
		var want []int32
		for i := range 5 {
			want = append(want, sim.AddIPAddress(fmt.Sprintf("10.0.0.%d/24", 50+i), netboxsim.IPOptions{Status: "reserved", DNSName: "m-1.example.com"}))
		}
		found, err := planned.Planned(ctx, backends.Claim{Namespace: "ns", Name: "m-1"})
		require.NoError(t, err)
		assert.Equal(t, want, recordIDs(found))
	})
	t.Run("children at a carving pool's block", func(t *testing.T) {
		// A simulator of its own: the carving pool makes its marker field,
		// for prefixes too.
		sim := netboxsim.New()
		t.Cleanup(sim.Close)
		sim.AddToken(internalToken, true)
		sim.SetMaxPageSize(2)
		sim.AddPrefix("10.9.0.0/16", netboxsim.PrefixOptions{Status: "container"})
		for i := range 5 {
			sim.AddPrefix("10.9.4.0/24", netboxsim.PrefixOptions{VRF: sim.AddVRF(fmt.Sprintf("tenant-%d", i), "")})
		}
		ours := sim.AddPrefix("10.9.4.0/24", netboxsim.PrefixOptions{})
		c, _, err := newCarver(Config{
			URL: sim.URL(), Token: internalToken,
			Sources:           []Source{{Kind: SourcePrefix, CIDR: netip.MustParsePrefix("10.9.0.0/16")}},
			ChildPrefixLength: 24,
		})
		require.NoError(t, err)
		carving, err := c.Prepare(ctx)
		require.NoError(t, err)
		held, err := c.AtAddress(ctx, carving, netip.MustParseAddr("10.9.4.0"))
		require.NoError(t, err)
		var ids []int32
		for _, p := range held {
			ids = append(ids, p.ID)
		}
		assert.Equal(t, []int32{ours}, ids, "the parent's VRF's child, on the last page")
	})
}

// recordIDs are the records' IDs, in order.
func recordIDs(records []ipRecord) []int32 {
	var ids []int32
	for _, r := range records {
		ids = append(ids, r.ID)
	}
	return ids
}
