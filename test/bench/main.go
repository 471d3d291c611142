// Command bench measures the provider end to end: a real kube-apiserver
// and etcd (envtest), an IPAM simulator (NetBox or WAPI) answering with a
// fixed latency and counting every request it receives, and the manager
// binary, built from ./cmd, as a process of its own (so that its resident
// memory and its client metrics are its own).
//
// Every pool runs its default settings (the default rate limit and
// --max-batch-size), as users run it; rows with a tuned rate limit are
// added only on request (-tuned-workers) and labelled "tuned". For each
// backend and each claim-worker count it binds a burst of claims, resyncs
// them, and releases them; it prints the time until all are bound, bind
// latency percentiles, IPAM requests per new claim, per resync and per
// release (everything included: pool validations and count refreshes), the
// manager's API-server requests per claim by verb, and the configuration's
// physical limit. On a real NetBox it first times NetBox alone: the same
// records POSTed to available-ips and deleted again by a plain client (the
// floor). The in-cluster IPAM provider binds the same burst on the same
// envtest, for comparison; a larger burst on one backend measures peak
// memory and the requests after a restart. Last, it prints a summary with
// each time as a ratio to the in-cluster provider's (and to the floor), the
// targets of issue 24 with met or missed, and those of issues 15 and 16
// still meaningful. One run per configuration: machines are noisy, so read
// the figures as such.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/go-logr/logr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/api/v1alpha1"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/pkg/scheme"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/envtestenv"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/managerproc"
)

func main() { os.Exit(benchMain()) }

func benchMain() int {
	var (
		backendsFlag  = flag.String("backends", "netbox-sim,wapi-sim", "IPAM systems, comma-separated: netbox-sim, wapi-sim, netbox-real (the NetBox of NETBOX_URL and the env file hack/netbox/up.sh prints)")
		claims        = flag.Int("claims", 1000, "claims per burst")
		workersFlag   = flag.String("workers", "1,10,50", "claim-worker counts (--ipaddressclaim-concurrency), comma-separated")
		batch         = flag.Int("batch", backends.DefaultMaxBatchSize, "the manager's --max-batch-size for the worker counts of -workers and -tuned-workers, and the NetBox floor's list size; issue 24's targets judge only the default")
		unbatchedFlag = flag.String("unbatched-workers", "10,50", "claim-worker counts also run with batching off (--max-batch-size=1), comma-separated; empty for none")
		tunedFlag     = flag.String("tuned-workers", "", fmt.Sprintf("claim-worker counts also run with a tuned rate limit (%d requests/s, burst %d, %d in flight) instead of the pool's default, labelled \"tuned\" and judged by no target; comma-separated, empty for none",
			tunedRateLimit.RequestsPerSecond, tunedRateLimit.Burst, tunedRateLimit.MaxConcurrentRequests))
		latency       = flag.Duration("latency", 10*time.Millisecond, "latency the simulator adds to every request")
		restartWindow = flag.Duration("restart-window", 15*time.Second, "after the last worker count's burst, restart the manager and count the IPAM requests in this window; 0 for none")
		scaleClaims   = flag.Int("scale-claims", 10000, "claims of the large burst (peak memory, requests after a restart); 0 for none")
		scaleBackends = flag.String("scale-backends", "netbox-sim", "IPAM simulators of the large burst, comma-separated")
		scaleWorkers  = flag.Int("scale-workers", 10, "claim workers of the large burst")
		scaleWindow   = flag.Duration("scale-restart-window", time.Minute, "window after the large burst's restart")
		creators      = flag.Int("creators", 50, "clients creating the burst's claims at once")
		writeSamples  = flag.Int("write-samples", 300, "claims created and patched to measure the API server's cost per write")
		managerBin    = flag.String("manager", "", "manager binary; built from ./cmd when empty")
		workDir       = flag.String("workdir", "", "directory for the manager's logs; a new temporary one when empty")
		inCluster     = flag.Bool("incluster", true, "also bind the burst with the in-cluster IPAM provider (installed by hack/incluster-provider.sh) and compare")
		floorFlag     = flag.Bool("netbox-floor", true, "with netbox-real, first time the real NetBox alone: the burst's records POSTed to available-ips, then deleted, in lists of -batch by a plain client")
		carveClaims   = flag.Int("carve-claims", 100, "claims of a pool with childPrefixes created at once on each backend, each carved a child prefix (a fleet roll-out's carves); 0 for none")
		carveRuns     = flag.Int("carve-runs", 3, "times the carving row runs on each backend, in turns with NetBox's carve floor on the real NetBox; the table gives the medians")
		carveLength   = flag.Int("carve-length", 24, "length of the carved children, from a /16 parent")
		subnetFleet   = flag.Int("subnet-clusters", 100, "Clusters and their ClusterSubnets of a carving pool created at once on each backend (a fleet roll-out of subnets, carve-length long); 0 for none")
		subnetTuned   = flag.Bool("subnet-tuned", true, "also run the subnets' fleet with a tuned rate limit, labelled \"tuned\"")
	)
	flag.Parse()
	ctrl.SetLogger(logr.Discard())
	if *writeSamples < 1 {
		// The cost per write divides by the writes made.
		return failure(fmt.Errorf("-write-samples must be at least 1, got %d", *writeSamples))
	}
	workers, err := parseInts(*workersFlag)
	if err != nil {
		return failure(err)
	}
	var unbatched []int
	if strings.TrimSpace(*unbatchedFlag) != "" {
		if unbatched, err = parseInts(*unbatchedFlag); err != nil {
			return failure(err)
		}
	}
	var tuned []int
	if strings.TrimSpace(*tunedFlag) != "" {
		if tuned, err = parseInts(*tunedFlag); err != nil {
			return failure(err)
		}
	}
	if *workDir == "" {
		if *workDir, err = os.MkdirTemp("", "bench-"); err != nil {
			return failure(err)
		}
	}
	b := &bench{managerBin: *managerBin, workDir: *workDir, latency: *latency, creators: *creators}
	if b.managerBin == "" {
		fmt.Fprintln(os.Stderr, "building the manager from ./cmd")
		if b.managerBin, err = managerproc.Build(*workDir); err != nil {
			return failure(err)
		}
	}
	var inClusterCRDs []string
	var provider inClusterProvider
	if *inCluster {
		if provider, err = installInCluster(); err != nil {
			return failure(err)
		}
		inClusterCRDs = append(inClusterCRDs, provider.crds)
	}
	env, cfg, err := envtestenv.Start(inClusterCRDs...)
	if err != nil {
		return failure(err)
	}
	defer func() { _ = env.Stop() }()
	b.kubeconfig = filepath.Join(*workDir, "kubeconfig")
	if err := managerproc.WriteKubeconfig(cfg, b.kubeconfig); err != nil {
		return failure(err)
	}
	// The bench's own client must not be the bottleneck it measures.
	cfg.QPS, cfg.Burst = -1, -1
	if b.c, err = client.NewWithWatch(cfg, client.Options{Scheme: scheme.New()}); err != nil {
		return failure(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Hour)
	defer cancel()

	fmt.Fprintln(os.Stderr, "measuring the API server's cost per write")
	cost := map[int]time.Duration{}
	for _, w := range workers {
		if cost[w], err = writeCost(ctx, b.c, fmt.Sprintf("bench-writes-%d", w), w, *writeSamples); err != nil {
			return failure(err)
		}
	}

	var all, scale []*result
	var floor *netboxFloor
	for _, backend := range splitList(*backendsFlag) {
		if backend == "netbox-real" && *floorFlag {
			// First, while nothing else uses the NetBox.
			fmt.Fprintf(os.Stderr, "%s: the real NetBox alone, %d records in lists of %d\n", backend, *claims, *batch)
			if floor, err = measureRealFloor(ctx, *claims, *batch); err != nil {
				return failure(err)
			}
			printFloor(os.Stdout, "NetBox (real)", floor)
		}
		var configs []config
		for i, w := range workers {
			c := config{backend: backend, claims: *claims, workers: w, batch: *batch, release: true}
			if i == len(workers)-1 {
				c.restartWindow = *restartWindow
			}
			configs = append(configs, c)
		}
		for _, w := range unbatched {
			configs = append(configs, config{backend: backend, claims: *claims, workers: w, batch: 1, release: true})
		}
		for _, w := range tuned {
			configs = append(configs, config{backend: backend, claims: *claims, workers: w, batch: *batch, rateLimit: tunedRateLimit, release: true})
		}
		var rows []*result
		for _, c := range configs {
			fmt.Fprintf(os.Stderr, "%s: %d claims, %s\n", backend, c.claims, configLabel(&result{config: c}))
			r, err := b.run(ctx, c)
			if err != nil {
				return failure(fmt.Errorf("%s, %s: %w", backend, configLabel(&result{config: c}), err))
			}
			rows = append(rows, r)
		}
		printBackend(os.Stdout, rows, *latency, cost)
		all = append(all, rows...)
	}
	var carved []*carvingRow
	var carveFloor *netboxFloor
	if *carveClaims > 0 {
		for _, backend := range splitList(*backendsFlag) {
			// The row and, on the real NetBox, its floor run in turns, so
			// that each pair sees the machine alike; the medians are kept.
			row := &carvingRow{}
			var floors []*netboxFloor
			for repeat := range max(1, *carveRuns) {
				if backend == "netbox-real" && *floorFlag {
					fmt.Fprintf(os.Stderr, "%s: the real NetBox alone, %d children in lists of %d (run %d)\n", backend, *carveClaims, *batch, repeat+1)
					f, err := measureRealCarveFloor(ctx, *carveClaims, *carveLength, *batch)
					if err != nil {
						return failure(err)
					}
					floors = append(floors, f)
				}
				c := config{backend: backend, claims: *carveClaims, workers: workers[len(workers)-1], batch: *batch, release: true, carve: *carveLength, repeat: repeat}
				fmt.Fprintf(os.Stderr, "%s: %d claims carving /%d children, %d workers (run %d)\n", backend, c.claims, c.carve, c.workers, repeat+1)
				r, err := b.run(ctx, c)
				if err != nil {
					return failure(fmt.Errorf("%s, carving: %w", backend, err))
				}
				row.runs = append(row.runs, r)
			}
			if len(floors) > 0 {
				carveFloor = medianFloor(floors)
				row.floors = floors
			}
			carved = append(carved, row)
		}
		printCarving(os.Stdout, carved, carveFloor, *latency, cost)
	}
	if *subnetFleet > 0 {
		var fleet []*subnetResult
		for _, backend := range splitList(*backendsFlag) {
			// Each subnet makes two pools, whose validations the pools'
			// rate limit paces: the tuned row lifts it (the parent's,
			// which its subnets' pools copy).
			limits := []*v1alpha1.RateLimit{nil}
			if *subnetTuned {
				limits = append(limits, tunedRateLimit)
			}
			for _, limit := range limits {
				c := config{backend: backend, claims: *subnetFleet, workers: workers[len(workers)-1], batch: *batch, carve: *carveLength, subnets: true, rateLimit: limit}
				fmt.Fprintf(os.Stderr, "%s: %d clusters and their subnets, /%d children, %d workers, tuned %v\n", backend, c.claims, c.carve, c.workers, c.tuned())
				r, err := b.runSubnets(ctx, c)
				if err != nil {
					return failure(fmt.Errorf("%s, subnets: %w", backend, err))
				}
				fleet = append(fleet, r)
			}
		}
		printSubnets(os.Stdout, fleet, carveFloor, *latency)
	}
	// Before the large burst, which leaves its claims in etcd: the in-cluster
	// provider meets the envtest our bursts met.
	var inClusterResult *result
	if *inCluster {
		fmt.Fprintf(os.Stderr, "%s: %d claims\n", provider.title(), *claims)
		if inClusterResult, err = b.runInCluster(ctx, provider, *claims); err != nil {
			return failure(err)
		}
		printInCluster(os.Stdout, inClusterResult, b.creators)
	}
	if *scaleClaims > 0 {
		for _, backend := range splitList(*scaleBackends) {
			c := config{backend: backend, claims: *scaleClaims, workers: *scaleWorkers, batch: *batch, restartWindow: *scaleWindow, release: true}
			fmt.Fprintf(os.Stderr, "%s: %d claims, %d workers\n", backend, c.claims, c.workers)
			r, err := b.run(ctx, c)
			if err != nil {
				return failure(fmt.Errorf("%s, %d claims: %w", backend, c.claims, err))
			}
			scale = append(scale, r)
		}
		printScale(os.Stdout, scale)
	}
	printWriteCost(os.Stdout, cost, *writeSamples)
	printSummary(os.Stdout, all, scale, inClusterResult, floor)
	printIssue24Targets(os.Stdout, all, scale, inClusterResult, floor)
	printTargets(os.Stdout, all, scale, inClusterResult, *latency, cost)
	printBatchTargets(os.Stdout, all)
	fmt.Printf("\nmanager logs: %s\n", *workDir)
	return 0
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func parseInts(s string) ([]int, error) {
	var out []int
	for _, f := range splitList(s) {
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("bad count %q", f)
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no worker counts")
	}
	return out, nil
}

func failure(err error) int {
	fmt.Fprintln(os.Stderr, "bench:", err)
	return 1
}
