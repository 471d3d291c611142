package main

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/httpfault"
	"github.com/stretchr/testify/assert"
)

// The requests per claim are judged as printed: a tie at two decimals is a
// tie, and a hundredth more is more.
func TestPerClaimAtMostJudgesWhatIsPrinted(t *testing.T) {
	for _, tc := range []struct {
		ours, theirs float64
		want         bool
	}{
		{ours: 4005.0 / 1000, theirs: 4.0, want: true}, // prints 4.00 vs 4.00; 4.005*100 is 400.5
		{ours: 4.0, theirs: 4.0, want: true},
		{ours: 3.99, theirs: 4.0, want: true},
		{ours: 4.01, theirs: 4.0, want: false},
		{ours: 4012.0 / 1000, theirs: 4008.0 / 1000, want: true}, // 4.01 vs 4.01
	} {
		assert.Equal(t, tc.want, perClaimAtMost(tc.ours, tc.theirs), "%.4f vs %.4f", tc.ours, tc.theirs)
	}
}

// The physical limit the verdict divides by does not grow with the
// requests the run made: a run that makes twice the requests per claim
// gets the same limit, and so a worse ratio.
func TestVerdictLimitDoesNotGrowWithTheRunsRequests(t *testing.T) {
	cost := map[int]time.Duration{1: 4 * time.Millisecond, 10: 2 * time.Millisecond}
	inCluster := &result{apiPerClaim: map[string]float64{"POST": 1, "PATCH": 2, "GET": 5}}
	run := func(perClaim, writes float64) *result {
		return &result{config: config{claims: 100, workers: 10, batch: 1}, perClaim: perClaim, apiPerClaim: map[string]float64{"POST": writes}}
	}
	lean, heavy := run(1, 3), run(2, 6)
	latency := 20 * time.Millisecond
	assert.Equal(t, verdictLimit(lean, latency, cost, inCluster), verdictLimit(heavy, latency, cost, inCluster))
	// The table's limit, which counts the run's requests, does grow.
	assert.Less(t, limitOf(lean, latency, cost).bound(), limitOf(heavy, latency, cost).bound())
}

// A carving row is its median run, and its ratio divides by the median of
// the floors measured in turn with it: one slow run of either does not
// make the figure.
func TestCarvingRowTakesTheMedians(t *testing.T) {
	row := &carvingRow{runs: []*result{{wall: 5 * time.Second}, {wall: 9 * time.Second}, {wall: 4 * time.Second}}}
	assert.Equal(t, 5*time.Second, row.median().wall)
	floors := []*netboxFloor{{create: 2 * time.Second}, {create: 4 * time.Second}, {create: 3 * time.Second}}
	assert.Equal(t, 3*time.Second, medianFloor(floors).create)
	assert.Equal(t, 2*time.Second, floors[0].create, "the floors keep their order")
}

// The last carve answered is the last create's answer, whatever searches
// follow it.
func TestLastCreateAnsweredIgnoresReads(t *testing.T) {
	start := time.Now()
	calls := []httpfault.Call{
		{Method: http.MethodGet, At: start.Add(time.Second)},
		{Method: http.MethodPost, At: start.Add(2 * time.Second)},
		{Method: http.MethodPost, At: start.Add(3 * time.Second)},
		{Method: http.MethodGet, At: start.Add(4 * time.Second)},
	}
	assert.Equal(t, 3*time.Second, lastCreateAnswered(calls, start))
	assert.Zero(t, lastCreateAnswered(calls[:1], start))
}

// Issue 42's carving targets: requests per carve on every system; on the
// real NetBox the time to all carved against NetBox's floor. The API
// server's limit counts the contract's writes and the bench's create.
func TestCarvingTargetsJudgeRequestsAndTheFloor(t *testing.T) {
	cost := map[int]time.Duration{10: 20 * time.Millisecond, 50: 12500 * time.Microsecond}
	assert.Equal(t, 5*time.Second, carveAPILimit(100, cost), "100 claims × (3 writes + the bench's create) × the best cost")

	for _, tc := range []struct {
		name          string
		wall          time.Duration
		wantFloorMet  string
		perClaim      float64
		wantPerCarve  string
		simulated     bool
		wantFloorLine bool
	}{
		{name: "within the floor's ratio", wall: 4 * time.Second, perClaim: 0.07, wantPerCarve: "met", wantFloorMet: "met", wantFloorLine: true},
		{name: "beyond it", wall: 6 * time.Second, perClaim: 0.07, wantPerCarve: "met", wantFloorMet: "MISSED", wantFloorLine: true},
		{name: "too many requests", wall: 4 * time.Second, perClaim: 0.25, wantPerCarve: "MISSED", wantFloorMet: "met", wantFloorLine: true},
		{name: "a simulator has no floor", wall: time.Second, perClaim: 0.07, wantPerCarve: "met", simulated: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			row := &carvingRow{runs: []*result{{title: "system", simulated: tc.simulated, config: config{claims: 100}, wall: tc.wall, perClaim: tc.perClaim}}}
			var out strings.Builder
			printCarvingTargets(&out, []*carvingRow{row}, &netboxFloor{create: 3 * time.Second})
			verdict := func(target string) string {
				for _, l := range strings.Split(out.String(), "\n") {
					if strings.HasPrefix(l, target) {
						return l[strings.LastIndex(l, " ")+1:]
					}
				}
				return ""
			}
			assert.Equal(t, tc.wantPerCarve, verdict("≤ 0.2 IPAM requests per carve"))
			if !tc.wantFloorLine {
				assert.Empty(t, verdict("all carved in ≤ 1.5× NetBox's floor"))
				return
			}
			assert.Equal(t, tc.wantFloorMet, verdict("all carved in ≤ 1.5× NetBox's floor"))
		})
	}
}
