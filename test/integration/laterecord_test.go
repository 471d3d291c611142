package integration

import (
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A create that the IPAM system holds (queued behind its lock) outlives the
// manager that sent it: the successor's marker search cannot see it, so
// the successor reserves the claim's address anew, and the held create
// lands afterwards, a second record for one claim. Within the late-record
// window the claim holds one record again, the one its IPAddress names.
func TestACreateThatLandsAfterItsManagerDiedIsDeletedSoon(t *testing.T) {
	bin := managerBinary(t)
	forEachSystem(t, func(t *testing.T, f *fixture) {
		const window = 40 * time.Second
		f.filter = "laterecord-" + f.ns
		f.seedNetwork("10.29.0.0/24")
		f.createPool("pool", "10.29.0.0/24")
		gate := make(chan struct{})
		arrived := f.sys.holdNextAllocation(gate)
		t.Cleanup(func() {
			select {
			case <-gate:
			default:
				close(gate)
			}
		})
		mgr := startManagerProcess(t, bin, f.filter, "--late-record-window="+window.String())
		claim := f.createClaim("late", "pool")
		select {
		case <-arrived:
		case <-time.After(waitTimeout):
			t.Fatal("the claim's create never reached the IPAM system")
		}
		mgr.Kill()
		require.NoError(t, mgr.Start())
		address := f.waitBound(claim)
		bound := netip.MustParseAddr(address.Spec.Address)

		close(gate)
		marker := f.marker(claim.Name)
		require.Eventually(t, func() bool { return len(f.recordsWithMarker(marker)) == 2 }, waitTimeout, 50*time.Millisecond,
			"the dead manager's create lands after its successor bound the claim")
		landed := time.Now()

		require.EventuallyWithT(t, func(c *assert.CollectT) {
			records := f.recordsWithMarker(marker)
			if assert.Len(c, records, 1, "the late record is deleted") {
				assert.Equal(c, bound, records[0].Address.Addr(), "the record kept is the one the IPAddress names")
			}
		}, window+waitTimeout, 200*time.Millisecond)
		t.Logf("the late record was deleted %s after it landed (window %s)", time.Since(landed).Round(time.Second), window)
		mgr.Stop()
	})
}
