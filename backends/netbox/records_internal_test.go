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
	b, err := New(Config{
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

	found, err := b.findByMarkers(context.Background(), markers, true)
	require.NoError(t, err)
	assert.Len(t, found[cut], 1, "the adopted record, once")
}
