package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/api/v1alpha1"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/pkg/poolkind"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/managerproc"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/netboxtarget"
)

// credentialsLabel is the opt-in label the provider is about to require on
// credentials Secrets.
const credentialsLabel = "ipam-bridge.github.io/credentials"

// settings are one run's parameters (see the flags in main.go).
type settings struct {
	backend     string
	seed        uint64
	claims      int
	pools       int
	kills       int
	faultRate   float64
	deleteRate  float64
	slowMax     time.Duration
	slowRequest bool
	outage      time.Duration
	stall       time.Duration
	faultMax    time.Duration
	liveness    time.Duration
	concurrency int
	extraArgs   []string
	ipamTeam    bool
	// lateWindow is the manager's --late-record-window.
	lateWindow time.Duration
	// requestedShare and plannedShare are the shares of claims that
	// request an address, and that adopt a record planned for them.
	requestedShare float64
	plannedShare   float64
	// carve, above 0, makes every pool a carving pool whose claims each
	// get a child prefix of this length (a prefix per machine).
	carve int
}

// result is what one run measured and found.
type result struct {
	backend  string
	seed     uint64
	claims   int
	counts   counts
	kills    int
	deleted  int
	bound    time.Duration // -1 when not every claim bound
	released time.Duration // -1 when not every claim went away
	// late counts the claims that held more records than they should
	// when all were bound (creates a killed manager left queued), and
	// lateCleared how long after that the provider had deleted them (-1:
	// not within the late-record window and a minute).
	late        int
	lateCleared time.Duration
	duplicates  int
	leaks       int
	mismatches  int
	stuck       int
	// unreported counts the IPAM team's edits whose claims did not report
	// them after an audit.
	unreported int
	// edits counts the IPAM team's edits by kind; rotated says whether it
	// rotated the credentials.
	edits   map[edit]int
	rotated bool
	// audit sums what the audits after the burst found: duplicates
	// deleted, orphans, records restored or taken.
	audit      v1alpha1.AuditStatus
	violations []string
	err        error
	logPath    string
}

func (r *result) failed() bool {
	return r.err != nil || r.duplicates+r.leaks+r.mismatches+r.unreported+r.stuck > 0
}

// teamSummary is the table's cell for the IPAM team's phase.
func (r *result) teamSummary() string {
	if r.edits == nil {
		return "off"
	}
	rotated := "no"
	if r.rotated {
		rotated = "yes"
	}
	if r.edits[editDeleteChild]+r.edits[editDisownChild] > 0 {
		return fmt.Sprintf("children %d deleted/%d disowned, %s", r.edits[editDeleteChild], r.edits[editDisownChild], rotated)
	}
	return fmt.Sprintf("%d/%d/%d, %s", r.edits[editReaddress], r.edits[editRescope], r.edits[editDelete], rotated)
}

func (r *result) violate(counter *int, format string, args ...any) {
	*counter++
	r.violations = append(r.violations, fmt.Sprintf(format, args...))
}

// harness holds what all runs share: the API server and the manager binary.
type harness struct {
	k8s        client.Client
	kubeconfig string
	managerBin string
	workDir    string
	// usedBases are the second octets of 10.x.0.0/16 taken by earlier runs.
	usedBases map[int]bool
}

// run is one backend and seed: its IPAM system, proxy, manager and objects.
type run struct {
	h   *harness
	s   settings
	id  string
	sys system
	px  *faultProxy
	mgr *managerproc.Process
	// proxyLog holds one line per request the proxy disturbed or forwarded.
	proxyLog *os.File
	res      *result

	filter     string
	namespaces []string
	prefixes   []netip.Prefix
	gateways   map[netip.Addr]bool
	claimKeys  []types.NamespacedName
	pools      []poolkind.Pool
	// deleted are the IPAddresses the run deleted, as they were.
	deleted map[types.NamespacedName]*ipamv1.IPAddress
	team    ipamTeam
	// plans are the claims that request an address or adopt a planned
	// record (plans.go); reserved their addresses.
	plans    map[types.NamespacedName]claimPlan
	reserved map[netip.Addr]bool
}

func (h *harness) runOne(ctx context.Context, s settings) *result {
	id, label := fmt.Sprintf("%s-s%d", s.backend, s.seed), s.backend
	if s.carve > 0 {
		id, label = fmt.Sprintf("%s-carve%d-s%d", s.backend, s.carve, s.seed), fmt.Sprintf("%s /%d", s.backend, s.carve)
	}
	r := &run{h: h, s: s, id: id, filter: "chaos-" + id, gateways: map[netip.Addr]bool{},
		deleted: map[types.NamespacedName]*ipamv1.IPAddress{},
		res:     &result{backend: label, seed: s.seed, claims: s.claims, bound: -1, released: -1}}
	r.res.logPath = filepath.Join(h.workDir, id+"-manager.log")
	if err := r.execute(ctx); err != nil {
		r.res.err = err
	}
	if r.mgr != nil {
		r.res.kills = r.mgr.Kills()
	}
	if r.px != nil {
		r.res.counts = r.px.counts()
	}
	if s.ipamTeam {
		r.res.edits, r.res.rotated = map[edit]int{}, r.team.rotated
		for _, kind := range r.team.edited {
			r.res.edits[kind]++
		}
	}
	r.teardown()
	if r.res.failed() && r.mgr != nil {
		fmt.Fprintf(os.Stderr, "\n----- %s: last lines of the manager's log (%s) -----\n%s\n----- end of log -----\n\n",
			id, r.res.logPath, r.mgr.Tail(60))
	}
	return r.res
}

func (r *run) logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "[%s %s] %s\n", time.Now().Format("15:04:05"), r.id, fmt.Sprintf(format, args...))
}

func (r *run) execute(ctx context.Context) error {
	if err := r.setupSystem(); err != nil {
		return err
	}
	if err := r.setupCluster(ctx); err != nil {
		return err
	}
	if err := r.allocate(ctx); err != nil {
		return err
	}
	// A request a killed manager sent may land after the restarted one
	// reserved the claim's address: the provider's sweeps for late records
	// delete such duplicates, without an audit asked for.
	if err := r.awaitLateRecords(ctx); err != nil {
		return err
	}
	if err := r.auditPools(ctx); err != nil {
		return err
	}
	if r.s.ipamTeam {
		if err := r.checkEditsReported(ctx); err != nil {
			return err
		}
	}
	if err := r.checkBound(ctx); err != nil {
		return err
	}
	if err := r.release(ctx); err != nil {
		return err
	}
	return r.checkReleased(ctx)
}

// setupSystem starts the IPAM system with one network per pool, each with
// its gateway recorded, and the fault proxy in front of it.
func (r *run) setupSystem() (err error) {
	switch r.s.backend {
	case "netbox-sim":
		r.sys = newNetboxSim()
	case "netbox-real":
		if r.sys, err = newNetboxReal(); err != nil {
			return err
		}
	case "wapi-sim":
		r.sys = newWapiSim()
	default:
		return fmt.Errorf("unknown backend %q (want netbox-sim, netbox-real or wapi-sim)", r.s.backend)
	}
	existing, err := r.sys.records()
	if err != nil {
		return err
	}
	networks, err := r.sys.networks()
	if err != nil {
		return err
	}
	// A /16 of its own for every run, free of any record or network: a
	// real NetBox may hold earlier runs'.
	base := 0
	for x := 100; x < 250 && base == 0; x++ {
		block := netip.MustParsePrefix(fmt.Sprintf("10.%d.0.0/16", x))
		if r.h.usedBases[x] || containsAny(block, existing) || slices.ContainsFunc(networks, block.Overlaps) {
			continue
		}
		base = x
	}
	if base == 0 {
		return fmt.Errorf("no free 10.x.0.0/16 left in the IPAM system")
	}
	r.h.usedBases[base] = true
	perPool := (r.s.claims + r.s.pools - 1) / r.s.pools
	bits := 24
	for (1<<(32-bits))-3 < perPool+perPool/4 {
		bits--
	}
	if r.s.carve > 0 {
		// A parent with room for a quarter more children than its claims.
		bits = r.s.carve
		for bits > 0 && 1<<(r.s.carve-bits) < perPool+perPool/4 {
			bits--
		}
	}
	size := 1 << (32 - bits)
	if size*r.s.pools > 1<<16 {
		return fmt.Errorf("%d claims in %d pools do not fit a /16", r.s.claims, r.s.pools)
	}
	// Seeding a real NetBox fails through its harness: a panic made error.
	defer func() {
		if err != nil {
			err = fmt.Errorf("seeding the IPAM system: %w", err)
		}
	}()
	defer (&netboxtarget.Harness{}).RecoverFatal(&err)
	for i := range r.s.pools {
		start := netip.AddrFrom4([4]byte{10, byte(base), byte(i * size >> 8), byte(i * size)})
		p := netip.PrefixFrom(start, bits)
		r.prefixes = append(r.prefixes, p)
		if r.s.carve > 0 {
			r.sys.seedParent(p)
			continue
		}
		r.gateways[p.Addr().Next()] = true
		r.sys.seedNetwork(p)
	}
	r.px = newFaultProxy(r.sys.upstream(), r.sys.proxyTLS(), r.s.seed, r.s.faultRate, r.s.slowMax, r.sys.writeStatus)
	r.px.slowRequest = r.s.slowRequest
	if r.proxyLog, err = os.Create(filepath.Join(r.h.workDir, r.id+"-proxy.log")); err != nil {
		return err
	}
	r.px.log = r.proxyLog
	if r.s.carve > 0 {
		r.logf("IPAM system seeded: %d parents of /%d in 10.%d.0.0/16, each carved in /%d children; fault proxy at %s", r.s.pools, bits, base, r.s.carve, r.px.URL())
		return nil
	}
	r.logf("IPAM system seeded: %d networks of /%d in 10.%d.0.0/16; fault proxy at %s", r.s.pools, bits, base, r.px.URL())
	return nil
}

func containsAny(block netip.Prefix, records []record) bool {
	for _, rec := range records {
		if block.Contains(rec.Address.Addr()) {
			return true
		}
	}
	return false
}

// setupCluster creates one namespace, Secret and pool per network, starts
// the manager and waits for the pools to be ready (before any fault).
func (r *run) setupCluster(ctx context.Context) error {
	labels := map[string]string{clusterv1.WatchLabel: r.filter}
	var pools []poolkind.Pool
	for i, p := range r.prefixes {
		ns := fmt.Sprintf("chaos-%s-%d", r.id, i)
		r.namespaces = append(r.namespaces, ns)
		pool := r.sys.newPool(ns, "pool", p, "ipam-credentials", r.px.URL(), r.s.carve)
		pool.SetLabels(labels)
		pools = append(pools, pool)
		for _, o := range []client.Object{
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
			&corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ipam-credentials", Labels: map[string]string{credentialsLabel: "true"}},
				Data:       r.sys.secretData(r.px.caPEM()),
			},
			pool,
		} {
			if err := r.h.k8s.Create(ctx, o); err != nil {
				return fmt.Errorf("creating %T %s/%s: %w", o, o.GetNamespace(), o.GetName(), err)
			}
		}
	}
	for i := range r.s.claims {
		r.claimKeys = append(r.claimKeys, types.NamespacedName{Namespace: r.namespaces[i%len(r.namespaces)], Name: fmt.Sprintf("m-%04d", i)})
	}
	if err := r.planClaims(); err != nil {
		return err
	}

	args := []string{
		"--watch-filter=" + r.filter,
		"--manager-namespace=" + managerNamespace,
		"--diagnostics-address=0",
		"--health-addr=0",
		fmt.Sprintf("--ipaddressclaim-concurrency=%d", r.s.concurrency),
		"--exhausted-retry-interval=5s",
		"--graceful-shutdown-timeout=5s",
	}
	r.mgr = &managerproc.Process{Bin: r.h.managerBin, Args: append(args, r.s.extraArgs...), Kubeconfig: r.h.kubeconfig, LogPath: r.res.logPath}
	_ = os.Remove(r.res.logPath)
	if err := r.mgr.Start(); err != nil {
		return err
	}
	err := waitUntil(ctx, 2*time.Minute, time.Second, func() (bool, error) {
		for _, p := range pools {
			got := p.DeepCopyObject().(client.Object)
			if err := r.h.k8s.Get(ctx, client.ObjectKeyFromObject(p), got); err != nil {
				return false, err
			}
			if !conditions.IsTrue(got.(conditions.Getter), v1alpha1.ReadyCondition) {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("pools not ready within 2m before any fault: %w", err)
	}
	r.pools = pools
	r.logf("%d pools ready; manager log %s", len(pools), r.res.logPath)
	return nil
}

// auditPools asks every pool for an audit and waits for the reports.
func (r *run) auditPools(ctx context.Context) error {
	request := r.id + "-bound"
	for _, p := range r.pools {
		got := p.DeepCopyObject().(poolkind.Pool)
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			if err := r.h.k8s.Get(ctx, client.ObjectKeyFromObject(p), got); err != nil {
				return err
			}
			a := got.GetAnnotations()
			if a == nil {
				a = map[string]string{}
			}
			a[v1alpha1.AuditAnnotation] = request
			got.SetAnnotations(a)
			return r.h.k8s.Update(ctx, got)
		})
		if err != nil {
			return fmt.Errorf("asking %s for an audit: %w", p.GetNamespace(), err)
		}
	}
	var sum v1alpha1.AuditStatus
	err := waitUntil(ctx, 2*time.Minute, time.Second, func() (bool, error) {
		sum = v1alpha1.AuditStatus{}
		for _, p := range r.pools {
			got := p.DeepCopyObject().(poolkind.Pool)
			if err := r.h.k8s.Get(ctx, client.ObjectKeyFromObject(p), got); err != nil {
				return false, err
			}
			report := got.GetPoolStatus().Audit
			if report == nil || report.Request != request {
				return false, nil
			}
			sum.Records += report.Records
			sum.Orphans += report.Orphans
			sum.Duplicates += report.Duplicates
			sum.Drifted += report.Drifted
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("pools not audited within 2m: %w", err)
	}
	r.res.audit = sum
	r.logf("audit: %d records, %d orphans, %d duplicates, %d drifted", sum.Records, sum.Orphans, sum.Duplicates, sum.Drifted)
	return nil
}

// state is the cluster as the harness sees it.
type state struct {
	claims    map[types.NamespacedName]*ipamv1.IPAddressClaim
	addresses map[types.NamespacedName]*ipamv1.IPAddress
}

func (r *run) observe(ctx context.Context) (*state, error) {
	st := &state{claims: map[types.NamespacedName]*ipamv1.IPAddressClaim{}, addresses: map[types.NamespacedName]*ipamv1.IPAddress{}}
	ours := map[string]bool{}
	for _, ns := range r.namespaces {
		ours[ns] = true
	}
	claims := &ipamv1.IPAddressClaimList{}
	if err := r.h.k8s.List(ctx, claims, client.MatchingLabels{clusterv1.WatchLabel: r.filter}); err != nil {
		return nil, err
	}
	for i := range claims.Items {
		if ours[claims.Items[i].Namespace] {
			st.claims[client.ObjectKeyFromObject(&claims.Items[i])] = &claims.Items[i]
		}
	}
	addresses := &ipamv1.IPAddressList{}
	if err := r.h.k8s.List(ctx, addresses); err != nil {
		return nil, err
	}
	for i := range addresses.Items {
		if ours[addresses.Items[i].Namespace] {
			st.addresses[client.ObjectKeyFromObject(&addresses.Items[i])] = &addresses.Items[i]
		}
	}
	return st, nil
}

// ready says whether a claim is bound: Ready, addressRef set, its IPAddress
// present and not being deleted, and rebuilt if the run deleted it.
func (r *run) ready(st *state, key types.NamespacedName) bool {
	claim, ok := st.claims[key]
	if !ok || !claim.DeletionTimestamp.IsZero() || !conditions.IsTrue(claim, ipamv1.IPAddressClaimReadyCondition) ||
		claim.Status.AddressRef.Name == "" {
		return false
	}
	address, ok := st.addresses[types.NamespacedName{Namespace: key.Namespace, Name: claim.Status.AddressRef.Name}]
	if !ok || !address.DeletionTimestamp.IsZero() {
		return false
	}
	if old, deleted := r.deleted[key]; deleted && old.UID == address.UID {
		return false
	}
	return true
}

func (r *run) countReady(st *state) int {
	n := 0
	for _, key := range r.claimKeys {
		if r.ready(st, key) {
			n++
		}
	}
	return n
}

// killAndRestart SIGKILLs the manager mid-burst and starts it again.
func (r *run) killAndRestart(phase string, progress, total int) error {
	r.mgr.Kill()
	r.logf("%s: SIGKILLed the manager at %d/%d; restarting it", phase, progress, total)
	time.Sleep(200 * time.Millisecond)
	return r.mgr.Start()
}

// phase drives a burst under faults: progress reports how many of the
// claims are done; kills happen as progress passes 1/(k+1), 2/(k+1)… of
// the claims, or all at once if nothing moves for the stall time. Faults
// stop when every claim is done, progress stalls, or faultMax passes.
func (r *run) phase(ctx context.Context, name string, started <-chan struct{}, progress func(*state) int,
	during func(*state)) (faultsOff time.Time, err error) {
	total := len(r.claimKeys)
	start := time.Now()
	lastProgress, last := time.Now(), -1
	kills := 0
	outage := r.s.outage <= 0
	for {
		select {
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
		st, err := r.observe(ctx)
		if err != nil {
			return time.Time{}, err
		}
		done := progress(st)
		if done > last {
			last, lastProgress = done, time.Now()
		}
		stalled := time.Since(lastProgress) > r.s.stall
		for kills < r.s.kills && (done >= (kills+1)*total/(r.s.kills+1) || stalled) {
			if err := r.killAndRestart(name, done, total); err != nil {
				return time.Time{}, err
			}
			kills++
			if stalled && kills < r.s.kills {
				time.Sleep(3 * time.Second)
			}
		}
		// One outage per burst, between the first kill and the second, so
		// that pools blip and waiting claims must be woken again.
		if !outage && (done >= total*2/5 || stalled) {
			outage = true
			r.px.outage(r.s.outage)
			r.mgr.Note("%s: IPAM outage of %s", name, r.s.outage)
			r.logf("%s: IPAM outage of %s at %d/%d", name, r.s.outage, done, total)
			lastProgress = time.Now().Add(r.s.outage)
		}
		if during != nil {
			during(st)
		}
		burstIn := false
		select {
		case <-started:
			burstIn = true
		default:
		}
		switch {
		case !burstIn || kills < r.s.kills || !outage || time.Now().UnixNano() < r.px.outageUntil.Load():
			continue
		case done == total:
		case stalled:
			r.logf("%s: no progress for %s under faults (%d/%d done); stopping faults", name, r.s.stall, done, total)
		case time.Since(start) > r.s.faultMax:
			r.logf("%s: faults stopped after %s (%d/%d done)", name, r.s.faultMax, done, total)
		default:
			continue
		}
		r.px.setEnabled(false)
		r.mgr.Note("%s: faults stopped", name)
		return time.Now(), nil
	}
}

// allocate creates every claim at once under faults, kills the manager
// mid-burst, deletes some IPAddresses once bound, then stops the faults and
// waits (bounded) for every claim to be bound.
func (r *run) allocate(ctx context.Context) error {
	labels := map[string]string{clusterv1.WatchLabel: r.filter}
	kind := r.sys.poolKind()
	r.px.setEnabled(true)
	r.mgr.Note("allocation burst of %d claims, faults on", len(r.claimKeys))
	start := time.Now()
	created := make(chan struct{})
	var createErr error
	go func() {
		defer close(created)
		createErr = parallel(ctx, 16, r.claimKeys, func(key types.NamespacedName) error {
			claim := &ipamv1.IPAddressClaim{
				ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name, Labels: labels},
				Spec: ipamv1.IPAddressClaimSpec{
					PoolRef: ipamv1.IPPoolReference{APIGroup: v1alpha1.GroupVersion.Group, Kind: kind, Name: "pool"},
				},
			}
			r.annotate(claim)
			return r.h.k8s.Create(ctx, claim)
		})
	}()

	rng := rand.New(rand.NewPCG(r.s.seed, 2))
	considered := map[types.NamespacedName]bool{}
	faultsOff, err := r.phase(ctx, "allocation", created, func(st *state) int {
		n := r.countReady(st)
		if n == len(r.claimKeys) && r.res.bound < 0 {
			r.res.bound = time.Since(start)
		}
		return n
	}, func(st *state) {
		r.sampleHeldOnce(st)
		if r.s.ipamTeam {
			r.ipamTeamActs(ctx, st, r.countReady(st), rng)
		}
		// Delete some IPAddresses once bound; the claim must rebuild each
		// one, identical, from the reservation's marker.
		for _, key := range r.claimKeys {
			if _, edited := r.team.edited[key]; considered[key] || edited || !r.ready(st, key) {
				continue
			}
			considered[key] = true
			if rng.Float64() >= r.s.deleteRate {
				continue
			}
			address := st.addresses[key]
			if err := r.h.k8s.Delete(ctx, address, client.Preconditions{UID: ptr.To(address.UID)}); err != nil {
				r.logf("deleting IPAddress %s: %v", key, err)
				continue
			}
			r.deleted[key] = address.DeepCopy()
		}
	})
	if err != nil {
		return err
	}
	if createErr != nil {
		return fmt.Errorf("creating claims: %w", createErr)
	}
	r.res.deleted = len(r.deleted)
	r.logf("allocation: faults stopped after %s; %d IPAddresses deleted; waiting up to %s for every claim to be bound",
		time.Since(start).Round(time.Second), len(r.deleted), r.s.liveness)

	err = waitUntil(ctx, r.s.liveness, 500*time.Millisecond, func() (bool, error) {
		st, err := r.observe(ctx)
		if err != nil {
			return false, err
		}
		if r.countReady(st) == len(r.claimKeys) {
			if r.res.bound < 0 {
				r.res.bound = time.Since(start)
			}
			return true, nil
		}
		return false, nil
	})
	if err != nil && ctx.Err() != nil {
		return err
	}
	if r.res.bound >= 0 {
		r.logf("allocation: all %d claims bound %s after the burst began (%s after faults stopped)", len(r.claimKeys),
			r.res.bound.Round(time.Millisecond), max(0, r.res.bound-faultsOff.Sub(start)).Round(time.Millisecond))
		return nil
	}
	st, err := r.observe(ctx)
	if err != nil {
		return err
	}
	for _, key := range r.claimKeys {
		if !r.ready(st, key) {
			r.res.violate(&r.res.stuck, "not bound %s after faults stopped: %s", r.s.liveness, r.describe(st, key))
		}
	}
	r.logf("allocation: %d claims not bound %s after faults stopped", r.res.stuck, r.s.liveness)
	return nil
}

// describe says where a claim stands, for stuck claims.
func (r *run) describe(st *state, key types.NamespacedName) string {
	claim, ok := st.claims[key]
	if !ok {
		return key.String() + ": claim missing"
	}
	parts := []string{key.String()}
	if !claim.DeletionTimestamp.IsZero() {
		parts = append(parts, "deleting")
	}
	if c := conditions.Get(claim, ipamv1.IPAddressClaimReadyCondition); c != nil {
		parts = append(parts, fmt.Sprintf("Ready=%s reason=%s message=%q", c.Status, c.Reason, c.Message))
	} else {
		parts = append(parts, "no Ready condition")
	}
	parts = append(parts, fmt.Sprintf("addressRef=%q", claim.Status.AddressRef.Name))
	switch address, ok := st.addresses[key]; {
	case !ok:
		parts = append(parts, "IPAddress absent")
	case !address.DeletionTimestamp.IsZero():
		parts = append(parts, fmt.Sprintf("IPAddress %s being deleted (finalizers %v)", address.Spec.Address, address.Finalizers))
	case r.deleted[key] != nil && r.deleted[key].UID == address.UID:
		parts = append(parts, "IPAddress deleted by the run and not rebuilt")
	default:
		parts = append(parts, "IPAddress "+address.Spec.Address)
	}
	if _, deleted := r.deleted[key]; deleted {
		parts = append(parts, "(its IPAddress was deleted by the run)")
	}
	return strings.Join(parts, "; ")
}

// inRun says whether a record lies in this run's networks.
func (r *run) inRun(rec record) bool {
	for _, p := range r.prefixes {
		if p.Contains(rec.Address.Addr()) {
			return true
		}
	}
	return false
}

// ownRecords returns the run's records other than the seeded gateways: in
// a carving run, the children of its parents.
func (r *run) ownRecords() ([]record, error) {
	if r.s.carve > 0 {
		return r.sys.children(r.prefixes)
	}
	all, err := r.sys.records()
	if err != nil {
		return nil, err
	}
	var out []record
	for _, rec := range all {
		if r.inRun(rec) && !(rec.Marker == "" && r.gateways[rec.Address.Addr()]) {
			out = append(out, rec)
		}
	}
	return out, nil
}

// claimOfMarker parses "[<identity>/]<namespace>/<name>".
func claimOfMarker(marker string) (types.NamespacedName, bool) {
	parts := strings.Split(marker, "/")
	if len(parts) < 2 || len(parts) > 3 {
		return types.NamespacedName{}, false
	}
	return types.NamespacedName{Namespace: parts[len(parts)-2], Name: parts[len(parts)-1]}, true
}

// awaitLateRecords counts, once all claims are bound, the claims that hold
// more records than they should, and waits (at most the manager's
// late-record window and a minute) until the provider deleted the extra
// ones; checkBound then counts any left as duplicates.
func (r *run) awaitLateRecords(ctx context.Context) error {
	start := time.Now()
	first := -1
	err := waitUntil(ctx, r.s.lateWindow+time.Minute, time.Second, func() (bool, error) {
		recs, err := r.ownRecords()
		if err != nil {
			return false, err
		}
		held := map[types.NamespacedName]int{}
		for _, rec := range recs {
			if key, ok := claimOfMarker(rec.Marker); ok && !r.isPlannedSeed(rec) {
				held[key]++
			}
		}
		extra := 0
		for _, key := range r.claimKeys {
			if held[key] > r.expectedRecords(key) {
				extra++
			}
		}
		if first < 0 {
			first = extra
		}
		return extra == 0, nil
	})
	r.res.late, r.res.lateCleared = first, time.Since(start)
	if err != nil {
		if ctx.Err() != nil {
			return err
		}
		r.res.lateCleared = -1
	}
	r.logf("late records: %d claims held more records than they should once all were bound; %s", first, duration(r.res.lateCleared))
	return nil
}

// checkBound checks, once bound: distinct addresses; one record per claim
// holding its IPAddress's address; no record without a claim; every
// rebuilt IPAddress identical to the one it replaced.
func (r *run) checkBound(ctx context.Context) error {
	st, err := r.observe(ctx)
	if err != nil {
		return err
	}
	recs, err := r.ownRecords()
	if err != nil {
		return err
	}
	byAddress := map[string][]string{}
	for key, a := range st.addresses {
		byAddress[a.Spec.Address] = append(byAddress[a.Spec.Address], key.String())
	}
	for addr, holders := range byAddress {
		if len(holders) > 1 {
			sort.Strings(holders)
			r.res.violate(&r.res.duplicates, "address %s is held by %d IPAddresses: %s", addr, len(holders), strings.Join(holders, ", "))
		}
	}
	byClaim := map[types.NamespacedName][]record{}
	for _, rec := range recs {
		if r.isPlannedSeed(rec) {
			continue // not adopted: its claim says so
		}
		if r.team.disowned[rec.ID] {
			continue // the IPAM team's now
		}
		key, ok := claimOfMarker(rec.Marker)
		if _, exists := st.claims[key]; !ok || !exists {
			r.res.violate(&r.res.leaks, "record %s (%s) with marker %q belongs to no claim", rec.ID, rec.Address, rec.Marker)
			continue
		}
		byClaim[key] = append(byClaim[key], rec)
	}
	for _, key := range r.claimKeys {
		held := byClaim[key]
		if len(held) > r.expectedRecords(key) {
			var list []string
			for _, rec := range held {
				list = append(list, fmt.Sprintf("%s (%s)", rec.Address, rec.ID))
			}
			r.res.violate(&r.res.duplicates, "claim %s has %d records: %s", key, len(held), strings.Join(list, ", "))
		}
		address, bound := st.addresses[key]
		if !bound {
			continue // counted as stuck
		}
		holdsIt := slices.ContainsFunc(held, func(rec record) bool {
			return rec.Address.Addr().String() == address.Spec.Address && int32(rec.Address.Bits()) == ptr.Deref(address.Spec.Prefix, -1)
		})
		switch {
		case len(held) == 0 && r.mayHoldNone(key):
			// Reported on its claim (checkEditsReported).
		case len(held) == 0:
			r.res.violate(&r.res.mismatches, "claim %s has IPAddress %s but no record in the IPAM system", key, address.Spec.Address)
		case !holdsIt:
			r.res.violate(&r.res.mismatches, "claim %s: IPAddress %s/%d but its record %s holds %s", key, address.Spec.Address,
				ptr.Deref(address.Spec.Prefix, -1), held[0].ID, held[0].Address)
		}
		if old, deleted := r.deleted[key]; deleted && old.UID != address.UID {
			if old.Spec.Address != address.Spec.Address || ptr.Deref(old.Spec.Prefix, -1) != ptr.Deref(address.Spec.Prefix, -1) ||
				old.Spec.Gateway != address.Spec.Gateway {
				r.res.violate(&r.res.mismatches, "claim %s: rebuilt IPAddress %s/%d gw %s differs from the deleted %s/%d gw %s", key,
					address.Spec.Address, ptr.Deref(address.Spec.Prefix, -1), address.Spec.Gateway,
					old.Spec.Address, ptr.Deref(old.Spec.Prefix, -1), old.Spec.Gateway)
			}
		}
	}
	r.checkPlansBound(st, byClaim)
	r.logf("bound: %d IPAddresses, %d records checked", len(st.addresses), len(recs))
	return nil
}

// release deletes every claim at once under faults, kills the manager
// mid-burst, then stops the faults and waits (bounded) for every claim to
// be gone.
func (r *run) release(ctx context.Context) error {
	r.px.setEnabled(true)
	r.mgr.Note("release burst of %d claims, faults on", len(r.claimKeys))
	start := time.Now()
	deleted := make(chan struct{})
	var deleteErr error
	go func() {
		defer close(deleted)
		deleteErr = parallel(ctx, len(r.namespaces), r.namespaces, func(ns string) error {
			return r.h.k8s.DeleteAllOf(ctx, &ipamv1.IPAddressClaim{}, client.InNamespace(ns),
				client.MatchingLabels{clusterv1.WatchLabel: r.filter})
		})
	}()
	gone := func(st *state) int {
		n := 0
		for _, key := range r.claimKeys {
			if _, ok := st.claims[key]; !ok {
				n++
			}
		}
		if n == len(r.claimKeys) && r.res.released < 0 {
			r.res.released = time.Since(start)
		}
		return n
	}
	if _, err := r.phase(ctx, "release", deleted, gone, r.sampleHeldOnce); err != nil {
		return err
	}
	if deleteErr != nil {
		return fmt.Errorf("deleting claims: %w", deleteErr)
	}
	r.logf("release: waiting up to %s for every claim to be gone", r.s.liveness)
	err := waitUntil(ctx, r.s.liveness, 500*time.Millisecond, func() (bool, error) {
		st, err := r.observe(ctx)
		if err != nil {
			return false, err
		}
		return gone(st) == len(r.claimKeys), nil
	})
	if err != nil && ctx.Err() != nil {
		return err
	}
	if r.res.released >= 0 {
		r.logf("release: all %d claims gone %s after the burst began", len(r.claimKeys), r.res.released.Round(time.Millisecond))
		return nil
	}
	st, err := r.observe(ctx)
	if err != nil {
		return err
	}
	for _, key := range r.claimKeys {
		if _, ok := st.claims[key]; ok {
			r.res.violate(&r.res.stuck, "not released %s after faults stopped: %s", r.s.liveness, r.describe(st, key))
		}
	}
	return nil
}

// checkReleased checks that no record and no IPAddress is left.
func (r *run) checkReleased(ctx context.Context) error {
	recs, err := r.ownRecords()
	if err != nil {
		return err
	}
	st, err := r.observe(ctx)
	if err != nil {
		return err
	}
	r.checkPlansReleased(recs)
	for _, rec := range recs {
		if r.isPlannedSeed(rec) {
			continue // back as planned
		}
		if r.team.disowned[rec.ID] {
			continue // the IPAM team's
		}
		key, _ := claimOfMarker(rec.Marker)
		if _, exists := st.claims[key]; exists {
			continue // its claim is stuck, already reported
		}
		r.res.violate(&r.res.leaks, "record %s (%s) with marker %q left after every claim was deleted", rec.ID, rec.Address, rec.Marker)
	}
	for key, a := range st.addresses {
		if _, exists := st.claims[key]; exists {
			continue
		}
		r.res.violate(&r.res.leaks, "IPAddress %s (%s) left after its claim was deleted (finalizers %v)", key, a.Spec.Address, a.Finalizers)
	}
	return nil
}

// teardown deletes the pools while the manager still runs (their finalizer
// needs it), then stops the manager, the proxy and the IPAM system.
func (r *run) teardown() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if r.px != nil {
		r.px.setEnabled(false)
	}
	if r.mgr != nil && r.mgr.Running() {
		for _, ns := range r.namespaces {
			_ = r.h.k8s.DeleteAllOf(ctx, r.sys.newPool(ns, "pool", netip.Prefix{}, "", "https://x", 0).(client.Object), client.InNamespace(ns))
		}
		_ = waitUntil(ctx, 20*time.Second, 500*time.Millisecond, func() (bool, error) {
			for _, ns := range r.namespaces {
				pool := r.sys.newPool(ns, "pool", netip.Prefix{}, "", "https://x", 0)
				if err := r.h.k8s.Get(ctx, client.ObjectKeyFromObject(pool), pool); !apierrors.IsNotFound(err) {
					return false, nil
				}
			}
			return true, nil
		})
		r.mgr.Stop()
	}
	if r.px != nil {
		r.px.Close()
	}
	if r.proxyLog != nil {
		_ = r.proxyLog.Close()
	}
	if r.sys != nil {
		r.sys.close()
	}
}

// parallel runs fn for every item with at most n at once, retrying each a
// few times; it returns the first error that persisted.
func parallel[T any](ctx context.Context, n int, items []T, fn func(T) error) error {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	work := make(chan T)
	for range max(1, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for item := range work {
				var err error
				for attempt := 0; attempt < 5; attempt++ {
					if err = fn(item); err == nil || apierrors.IsAlreadyExists(err) {
						err = nil
						break
					}
					time.Sleep(200 * time.Millisecond)
				}
				if err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		}()
	}
	for _, item := range items {
		select {
		case work <- item:
		case <-ctx.Done():
		}
	}
	close(work)
	wg.Wait()
	if first == nil {
		first = ctx.Err()
	}
	return first
}

// waitUntil polls cond every interval until it holds or timeout passes.
func waitUntil(ctx context.Context, timeout, interval time.Duration, cond func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	var lastErr error
	for {
		ok, err := cond()
		if ok {
			return nil
		}
		if err != nil {
			lastErr = err
		}
		if time.Now().After(deadline) {
			if lastErr != nil {
				return fmt.Errorf("timed out after %s: %w", timeout, lastErr)
			}
			return fmt.Errorf("timed out after %s", timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(interval):
		}
	}
}

func mustParseURL(s string) *url.URL {
	u, err := url.Parse(s)
	if err != nil {
		panic(err)
	}
	return u
}
