package main

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/pkg/backendhttp"
)

// Targets of issue 15.
const (
	maxPerClaim   = 2.05
	maxPerRelease = 2.05
	maxPerResync  = 0
	maxLimitRatio = 1.5
)

// limits is a configuration's physical limit: the least time the IPAM
// system and the API server need for the burst's requests.
type limits struct {
	ipam, api time.Duration
}

func (l limits) bound() time.Duration { return max(l.ipam, l.api) }

// limitOf works the limit out: the IPAM side is the measured requests per
// new claim at the simulator's latency, spread over the workers or the
// requests the pool lets in flight, whichever are fewer (or over the pool's
// rate limit, after its burst, if that is slower); the API side is the
// writes a claim needs (the manager's, from its client metrics, plus the
// bench's create) at the API server's best measured cost per write. One
// writer's cost is mostly etcd's commit latency, which concurrent writes
// share, so the best cost, not the one at the worker count, is the
// server's capacity.
func limitOf(r *result, latency time.Duration, cost map[int]time.Duration) limits {
	n := float64(r.claims)
	l := r.limit()
	ipam := time.Duration(n * r.perClaim * float64(latency) / float64(max(1, min(r.workers, l.MaxConcurrent))))
	rate := time.Duration(max(0, n*r.perClaim-float64(l.Burst)) / float64(l.RequestsPerSecond) * float64(time.Second))
	api := time.Duration(n * (writes(r.apiPerClaim) + 1) * float64(bestCost(cost)))
	return limits{ipam: max(ipam, rate), api: api}
}

// verdictLimit is the physical limit the "all bound within maxLimitRatio×
// the limit" target divides by. limitOf, which the table prints, counts
// the run's own requests per claim, so a run that makes more requests
// raises its own limit and passes as easily: the verdict's limit must not
// grow with what the run measured. Its IPAM side counts the requests per
// new claim the targets allow the configuration (maxPerClaim unbatched,
// maxBatchedPerClaim batched), its API side the in-cluster provider's
// writes per claim (plus the bench's create), each at the cost measured
// apart from the burst: the simulator's latency, the API server's best
// cost per write.
func verdictLimit(r *result, latency time.Duration, cost map[int]time.Duration, inCluster *result) limits {
	budget := *r
	budget.perClaim = maxPerClaim
	if r.batch != 1 {
		budget.perClaim = maxBatchedPerClaim
	}
	budget.apiPerClaim = inCluster.apiPerClaim
	return limitOf(&budget, latency, cost)
}

func bestCost(cost map[int]time.Duration) time.Duration {
	best := time.Duration(0)
	for _, c := range cost {
		if best == 0 || c < best {
			best = c
		}
	}
	return best
}

// perClaimAtMost compares two figures per claim at the precision printed,
// a hundredth: below it are the few requests a burst makes whatever its
// size (a pool's status, the first reads of a pool), which are not per
// claim, and which printed "4.00 vs 4.00" as missed.
func perClaimAtMost(ours, theirs float64) bool {
	return printed(ours) <= printed(theirs)
}

// printed is x as "%.2f" prints it: math.Round(x*100) may round the other
// way (4.005 requests per claim prints 4.00, but 4.005*100 is 400.5).
func printed(x float64) float64 {
	v, _ := strconv.ParseFloat(fmt.Sprintf("%.2f", x), 64)
	return v
}

// requests sums every verb.
func requests(byVerb map[string]float64) float64 {
	n := 0.0
	for _, v := range byVerb {
		n += v
	}
	return n
}

func printBackend(w io.Writer, rows []*result, latency time.Duration, cost map[int]time.Duration) {
	if len(rows) == 0 {
		return
	}
	if rows[0].simulated {
		fmt.Fprintf(w, "\n%s: %d claims, %s per IPAM request, one run per configuration; IPAM requests are every request the simulator received\n",
			rows[0].title, rows[0].claims, latency)
	} else {
		fmt.Fprintf(w, "\n%s: %d claims at its own pace, one run per configuration; IPAM requests are every request its proxy received\n",
			rows[0].title, rows[0].claims)
	}
	fmt.Fprintf(w, "The pool's default settings (%s) but in the rows whose rate limit says tuned (%s)\n\n",
		limitLabel(backendhttp.DefaultLimit), limitLabel(config{rateLimit: tunedRateLimit}.limit()))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "workers\tbatch\trate limit\tall bound\tclaims/s\tbind p50\tbind p95\tall released\treq/new claim\treq/release\treq/resync\tmean batch (allocate/release)\tIPAM limit\tAPI limit\tratio to limit\t")
	for _, r := range rows {
		ipamLimit, apiLimit, ratio := "-", "-", "-"
		if r.simulated {
			l := limitOf(r, latency, cost)
			ipamLimit, apiLimit, ratio = round(l.ipam), round(l.api), fmt.Sprintf("%.2f", r.wall.Seconds()/l.bound().Seconds())
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%.1f\t%s\t%s\t%s\t%.2f\t%.2f\t%.2f\t%.1f/%.1f\t%s\t%s\t%s\t\n", r.workers, batchLabel(r.batch), settingsLabel(r), round(r.wall),
			float64(r.claims)/r.wall.Seconds(), round(r.p50), round(r.p95), round(r.releaseWall), r.perClaim, r.perRelease, r.perResync,
			r.allocateBatch, r.releaseBatch, ipamLimit, apiLimit, ratio)
	}
	_ = tw.Flush()
	fmt.Fprintln(w, "\nThe manager's API-server requests per claim by verb (its rest_client_requests_total)")
	fmt.Fprintln(w)
	printAPIRequests(w, rows)
	for _, r := range rows {
		if r.restartWindow > 0 {
			fmt.Fprintf(w, "\n%d workers, all %d claims bound, manager restarted: %d IPAM requests in the %s after the restart (%d claims reconciled); the pool's first validation took %d\n",
				r.workers, r.claims, r.restartRequests, r.restartWindow, r.restartReconciled, r.validation)
		}
	}
}

// printAPIRequests prints each row's API-server requests per claim by verb.
func printAPIRequests(w io.Writer, rows []*result) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "workers\tbatch\trate limit\trequests/new claim\twrites/new claim\tnew claim by verb\trequests/release\trelease by verb")
	for _, r := range rows {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%.2f\t%.2f\t%s\t%.2f\t%s\n", r.workers, batchLabel(r.batch), settingsLabel(r), requests(r.apiPerClaim), writes(r.apiPerClaim), formatVerbs(r.apiPerClaim),
			requests(r.apiPerRelease), formatVerbs(r.apiPerRelease))
	}
	_ = tw.Flush()
}

// printInCluster prints the in-cluster provider's figures for the same
// burst, in the columns of ours that apply to it: it has no IPAM system.
func printInCluster(w io.Writer, r *result, creators int) {
	fmt.Fprintf(w, "\n%s on the same envtest: %d claims from %d clients, %d claim worker (its own, fixed), one run\n\n",
		r.title, r.claims, creators, r.workers)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "workers\tall bound\tclaims/s\tbind p50\tbind p95\tall released\t")
	fmt.Fprintf(tw, "%d\t%s\t%.1f\t%s\t%s\t%s\t\n", r.workers, round(r.wall), float64(r.claims)/r.wall.Seconds(), round(r.p50), round(r.p95), round(r.releaseWall))
	_ = tw.Flush()
	fmt.Fprintf(w, "\nIts API-server requests per claim by verb (its rest_client_requests_total)\n\n")
	printAPIRequests(w, []*result{r})
}

func printScale(w io.Writer, rows []*result) {
	for _, r := range rows {
		fmt.Fprintf(w, "\n%s: %d claims, %d workers, one run\n\n", r.title, r.claims, r.workers)
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "all bound\tclaims/s\tbind p50\tbind p95\treq/new claim\treq/resync\tpeak RSS\tIPAM req in the window after a restart\tpool validation\tpeak RSS after restart\tall released\treq/release\t")
		fmt.Fprintf(tw, "%s\t%.1f\t%s\t%s\t%.2f\t%.2f\t%s\t%d in %s (%d claims reconciled)\t%d\t%s\t%s\t%.2f\t\n", round(r.wall), float64(r.claims)/r.wall.Seconds(),
			round(r.p50), round(r.p95), r.perClaim, r.perResync, mib(r.peakRSS), r.restartRequests, r.restartWindow, r.restartReconciled,
			r.validation, mib(r.restartPeakRSS), round(r.releaseWall), r.perRelease)
		_ = tw.Flush()
		printKinds(w, "The release's IPAM requests by kind", r.releaseKinds)
	}
}

// printKinds lists counted request kinds, most first.
func printKinds(w io.Writer, title string, kinds map[string]int) {
	if len(kinds) == 0 {
		return
	}
	names := slices.Collect(maps.Keys(kinds))
	slices.SortFunc(names, func(a, b string) int { return cmp.Or(kinds[b]-kinds[a], strings.Compare(a, b)) })
	fmt.Fprintf(w, "\n%s:\n", title)
	for _, n := range names {
		fmt.Fprintf(w, "  %6d  %s\n", kinds[n], n)
	}
}

func printWriteCost(w io.Writer, cost map[int]time.Duration, samples int) {
	fmt.Fprintf(w, "\nAPI-server cost per write on this envtest (%d IPAddressClaims created, then patched, by W writers; wall time ÷ writes):", samples)
	for _, n := range sortedKeys(cost) {
		fmt.Fprintf(w, "  W=%d: %s (%.0f writes/s)", n, cost[n].Round(time.Microsecond), float64(time.Second)/float64(cost[n]))
	}
	fmt.Fprintln(w, "\nIPAM limit = claims × req/new claim × latency ÷ the fewer of workers and the requests the pool lets in flight"+
		" (or, if slower, the requests beyond the pool's burst ÷ its rate limit);"+
		" API limit = claims × (the manager's writes per claim + the bench's create) × the best cost per write above"+
		" (the API server's capacity: one writer's cost is mostly etcd's commit latency, shared by concurrent writes);"+
		" the physical limit is the larger; ratio = all bound ÷ limit.")
}

// targetTable starts a table of targets under title; row adds one, with
// its verdict. Flush the writer when done.
func targetTable(w io.Writer, title string) (*tabwriter.Writer, func(target, system, measured string, met bool)) {
	fmt.Fprintf(w, "\n%s\n\n", title)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "target\tsystem\tmeasured\tresult")
	return tw, func(target, system, measured string, met bool) {
		verdict := "met"
		if !met {
			verdict = "MISSED"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", target, system, measured, verdict)
	}
}

// printTargets prints issue 15's targets against the measurements of the
// pool's default settings; inCluster, the in-cluster provider's burst, is
// nil when not measured. Its "all bound faster than the in-cluster
// provider" is issue 24's, at 10 and at 1 worker, and so is its peak
// memory at scale: printIssue24Targets prints them.
func printTargets(w io.Writer, rows, scale []*result, inCluster *result, latency time.Duration, cost map[int]time.Duration) {
	rows = untuned(rows)
	tw, row := targetTable(w, "Targets (issue 15), the pool's default settings; its \"faster than the in-cluster provider\" is issue 24's, above")
	unmeasured := func(target, system string) {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", target, system, "the in-cluster provider was not run (-incluster=false)", "not measured")
	}
	for _, group := range byTitle(rows) {
		title := group[0].title
		var worstClaim, worstRelease, worstResync float64
		best := group[0]
		for _, r := range group {
			worstClaim, worstRelease, worstResync = max(worstClaim, r.perClaim), max(worstRelease, r.perRelease), max(worstResync, r.perResync)
			if r.wall < best.wall {
				best = r
			}
		}
		row(fmt.Sprintf("≤ %.2f IPAM requests per new claim", maxPerClaim), title, fmt.Sprintf("%.2f (worst configuration)", worstClaim), worstClaim <= maxPerClaim)
		row(fmt.Sprintf("≤ %.2f IPAM requests per release", maxPerRelease), title, fmt.Sprintf("%.2f (worst configuration)", worstRelease), worstRelease <= maxPerRelease)
		row("0 IPAM requests per resync", title, fmt.Sprintf("%.2f (worst configuration)", worstResync), worstResync <= maxPerResync)
		for _, r := range group {
			if r.restartWindow > 0 {
				row("after a restart ≤ a validation of each pool", title,
					fmt.Sprintf("%d requests in %s vs %d (%d claims)", r.restartRequests, r.restartWindow, r.validation, r.claims), r.restartRequests <= r.validation)
			}
		}
		limitTarget := fmt.Sprintf("all bound ≤ %.1f× the physical limit at the best worker count", maxLimitRatio)
		const requestsTarget = "API-server requests per claim ≤ the in-cluster provider's"
		if inCluster == nil {
			unmeasured(requestsTarget, title)
			if best.simulated {
				unmeasured(limitTarget, title)
			}
			continue
		}
		if best.simulated {
			l := verdictLimit(best, latency, cost, inCluster)
			ratio := best.wall.Seconds() / l.bound().Seconds()
			row(limitTarget, title,
				fmt.Sprintf("%s vs %s: %.2f× (%s)", round(best.wall), round(l.bound()), ratio, configLabel(best)), ratio <= maxLimitRatio)
		}
		row(requestsTarget, title, fmt.Sprintf("%.2f (%s; %s) vs %.2f (%s)", requests(best.apiPerClaim), formatVerbs(best.apiPerClaim),
			configLabel(best), requests(inCluster.apiPerClaim), formatVerbs(inCluster.apiPerClaim)), perClaimAtMost(requests(best.apiPerClaim), requests(inCluster.apiPerClaim)))
	}
	// The peak memory at scale is issue 24's target too: printIssue24Targets.
	for _, r := range scale {
		row("after a restart ≤ a validation of each pool", r.title,
			fmt.Sprintf("%d requests in %s vs %d (%d claims)", r.restartRequests, r.restartWindow, r.validation, r.claims), r.restartRequests <= r.validation)
	}
	_ = tw.Flush()
}

// Targets of issue 16: batching makes a burst at least this many times
// faster, and the real NetBox's times that issue measured without it.
const (
	minBatchSpeedup       = 5
	maxBatchedPerClaim    = 0.5
	realUnbatchedBound    = 107 * time.Second // 1 min 47 s
	realUnbatchedReleased = 144 * time.Second // 2 min 24 s
	realUnbatchedClaims   = 1000
)

// printBatchTargets compares, per system, the fastest configuration with
// batching on to the fastest with it off, at the pool's default settings.
func printBatchTargets(w io.Writer, rows []*result) {
	rows = untuned(rows)
	tw, row := targetTable(w, "Targets (issue 16), the pool's default settings: batching on (the fastest configuration) against batching off"+
		" (the fastest with --max-batch-size=1); the tables above compare them on the simulators too")
	for _, group := range byTitle(rows) {
		title := group[0].title
		on := fastest(group, func(r *result) bool { return r.batch > 1 }, func(r *result) time.Duration { return r.wall })
		off := fastest(group, func(r *result) bool { return r.batch <= 1 }, func(r *result) time.Duration { return r.wall })
		if on == nil {
			continue
		}
		onReleased := fastest(group, func(r *result) bool { return r.batch > 1 }, func(r *result) time.Duration { return r.releaseWall })
		// The fifths are the real NetBox's targets, whose per-prefix lock
		// makes each unbatched allocation a locked round trip; at the
		// simulators' 10 ms the API server, not the lock, sets the pace.
		if off != nil && !on.simulated {
			offReleased := fastest(group, func(r *result) bool { return r.batch <= 1 }, func(r *result) time.Duration { return r.releaseWall })
			row(fmt.Sprintf("all bound ≤ 1/%d of batching off", minBatchSpeedup), title,
				fmt.Sprintf("%s (%s) vs %s (%s): %.1f× faster", round(on.wall), configLabel(on), round(off.wall), configLabel(off), off.wall.Seconds()/on.wall.Seconds()),
				on.wall*minBatchSpeedup <= off.wall)
			row(fmt.Sprintf("all released ≤ 1/%d of batching off", minBatchSpeedup), title,
				fmt.Sprintf("%s (%s) vs %s (%s): %.1f× faster", round(onReleased.releaseWall), configLabel(onReleased), round(offReleased.releaseWall),
					configLabel(offReleased), offReleased.releaseWall.Seconds()/onReleased.releaseWall.Seconds()),
				onReleased.releaseWall*minBatchSpeedup <= offReleased.releaseWall)
		}
		// Issue 16's times are of 1,000 claims.
		if !on.simulated && on.claims == realUnbatchedClaims {
			row(fmt.Sprintf("all bound ≤ %s (1/%d of issue 16's %s)", round(realUnbatchedBound/minBatchSpeedup), minBatchSpeedup, round(realUnbatchedBound)), title,
				fmt.Sprintf("%s (%s)", round(on.wall), configLabel(on)), on.wall <= realUnbatchedBound/minBatchSpeedup)
			row(fmt.Sprintf("all released ≤ %s (1/%d of issue 16's %s)", round(realUnbatchedReleased/minBatchSpeedup), minBatchSpeedup, round(realUnbatchedReleased)), title,
				fmt.Sprintf("%s (%s)", round(onReleased.releaseWall), configLabel(onReleased)), onReleased.releaseWall <= realUnbatchedReleased/minBatchSpeedup)
		}
		row(fmt.Sprintf("≤ %.1f IPAM requests per claim in a burst", maxBatchedPerClaim), title,
			fmt.Sprintf("%.2f per new claim, %.2f per release (%s)", on.perClaim, on.perRelease, configLabel(on)), on.perClaim <= maxBatchedPerClaim)
	}
	_ = tw.Flush()
}

// fastest returns the row of the least key among those that match, or nil.
func fastest(rows []*result, match func(*result) bool, key func(*result) time.Duration) *result {
	var best *result
	for _, r := range rows {
		if match(r) && (best == nil || key(r) < key(best)) {
			best = r
		}
	}
	return best
}

func batchLabel(n int) string {
	if n <= 1 {
		return "off"
	}
	return fmt.Sprintf("%d", n)
}

func configLabel(r *result) string {
	if r.tuned() {
		return fmt.Sprintf("%d workers, batch %s, tuned", r.workers, batchLabel(r.batch))
	}
	return fmt.Sprintf("%d workers, batch %s", r.workers, batchLabel(r.batch))
}

// settingsLabel says whether a row ran the pool's default rate limit.
func settingsLabel(r *result) string {
	switch {
	case r.backend == inClusterBackend:
		return "-"
	case r.tuned():
		return "tuned"
	}
	return "default"
}

func limitLabel(l backendhttp.Limit) string {
	return fmt.Sprintf("rate limit %d requests/s, burst %d, %d in flight", l.RequestsPerSecond, l.Burst, l.MaxConcurrent)
}

// untuned returns the rows of the pool's default settings.
func untuned(rows []*result) []*result {
	var out []*result
	for _, r := range rows {
		if !r.tuned() {
			out = append(out, r)
		}
	}
	return out
}

// byTitle groups results by system, in order of appearance.
func byTitle(rows []*result) [][]*result {
	var out [][]*result
	index := map[string]int{}
	for _, r := range rows {
		i, ok := index[r.title]
		if !ok {
			i = len(out)
			index[r.title] = i
			out = append(out, nil)
		}
		out[i] = append(out[i], r)
	}
	return out
}

func sortedKeys(m map[int]time.Duration) []int { return slices.Sorted(maps.Keys(m)) }

func round(d time.Duration) string {
	if d >= 10*time.Second {
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Millisecond).String()
}

func mib(b int64) string { return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20)) }

// carvingRow is the carving row of one backend: its runs, and on the real
// NetBox the floor measured before each.
type carvingRow struct {
	runs   []*result
	floors []*netboxFloor
}

// median is the run whose time to all carved is the median.
func (r *carvingRow) median() *result {
	runs := slices.Clone(r.runs)
	slices.SortFunc(runs, func(a, b *result) int { return cmp.Compare(a.wall, b.wall) })
	return runs[len(runs)/2]
}

// medianFloor is the floor whose create time is the median.
func medianFloor(floors []*netboxFloor) *netboxFloor {
	floors = slices.Clone(floors)
	slices.SortFunc(floors, func(a, b *netboxFloor) int { return cmp.Compare(a.create, b.create) })
	return floors[len(floors)/2]
}

// Issue 42's aims for the carving row: IPAM requests per carve, and time to
// all carved beside NetBox's floor.
const (
	maxPerCarve   = 0.2
	maxCarveRatio = 1.5
	// carveWrites are the API-server writes the contract needs per claim:
	// its finalizer, its IPAddress and its status.
	carveWrites = 3
)

// carveAPILimit is the least time the API server needs for a carving row's
// writes: the contract's per claim and the bench's create, at the best cost
// per write measured apart from the run. NetBox's floor writes no claim;
// the line beside the table says how much of the gap the API server's own
// capacity explains.
func carveAPILimit(claims int, cost map[int]time.Duration) time.Duration {
	return time.Duration(float64(claims) * (carveWrites + 1) * float64(bestCost(cost)))
}

// printCarving prints the carving rows: claims of a pool with childPrefixes
// created at once, each carved a child, beside the real NetBox alone
// carving as many children in lists (its floor) and the API server's limit
// for the writes the claims need. Each row is its median run, and the floor
// the median of the floors measured in turn with it. Issue 42's targets
// follow.
func printCarving(w io.Writer, rows []*carvingRow, floor *netboxFloor, latency time.Duration, cost map[int]time.Duration) {
	if len(rows) == 0 {
		return
	}
	first := rows[0].runs[0]
	apiLimit := carveAPILimit(first.claims, cost)
	fmt.Fprintf(w, "\nCarving: %d claims of a pool with childPrefixes (/%d children of a /16) created at once, the pool's defaults, median of %d runs; simulators answer at %s per request\n\n",
		first.claims, first.carve, len(rows[0].runs), latency)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "system\tworkers\tbatch\tall carved\truns\tlast carve answered\tcarve p50\tcarve p95\treq/carve\tmean batch\tAPI writes/carve\tall released\treq/release\tto NetBox's floor\t")
	for _, row := range rows {
		r := row.median()
		var runs []string
		for _, run := range row.runs {
			runs = append(runs, round(run.wall))
		}
		toFloor := "-"
		if !r.simulated && floor != nil {
			toFloor = fmt.Sprintf("%.2f", ratio(r.wall, floor.create))
		}
		lastCreate := "-"
		if r.lastCreate > 0 {
			lastCreate = round(r.lastCreate)
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%.2f\t%.1f\t%.2f\t%s\t%.2f\t%s\t\n", r.title, r.workers, batchLabel(r.batch), round(r.wall),
			strings.Join(runs, " "), lastCreate, round(r.p50), round(r.p95), r.perClaim, r.allocateBatch, writes(r.apiPerClaim),
			round(r.releaseWall), r.perRelease, toFloor)
	}
	_ = tw.Flush()
	fmt.Fprintln(w, "\nall carved: from the first claim's creation until the last was bound (its IPAddress written); last carve answered: until NetBox answered the last create request of the same run")
	if floor != nil {
		var floors []string
		for _, row := range rows {
			for _, f := range row.floors {
				floors = append(floors, round(f.create))
			}
		}
		fmt.Fprintf(w, "NetBox (real) alone: %d children carved in %s (median of %s; %d requests, lists of %d), deleted in %s (%d requests)\n",
			floor.records, round(floor.create), strings.Join(floors, " "), floor.createRequests, floor.batch, round(floor.delete), floor.deleteRequests)
	}
	fmt.Fprintf(w, "API limit: %d claims × (%d writes the contract needs, finalizer, IPAddress and status, + the bench's create) × %s, the best cost per write measured apart = %s; NetBox's floor makes none of these writes\n",
		first.claims, carveWrites, round(bestCost(cost)), round(apiLimit))
	printCarvingTargets(w, rows, floor)
}

// printCarvingTargets prints issue 42's targets for the carving rows: IPAM
// requests per carve on every system, and on the real NetBox the time to
// all carved against NetBox's floor.
func printCarvingTargets(w io.Writer, rows []*carvingRow, floor *netboxFloor) {
	tw, row := targetTable(w, "Targets (issue 42), the pool's defaults")
	for _, cr := range rows {
		r := cr.median()
		row(fmt.Sprintf("≤ %.1f IPAM requests per carve", maxPerCarve), r.title, fmt.Sprintf("%.2f", r.perClaim), printed(r.perClaim) <= maxPerCarve)
		if r.simulated || floor == nil {
			continue
		}
		toFloor := ratio(r.wall, floor.create)
		row(fmt.Sprintf("all carved in ≤ %.1f× NetBox's floor", maxCarveRatio), r.title,
			fmt.Sprintf("%s vs %s: %.2f×", round(r.wall), round(floor.create), toFloor), toFloor <= maxCarveRatio)
	}
	_ = tw.Flush()
}
