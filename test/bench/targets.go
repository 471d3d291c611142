package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends"
)

// Targets of issue 24, judged on the pool's default settings: a burst binds
// in no more time than the in-cluster provider's at 10 claim workers (the
// default) and at 1, with few IPAM requests; on the real NetBox, close to
// what NetBox alone needs for the same records; at scale, in little memory
// and in time that grows with the claims.
const (
	// maxVsInCluster: a simulator's burst in at most the in-cluster
	// provider's time, at each of targetWorkers.
	maxVsInCluster = 1.0
	// maxSimPerClaim is the IPAM requests per new claim on a simulator.
	maxSimPerClaim = 0.1
	// maxRealBindVsFloor: the real NetBox's burst bound within this many
	// times the larger of its floor and the in-cluster provider's time.
	maxRealBindVsFloor = 1.5
	// maxRealReleaseVsFloor: released within this many times the floor for
	// deleting the same records.
	maxRealReleaseVsFloor = 1.3
	// maxScalePeakMiB is the peak RSS of the large burst.
	maxScalePeakMiB = 150
	// maxScaleTimePerClaims: the large burst binds in at most 1.05 times
	// its share of the small burst's time, 10.5× for 10 times the claims.
	maxScaleTimePerClaims = 1.05
)

// targetWorkers are the claim-worker counts issue 24 judges: the default
// (--ipaddressclaim-concurrency) and one.
var targetWorkers = []int{10, 1}

// defaultRow returns the row of system title at the pool's default
// settings (batches of backends.DefaultMaxBatchSize, the default rate
// limit) with the given workers, or nil when the run had none.
func defaultRow(rows []*result, title string, workers int) *result {
	for _, r := range rows {
		if r.title == title && r.workers == workers && r.batch == backends.DefaultMaxBatchSize && !r.tuned() {
			return r
		}
	}
	return nil
}

// printFloor prints what the real NetBox alone needed for the burst's records.
func printFloor(w io.Writer, title string, f *netboxFloor) {
	fmt.Fprintf(w, "\n%s alone (its floor): %d records, with the provider's tag, marker field and description, POSTed to available-ips"+
		" of the bench's prefix by one plain client with nothing else running, then deleted by bulk DELETE, in lists of %d; one run\n\n",
		title, f.records, f.batch)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "list size\tall created\trecords/s\tPOSTs\tall deleted\trecords/s\tDELETEs\t")
	fmt.Fprintf(tw, "%d\t%s\t%.1f\t%d\t%s\t%.1f\t%d\t\n", f.batch, round(f.create), float64(f.records)/f.create.Seconds(), f.createRequests,
		round(f.delete), float64(f.records)/f.delete.Seconds(), f.deleteRequests)
	_ = tw.Flush()
}

// ratio formats a÷b.
func ratio(a, b time.Duration) float64 { return a.Seconds() / b.Seconds() }

// printSummary prints issue 24's table: every burst's time against the
// in-cluster provider's, and on the real NetBox against its floor.
func printSummary(w io.Writer, rows, scale []*result, inCluster *result, floor *netboxFloor) {
	fmt.Fprintln(w, "\nSummary: time to all bound and IPAM requests per claim, against the in-cluster provider on the same burst"+
		" (ratio = ours ÷ its; above 1 is slower); the pool's default settings but in rows marked tuned")
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "system\tclaims\tworkers\tbatch\trate limit\tall bound\tall released\tIPAM req/new claim\tIPAM req/release\tvs in-cluster provider\tvs the NetBox floor")
	if inCluster != nil {
		fmt.Fprintf(tw, "%s (no IPAM system)\t%d\t%d (fixed)\t-\t-\t%s\t%s\t-\t-\t1.00\t-\n", inCluster.title, inCluster.claims, inCluster.workers,
			round(inCluster.wall), round(inCluster.releaseWall))
	}
	for _, r := range append(append([]*result{}, rows...), scale...) {
		vsInCluster, vsFloor := "-", "-"
		if inCluster != nil && r.claims == inCluster.claims {
			vsInCluster = fmt.Sprintf("%.2f", ratio(r.wall, inCluster.wall))
		}
		if !r.simulated && floor != nil && r.claims == floor.records {
			vsFloor = fmt.Sprintf("bound %.2f× max(floor, in-cluster), released %.2f× the delete floor",
				ratio(r.wall, realBindYardstick(floor, inCluster)), ratio(r.releaseWall, floor.delete))
		}
		released := "-"
		if r.release {
			released = round(r.releaseWall)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%s\t%s\t%.2f\t%s\t%s\t%s\n", r.title, r.claims, r.workers, batchLabel(r.batch), settingsLabel(r),
			round(r.wall), released, r.perClaim, releaseRequests(r), vsInCluster, vsFloor)
	}
	if floor != nil {
		fmt.Fprintf(tw, "NetBox (real) alone, one plain client (the floor)\t%d\t-\t%d\t-\t%s\t%s\t%.2f\t%.2f\t-\t-\n",
			floor.records, floor.batch, round(floor.create), round(floor.delete),
			float64(floor.createRequests)/float64(floor.records), float64(floor.deleteRequests)/float64(floor.records))
	}
	_ = tw.Flush()
}

func releaseRequests(r *result) string {
	if !r.release {
		return "-"
	}
	return fmt.Sprintf("%.2f", r.perRelease)
}

// realBindYardstick is the larger of the floor's create time and the
// in-cluster provider's time, of those measured.
func realBindYardstick(floor *netboxFloor, inCluster *result) time.Duration {
	var d time.Duration
	if floor != nil {
		d = floor.create
	}
	if inCluster != nil {
		d = max(d, inCluster.wall)
	}
	return d
}

// printIssue24Targets prints issue 24's targets against the rows of the
// pool's default settings. inCluster and floor are nil when not measured.
func printIssue24Targets(w io.Writer, rows, scale []*result, inCluster *result, floor *netboxFloor) {
	tw, row := targetTable(w, "Targets (issue 24), the pool's default settings")
	notMeasured := func(target, system, why string) {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", target, system, why, "not measured")
	}
	for _, group := range byTitle(untuned(rows)) {
		title := group[0].title
		if group[0].simulated {
			var perClaim []*result
			for _, workers := range targetWorkers {
				target := fmt.Sprintf("all bound in ≤ %.1f× the in-cluster provider's time, %s", maxVsInCluster, workersText(workers))
				r := defaultRow(group, title, workers)
				switch {
				case r == nil:
					notMeasured(target, title, fmt.Sprintf("no row of %d workers, batch %d (-workers, -batch)", workers, backends.DefaultMaxBatchSize))
					continue
				case inCluster == nil:
					notMeasured(target, title, "the in-cluster provider was not run (-incluster=false)")
				default:
					x := ratio(r.wall, inCluster.wall)
					row(target, title, fmt.Sprintf("%s vs %s: %.2f×", round(r.wall), round(inCluster.wall), x), x <= maxVsInCluster)
				}
				perClaim = append(perClaim, r)
			}
			target := fmt.Sprintf("≤ %.1f IPAM requests per new claim, %s workers", maxSimPerClaim, workersLabel(targetWorkers))
			if len(perClaim) == 0 {
				notMeasured(target, title, "no row of the default settings at those workers")
				continue
			}
			measured, met := "", true
			for i, r := range perClaim {
				if i > 0 {
					measured += "; "
				}
				measured += fmt.Sprintf("%.2f at %s (%.2f per release)", r.perClaim, workersText(r.workers), r.perRelease)
				met = met && r.perClaim <= maxSimPerClaim
			}
			row(target, title, measured, met)
			continue
		}

		// The real NetBox, at the default worker count.
		workers := targetWorkers[0]
		r := defaultRow(group, title, workers)
		bindTarget := fmt.Sprintf("all bound in ≤ %.1f× max(the NetBox floor, the in-cluster provider's time), %d workers", maxRealBindVsFloor, workers)
		releaseTarget := fmt.Sprintf("all released in ≤ %.1f× the NetBox floor for deleting the records, %d workers", maxRealReleaseVsFloor, workers)
		if r == nil {
			why := fmt.Sprintf("no row of %d workers, batch %d (-workers, -batch)", workers, backends.DefaultMaxBatchSize)
			notMeasured(bindTarget, title, why)
			notMeasured(releaseTarget, title, why)
			continue
		}
		var parts []string
		if floor != nil {
			parts = append(parts, "floor "+round(floor.create))
		}
		if inCluster != nil {
			parts = append(parts, "in-cluster "+round(inCluster.wall))
		}
		if yard := realBindYardstick(floor, inCluster); yard > 0 {
			x := ratio(r.wall, yard)
			measured := fmt.Sprintf("%s vs max(%s) = %s: %.2f×", round(r.wall), strings.Join(parts, ", "), round(yard), x)
			switch {
			case floor != nil && inCluster != nil, x <= maxRealBindVsFloor:
				// The yardstick only grows with what is missing: a ratio
				// within the target against a part of it is within it.
				row(bindTarget, title, measured, x <= maxRealBindVsFloor)
			case floor == nil:
				notMeasured(bindTarget, title, measured+"; the floor was not measured (-netbox-floor=false)")
			default:
				notMeasured(bindTarget, title, measured+"; the in-cluster provider was not run (-incluster=false)")
			}
		} else {
			notMeasured(bindTarget, title, "neither the floor (-netbox-floor) nor the in-cluster provider (-incluster) was measured")
		}
		if floor == nil {
			notMeasured(releaseTarget, title, "the floor was not measured (-netbox-floor=false)")
			continue
		}
		x := ratio(r.releaseWall, floor.delete)
		row(releaseTarget, title, fmt.Sprintf("%s vs %s: %.2f×", round(r.releaseWall), round(floor.delete), x), x <= maxRealReleaseVsFloor)
	}
	for _, r := range scale {
		row(fmt.Sprintf("peak RSS ≤ %d MiB at %d claims", maxScalePeakMiB, r.claims), r.title, mib(r.peakRSS)+" (VmHWM)", r.peakRSS <= maxScalePeakMiB<<20)
		base := defaultRow(rows, r.title, r.workers)
		if base == nil || base.claims == 0 {
			notMeasured("bind time grows with the claims", r.title, fmt.Sprintf("no %d-worker row of the default settings to compare with", r.workers))
			continue
		}
		factor := maxScaleTimePerClaims * float64(r.claims) / float64(base.claims)
		x := ratio(r.wall, base.wall)
		row(fmt.Sprintf("all bound in ≤ %.1f× the time of %d claims, %d workers", factor, base.claims, r.workers), r.title,
			fmt.Sprintf("%s vs %s: %.2f×", round(r.wall), round(base.wall), x), x <= factor)
	}
	_ = tw.Flush()
}

func workersText(n int) string {
	if n == 1 {
		return "1 worker"
	}
	return fmt.Sprintf("%d workers", n)
}

func workersLabel(ws []int) string {
	out := ""
	for i, w := range ws {
		switch {
		case i == 0:
		case i == len(ws)-1:
			out += " and "
		default:
			out += ", "
		}
		out += fmt.Sprint(w)
	}
	return out
}
