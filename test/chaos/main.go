// Command chaos proves ownership, release and liveness out of process: the
// manager binary (built from ./cmd) runs as a process of its own against a
// real kube-apiserver and etcd (envtest) and reaches the IPAM system (the
// NetBox simulator, a real NetBox or the WAPI simulator) through a proxy
// that injects 5xx answers, connection resets before and after the request
// is processed, and slow answers. Mid-way through a burst of allocations
// and again through a burst of releases the manager is SIGKILLed and
// restarted; some IPAddresses are deleted once bound. Then it checks that
// addresses are distinct, each claim has exactly one record holding its
// address, no record outlives its claim, rebuilt IPAddresses are identical,
// and that, once the faults stop, every claim binds and every deletion
// finishes within a bound. It prints a table and exits non-zero on any
// violation. See docs/chaos.md.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/poolstate"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/pkg/scheme"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/envtestenv"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/managerproc"
)

const managerNamespace = "chaos-system"

func main() { os.Exit(chaos()) }

// chaos runs everything and returns the exit code, so that deferred
// clean-ups (envtest's processes) run.
func chaos() int {
	var (
		backendsFlag   = flag.String("backend", "netbox-sim,wapi-sim", "IPAM systems, comma-separated: netbox-sim, wapi-sim, netbox-real (needs NETBOX_URL and tokens from hack/netbox/up.sh)")
		seedsFlag      = flag.String("seeds", "1,2,3", "RNG seeds, comma-separated; one run per backend and seed")
		claims         = flag.Int("claims", 1000, "claims per run")
		pools          = flag.Int("pools", 5, "namespaced pools per run, each in a namespace of its own; claims are spread over them")
		kills          = flag.Int("kills", 3, "SIGKILLs of the manager during the allocation burst, and again during the release burst")
		faultRate      = flag.Float64("fault-rate", 0.2, "share of IPAM requests that suffer a fault while faults are on (5xx, reset before, reset after, slow in equal parts)")
		deleteRate     = flag.Float64("delete-rate", 0.05, "share of IPAddresses deleted once bound")
		slowMax        = flag.Duration("slow-max", 2*time.Second, "longest delay of a slow answer")
		slowRequest    = flag.Bool("slow-request", false, "delay slow requests before they reach the IPAM system instead of delaying their answers (a killed manager's request may then be processed after its successor acted)")
		outage         = flag.Duration("outage", 10*time.Second, "one outage per burst, this long, during which every IPAM request fails (5xx or reset); 0 for none")
		stall          = flag.Duration("stall", 90*time.Second, "stop the faults of a burst when no claim progressed for this long")
		faultMax       = flag.Duration("fault-max", 10*time.Minute, "stop the faults of a burst after this long at most")
		liveness       = flag.Duration("liveness", 3*time.Minute, "bound, after the faults stop, for every claim to bind (or, releasing, to be gone)")
		concurrency    = flag.Int("concurrency", 10, "the manager's --ipaddressclaim-concurrency")
		managerBin     = flag.String("manager", "", "manager binary to run; built from ./cmd when empty")
		workDir        = flag.String("workdir", "", "directory for the manager's logs and kubeconfig; a new temporary one when empty")
		out            = flag.String("out", "", "also write the table to this file")
		managerArgs    = flag.String("manager-args", "", "extra manager flags, space-separated")
		requestedShare = flag.Float64("requested-share", 0.1, "share of claims that request an address (by annotation), from the top of their pool's network")
		plannedShare   = flag.Float64("planned-share", 0.1, "share of claims that adopt a record the IPAM team planned for them before the run")
		lateWindow     = flag.Duration("late-record-window", poolstate.DefaultLateRecordWindow, "the manager's --late-record-window: once all claims are bound, records that creates of killed managers left must be gone within it and a minute")
		carve          = flag.Int("carve", 0, "length of the child prefix each claim is carved from its pool's parent (a prefix per machine, from a container prefix or network container) instead of an address; 0 for addresses. Carving runs plan and request nothing, and the IPAM team deletes and disowns children instead of editing records")
		ipamTeam       = flag.Bool("ipam-team", true, "while claims bind, readdress, move into another VRF or network view, and delete a few bound records (in a carving run, delete and disown a few bound children), and rotate the credentials (see docs/chaos.md)")
	)
	flag.Parse()
	if *carve != 0 && (*carve < 1 || *carve > 30) {
		return failure(fmt.Errorf("-carve %d: an IPv4 child length from 1 to 30, or 0 for addresses", *carve))
	}

	seeds, err := parseSeeds(*seedsFlag)
	if err != nil {
		return failure(err)
	}
	var backends []string
	for _, b := range strings.Split(*backendsFlag, ",") {
		if b = strings.TrimSpace(b); b != "" {
			backends = append(backends, b)
		}
	}

	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()

	tempDir := *workDir == ""
	if tempDir {
		if *workDir, err = os.MkdirTemp("", "chaos-"); err != nil {
			return failure(err)
		}
	} else if err := os.MkdirAll(*workDir, 0o755); err != nil {
		return failure(err)
	}
	h := &harness{workDir: *workDir, managerBin: *managerBin, usedBases: map[int]bool{}}
	if h.managerBin == "" {
		fmt.Fprintln(os.Stderr, "building the manager from ./cmd")
		if h.managerBin, err = managerproc.Build(*workDir); err != nil {
			return failure(err)
		}
	}

	env, cfg, err := envtestenv.Start()
	if err != nil {
		return failure(err)
	}
	defer func() { _ = env.Stop() }()
	h.kubeconfig = filepath.Join(*workDir, "kubeconfig")
	if err := managerproc.WriteKubeconfig(cfg, h.kubeconfig); err != nil {
		return failure(err)
	}
	if h.k8s, err = client.New(cfg, client.Options{Scheme: scheme.New()}); err != nil {
		return failure(err)
	}
	if err := h.k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: managerNamespace}}); err != nil {
		return failure(err)
	}

	var results []*result
	for _, backend := range backends {
		for _, seed := range seeds {
			if ctx.Err() != nil {
				break
			}
			s := settings{
				backend: backend, seed: seed, claims: *claims, pools: *pools, kills: *kills,
				faultRate: *faultRate, deleteRate: *deleteRate, slowMax: *slowMax, slowRequest: *slowRequest, outage: *outage, stall: *stall,
				faultMax: *faultMax, liveness: *liveness, concurrency: *concurrency, extraArgs: append([]string{"--late-record-window=" + lateWindow.String()}, strings.Fields(*managerArgs)...), ipamTeam: *ipamTeam, lateWindow: *lateWindow,
				requestedShare: *requestedShare, plannedShare: *plannedShare, carve: *carve,
			}
			if s.carve > 0 {
				s.requestedShare, s.plannedShare = 0, 0
			}
			fmt.Fprintf(os.Stderr, "\n===== %s, seed %d: %d claims in %d pools, %d kills per burst, fault rate %.2f\n",
				backend, seed, s.claims, s.pools, s.kills, s.faultRate)
			results = append(results, h.runOne(ctx, s))
		}
	}

	var sinks []io.Writer = []io.Writer{os.Stdout}
	if *out != "" {
		f, err := os.Create(*out)
		if err != nil {
			return failure(err)
		}
		defer f.Close()
		sinks = append(sinks, f)
	}
	w := io.MultiWriter(sinks...)
	failed := printTable(w, results, *faultRate)
	if failed || ctx.Err() != nil {
		fmt.Fprintf(w, "\nmanager and proxy logs: %s\n", *workDir)
		return 1
	}
	if tempDir {
		_ = os.RemoveAll(*workDir)
	} else {
		fmt.Fprintf(w, "\nmanager and proxy logs: %s\n", *workDir)
	}
	return 0
}

// printTable prints one line per run, then each failed run's violations;
// it reports whether any run failed.
func printTable(w io.Writer, results []*result, faultRate float64) bool {
	fmt.Fprintf(w, "\nChaos runs (fault rate %.2f, outage requests included in 5xx and reset-before; times from the start of each burst)\n\n", faultRate)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "backend\tseed\tclaims\trequests\t5xx\treset-before\treset-after\tslow\toutages (reqs)\tkills\tdeleted\tall bound\tlate records (gone after)\tteam: moved/rescoped/deleted, rotated\taudit: dup/orph/drift\tall released\tduplicates\tleaks\tmismatches\tunreported\tstuck\tresult\t")
	failed := false
	for _, r := range results {
		verdict := "ok"
		if r.failed() {
			verdict, failed = "FAIL", true
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d (%d)\t%d\t%d\t%s\t%d (%s)\t%s\t%d/%d/%d\t%s\t%d\t%d\t%d\t%d\t%d\t%s\t\n",
			r.backend, r.seed, r.claims, r.counts.requests, r.counts.faults[fault5xx], r.counts.faults[faultResetBefore],
			r.counts.faults[faultResetAfter], r.counts.faults[faultSlow], r.counts.outages, r.counts.outageRequests, r.kills, r.deleted,
			duration(r.bound), r.late, duration(r.lateCleared), r.teamSummary(), r.audit.Duplicates, r.audit.Orphans, r.audit.Drifted, duration(r.released),
			r.duplicates, r.leaks, r.mismatches, r.unreported, r.stuck, verdict)
	}
	_ = tw.Flush()
	for _, r := range results {
		if !r.failed() {
			continue
		}
		fmt.Fprintf(w, "\n%s seed %d FAILED (manager log: %s)\n", r.backend, r.seed, r.logPath)
		if r.err != nil {
			fmt.Fprintf(w, "  error: %v\n", r.err)
		}
		const show = 40
		for i, v := range r.violations {
			if i == show {
				fmt.Fprintf(w, "  … and %d more\n", len(r.violations)-show)
				break
			}
			fmt.Fprintf(w, "  - %s\n", v)
		}
	}
	return failed
}

func duration(d time.Duration) string {
	if d < 0 {
		return "never"
	}
	return d.Round(100 * time.Millisecond).String()
}

func parseSeeds(s string) ([]uint64, error) {
	var seeds []uint64
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.ParseUint(f, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("bad seed %q: %w", f, err)
		}
		seeds = append(seeds, n)
	}
	if len(seeds) == 0 {
		return nil, fmt.Errorf("no seeds")
	}
	return seeds, nil
}

func failure(err error) int {
	fmt.Fprintln(os.Stderr, "chaos:", err)
	return 1
}
