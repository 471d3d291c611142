package conformance_test

import (
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/netboxsim"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/netboxtarget"
)

// The NetBox driver's writes of a record it read are conditional: they
// send the read's ETag as If-Match, so that a record the IPAM team changed
// since is never overwritten or deleted. That holds only while NetBox
// answers a read with an ETag and refuses a stale If-Match; were either to
// stop, every write would silently go out unconditional. This runs against
// the real NetBox in make test-real-netbox, and the simulator otherwise.
func TestNetBoxAnswersAReadWithAnETagAndRefusesAStaleWrite(t *testing.T) {
	target := netboxtarget.New(t)
	const token = "e7a90000000000000000000000000000000000e7"
	target.AddToken(token, true)
	id := target.AddIPAddress(fmt.Sprintf("192.0.2.%d/24", 100+time.Now().Nanosecond()%100), netboxsim.IPOptions{Description: "etag test"})
	t.Cleanup(func() {
		for _, ip := range target.IPAddresses() {
			if ip.ID == id {
				target.DeleteIPAddress(id)
			}
		}
	})
	path := fmt.Sprintf("%s/api/ipam/ip-addresses/%d/", target.URL(), id)
	send := func(method, ifMatch, body string) *http.Response {
		t.Helper()
		var req *http.Request
		var err error
		if body == "" {
			req, err = http.NewRequest(method, path, nil)
		} else {
			req, err = http.NewRequest(method, path, strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
		}
		require.NoError(t, err)
		req.Header.Set("Authorization", "Token "+token)
		req.Header.Set("Accept", "application/json")
		if ifMatch != "" {
			req.Header.Set("If-Match", ifMatch)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp
	}

	read := send(http.MethodGet, "", "")
	require.Equal(t, http.StatusOK, read.StatusCode)
	etag := read.Header.Get("ETag")
	require.NotEmpty(t, etag, "NetBox answers a read of one IP address with its ETag")
	assert.Regexp(t, regexp.MustCompile(`^W/"`), etag, "a weak ETag, from last_updated")

	// The IPAM team edits the record after the read.
	time.Sleep(2 * time.Millisecond)
	target.EditIPAddress(id, func(ip *netboxsim.IPAddress) { ip.Description = "edited by the IPAM team" })

	stale := send(http.MethodPatch, etag, `{"description": "the provider's"}`)
	assert.Equal(t, http.StatusPreconditionFailed, stale.StatusCode, "a write whose If-Match is stale is refused")
	assert.Equal(t, http.StatusPreconditionFailed, send(http.MethodDelete, etag, "").StatusCode, "so is a deletion")
	var description string
	for _, ip := range target.IPAddresses() {
		if ip.ID == id {
			description = ip.Description
		}
	}
	assert.Equal(t, "edited by the IPAM team", description, "a refused write changed nothing")

	fresh := send(http.MethodGet, "", "")
	require.Equal(t, http.StatusOK, fresh.StatusCode)
	assert.NotEqual(t, etag, fresh.Header.Get("ETag"), "the edit changed the ETag")
	assert.Equal(t, http.StatusOK, send(http.MethodPatch, fresh.Header.Get("ETag"), `{"description": "the provider's"}`).StatusCode,
		"a write with the current ETag goes through")
}
