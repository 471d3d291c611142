package main

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/api/v1alpha1"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/pool"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/pkg/backendhttp"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/httpfault"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/managerproc"
)

// config is one bench configuration.
type config struct {
	backend string
	claims  int
	workers int
	// batch is the manager's --max-batch-size: 1 turns batching off.
	batch int
	// rateLimit is the pool's rate limit: nil, the default, but for the
	// rows labelled "tuned".
	rateLimit *v1alpha1.RateLimit
	// restartWindow, when set, restarts the manager with every claim bound
	// and counts the IPAM requests in this window after the restart.
	restartWindow time.Duration
	// release deletes the claims at the end and counts what that costs.
	release bool
	// carve, when set, makes the pool hand each claim a child prefix of
	// this length carved from the system's carving parent
	// (spec.childPrefixes) instead of an address.
	carve int
	// subnets, with carve, makes the burst one of ClusterSubnets (and
	// their Clusters) of the carving pool instead of claims.
	subnets bool
	// repeat numbers the runs of one configuration after the first: each
	// gets a namespace of its own.
	repeat int
}

// tuned says whether the configuration departs from the pool's default
// settings (its rate limit); every target is judged on untuned rows.
func (c config) tuned() bool { return c.rateLimit != nil }

// limit is the pool's rate limit in effect.
func (c config) limit() backendhttp.Limit {
	if c.rateLimit == nil {
		return backendhttp.DefaultLimit
	}
	return backendhttp.Limit{RequestsPerSecond: int(c.rateLimit.RequestsPerSecond), Burst: int(c.rateLimit.Burst),
		MaxConcurrent: int(c.rateLimit.MaxConcurrentRequests)}
}

// result is what one configuration measured. Request counts are every
// request the IPAM system received in the phase, divided by the claims.
type result struct {
	config
	title string
	// simulated: the system answered at the bench's latency.
	simulated bool
	// validation is the requests of the pool's first validation.
	validation int
	wall       time.Duration
	p50, p95   time.Duration
	// lastCreate is from the first create until NetBox answered the
	// burst's last create request; 0 on other systems.
	lastCreate time.Duration
	// releaseWall is from deleting the claims until the last is gone.
	releaseWall time.Duration
	// releaseKinds counts the release's IPAM requests by kind (see
	// callKinds).
	releaseKinds map[string]int
	perClaim     float64
	perResync    float64
	perRelease   float64
	// allocateBatch and releaseBatch are the mean sizes of the manager's
	// batches in the burst and in the release.
	allocateBatch, releaseBatch float64
	// apiPerClaim and apiPerRelease are the manager's API-server requests
	// by verb, per claim.
	apiPerClaim, apiPerRelease map[string]float64
	// restartRequests is the IPAM requests in restartWindow after a restart.
	restartRequests int
	// restartReconciled is the claims reconciled in that window.
	restartReconciled int
	peakRSS           int64 // bytes: the manager that bound the burst
	restartPeakRSS    int64 // bytes: the restarted manager, at the window's end
}

// bench holds what every configuration shares.
type bench struct {
	c          client.WithWatch
	managerBin string
	kubeconfig string
	workDir    string
	latency    time.Duration
	// creators is how many clients create the burst's claims.
	creators int
}

// settle is how long after a phase ends its requests are still counted: a
// pool's counts refresh once after a burst settles, at most one refresh
// interval later.
const settle = pool.DefaultRefreshInterval + 2*time.Second

func (b *bench) run(ctx context.Context, cfg config) (*result, error) {
	// A stuck configuration fails instead of holding the machine.
	// At the pool's default rate limit (20 requests a second), a burst with
	// batching off costs about 100 ms a claim to bind and as much to release.
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute+time.Duration(cfg.claims)*250*time.Millisecond+2*cfg.restartWindow)
	defer cancel()
	st, err := b.setUp(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer st.close()
	sys, ns, mgr, metricsAddr := st.sys, st.ns, st.mgr, st.metricsAddr
	labels := map[string]string{clusterv1.WatchLabel: ns}
	res := &result{config: cfg, title: sys.title(), simulated: sys.simulated(), validation: st.validation}

	// The burst.
	m0, err := scrape(ctx, metricsAddr)
	if err != nil {
		return nil, err
	}
	before := received(sys)
	poolRef := ipamv1.IPPoolReference{APIGroup: v1alpha1.GroupVersion.Group, Kind: sys.poolKind(), Name: "pool"}
	timing, err := b.burst(ctx, ns, cfg.claims, labels, poolRef)
	if err != nil {
		return nil, fmt.Errorf("%w (log %s)", err, mgr.LogPath)
	}
	res.wall, res.p50, res.p95 = timing.wall, timing.p50, timing.p95
	if calls := sys.calls(); len(calls) >= before && strings.HasPrefix(cfg.backend, "netbox") {
		// On NetBox every POST creates; WAPI searches with POSTs too.
		res.lastCreate = lastCreateAnswered(calls[before:], timing.start)
	}
	time.Sleep(settle)
	res.perClaim = float64(received(sys)-before) / float64(cfg.claims)
	m1, err := scrape(ctx, metricsAddr)
	if err != nil {
		return nil, err
	}
	res.apiPerClaim = perClaim(m0, m1, cfg.claims)
	res.allocateBatch = meanBatch(m0, m1, "allocate")

	// A forced resync: an annotation makes every bound claim reconcile once more.
	before = received(sys)
	if err := parallel(cfg.claims, b.creators, func(i int) error {
		claim := &ipamv1.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("m-%05d", i)}}
		return b.c.Patch(ctx, claim, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"bench/resync":"1"}}}`)))
	}); err != nil {
		return nil, fmt.Errorf("resync: %w", err)
	}
	if err := poll(ctx, 100*time.Millisecond, func() (bool, error) {
		m, err := scrape(ctx, metricsAddr)
		return err == nil && m.claimReconciles >= m1.claimReconciles+float64(cfg.claims), nil
	}); err != nil {
		return nil, fmt.Errorf("resync: %w", err)
	}
	time.Sleep(2 * time.Second)
	res.perResync = float64(received(sys)-before) / float64(cfg.claims)

	if res.peakRSS, err = peakRSS(mgr.Pid()); err != nil {
		return nil, err
	}
	if cfg.restartWindow > 0 {
		mgr.Stop()
		before = received(sys)
		restarted := time.Now()
		if err := mgr.Start(); err != nil {
			return nil, err
		}
		if _, err := waitForMetrics(ctx, metricsAddr); err != nil {
			return nil, fmt.Errorf("manager not up after the restart: %w", err)
		}
		time.Sleep(time.Until(restarted.Add(cfg.restartWindow)))
		res.restartRequests = received(sys) - before
		m, err := scrape(ctx, metricsAddr)
		if err != nil {
			return nil, err
		}
		res.restartReconciled = int(m.claimReconciles)
		if res.restartPeakRSS, err = peakRSS(mgr.Pid()); err != nil {
			return nil, err
		}
	}

	if cfg.release {
		m0, err := scrape(ctx, metricsAddr)
		if err != nil {
			return nil, err
		}
		before = received(sys)
		deleted := time.Now()
		if err := b.deleteClaims(ctx, ns); err != nil {
			return nil, fmt.Errorf("releasing (log %s): %w", mgr.LogPath, err)
		}
		res.releaseWall = time.Since(deleted)
		time.Sleep(settle)
		res.perRelease = float64(received(sys)-before) / float64(cfg.claims)
		if calls := sys.calls(); len(calls) >= before {
			res.releaseKinds = callKinds(calls[before:])
		}
		m1, err := scrape(ctx, metricsAddr)
		if err != nil {
			return nil, err
		}
		res.apiPerRelease = perClaim(m0, m1, cfg.claims)
		res.releaseBatch = meanBatch(m0, m1, "release")
	}
	return res, nil
}

// setup is what a configuration runs on: its IPAM system, its namespace,
// its manager and its pool, validated.
type setup struct {
	sys         system
	ns          string
	mgr         *managerproc.Process
	metricsAddr string
	pool        client.Object
	// validation is the requests of the pool's first validation.
	validation int
	close      func()
}

// setUp starts cfg's IPAM system and a manager of its own, and creates its
// namespace, credentials and pool "pool", ready.
func (b *bench) setUp(ctx context.Context, cfg config) (_ *setup, err error) {
	sys, err := newSystem(cfg.backend, b.latency)
	if err != nil {
		return nil, err
	}
	st := &setup{sys: sys, close: sys.close}
	defer func() {
		if err != nil {
			st.close()
		}
	}()
	ns := fmt.Sprintf("bench-%s-%d-%d-b%d", cfg.backend, cfg.claims, cfg.workers, cfg.batch)
	if cfg.tuned() {
		ns += "-tuned"
	}
	if cfg.carve > 0 {
		ns += fmt.Sprintf("-carve%d", cfg.carve)
	}
	if cfg.subnets {
		ns += "-subnets"
	}
	if cfg.repeat > 0 {
		ns += fmt.Sprintf("-r%d", cfg.repeat)
	}
	st.ns = ns
	labels := map[string]string{clusterv1.WatchLabel: ns}

	if st.metricsAddr, err = managerproc.FreeAddr(); err != nil {
		return nil, err
	}
	st.mgr = &managerproc.Process{Bin: b.managerBin, Kubeconfig: b.kubeconfig, LogPath: filepath.Join(b.workDir, ns+".log"),
		Args: []string{
			"--watch-filter=" + ns,
			"--manager-namespace=" + ns,
			// Plain HTTP, so that the bench scrapes without a token.
			"--diagnostics-address=" + st.metricsAddr,
			"--insecure-diagnostics",
			"--health-addr=0",
			// One manager runs, and the in-cluster provider runs without
			// leader election too (it has no lease namespace flag, so it
			// cannot elect outside a cluster): lease renewals, a few
			// requests a second whatever the claims, would otherwise count
			// against ours alone in the API-server requests per claim.
			"--leader-elect=false",
			fmt.Sprintf("--ipaddressclaim-concurrency=%d", cfg.workers),
			fmt.Sprintf("--max-batch-size=%d", cfg.batch),
			"--graceful-shutdown-timeout=5s",
		}}
	if err := st.mgr.Start(); err != nil {
		return nil, err
	}
	st.close = func() { st.mgr.Stop(); sys.close() }
	if _, err := waitForMetrics(ctx, st.metricsAddr); err != nil {
		return nil, fmt.Errorf("manager not up (log %s): %w", st.mgr.LogPath, err)
	}

	// The pool's first validation, with no claims yet.
	before := received(sys)
	st.pool = sys.newPool(ns, "pool", "ipam", labels, cfg.rateLimit, cfg.carve)
	for _, o := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ipam", Labels: map[string]string{v1alpha1.CredentialsLabel: "true"}},
			Data: sys.secretData()},
		st.pool,
	} {
		if err := b.c.Create(ctx, o); err != nil {
			return nil, err
		}
	}
	readyCtx, cancelReady := context.WithTimeout(ctx, time.Minute)
	defer cancelReady()
	if err := poll(readyCtx, 100*time.Millisecond, func() (bool, error) {
		err := b.c.Get(ctx, client.ObjectKeyFromObject(st.pool), st.pool)
		return err == nil && conditions.IsTrue(st.pool.(conditions.Getter), v1alpha1.ReadyCondition), nil
	}); err != nil {
		return nil, fmt.Errorf("pool not ready (log %s): %w", st.mgr.LogPath, err)
	}
	time.Sleep(2 * time.Second)
	st.validation = received(sys) - before
	return st, nil
}

// burstTiming is how long a burst took to bind.
type burstTiming struct {
	// wall is from the first create until the last claim was bound.
	wall     time.Duration
	p50, p95 time.Duration
	// start is when the first claim was created.
	start time.Time
}

// burst creates n claims of pool in ns from b.creators clients at once and
// waits until every one is bound to a distinct address. Both providers the
// bench measures get the same burst.
func (b *bench) burst(ctx context.Context, ns string, n int, labels map[string]string, pool ipamv1.IPPoolReference) (burstTiming, error) {
	bound := newBoundWatch(n)
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	go bound.run(watchCtx, b.c, ns)
	var created sync.Map
	start := time.Now()
	if err := parallel(n, b.creators, func(i int) error {
		claim := &ipamv1.IPAddressClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("m-%05d", i), Labels: labels},
			Spec:       ipamv1.IPAddressClaimSpec{PoolRef: pool},
		}
		created.Store(claim.Name, time.Now())
		return b.c.Create(ctx, claim)
	}); err != nil {
		return burstTiming{}, fmt.Errorf("creating claims: %w", err)
	}
	select {
	case <-bound.all:
	case <-ctx.Done():
		return burstTiming{}, fmt.Errorf("binding: %d of %d bound: %w", bound.count(), n, ctx.Err())
	}
	var latencies []time.Duration
	addresses := map[string]bool{}
	for name, seen := range bound.snapshot() {
		t, _ := created.Load(name)
		latencies = append(latencies, seen.at.Sub(t.(time.Time)))
		addresses[seen.address] = true
	}
	if len(addresses) != n {
		return burstTiming{}, fmt.Errorf("%d distinct addresses for %d claims", len(addresses), n)
	}
	slices.Sort(latencies)
	return burstTiming{wall: bound.last().Sub(start), p50: percentile(latencies, 50), p95: percentile(latencies, 95), start: start}, nil
}

// deleteClaims deletes every claim in ns and waits until they are gone,
// that is until the provider has released them.
func (b *bench) deleteClaims(ctx context.Context, ns string) error {
	// A collection of 10,000 claims may outlast the API server's request
	// timeout on a busy machine (seen: five attempts in a row cut off);
	// what an attempt deleted stays deleted, so each one gets further.
	var err error
	for range 30 {
		if err = b.c.DeleteAllOf(ctx, &ipamv1.IPAddressClaim{}, client.InNamespace(ns)); err == nil {
			break
		}
		time.Sleep(time.Second)
	}
	if err != nil {
		return fmt.Errorf("deleting claims: %w", err)
	}
	return poll(ctx, 100*time.Millisecond, func() (bool, error) {
		l := &metav1.PartialObjectMetadataList{}
		l.SetGroupVersionKind(ipamv1.GroupVersion.WithKind("IPAddressClaimList"))
		err := b.c.List(ctx, l, client.InNamespace(ns))
		return err == nil && len(l.Items) == 0, nil
	})
}

// boundWatch records when each claim is bound, from watches, so that the
// bench does not load the API server it measures with repeated lists. A
// claim is bound once its IPAddress exists and its status.addressRef is set:
// a consumer waits for both, and providers write them in separate requests.
type boundWatch struct {
	want int
	all  chan struct{}

	mu sync.Mutex
	// addresses is each claim's IPAddress, by claim name.
	addresses map[string]string
	// referenced holds the claims whose status.addressRef is set.
	referenced map[string]bool
	seen       map[string]seenAddress
	latest     time.Time
}

type seenAddress struct {
	at      time.Time
	address string
}

func newBoundWatch(want int) *boundWatch {
	return &boundWatch{want: want, all: make(chan struct{}),
		addresses: map[string]string{}, referenced: map[string]bool{}, seen: map[string]seenAddress{}}
}

// run watches IPAddresses and claims until ctx ends.
func (w *boundWatch) run(ctx context.Context, c client.WithWatch, ns string) {
	go listWatch(ctx, c, ns, &ipamv1.IPAddressList{}, func(o runtime.Object) {
		if a, ok := o.(*ipamv1.IPAddress); ok {
			w.addAddress(a.Spec.ClaimRef.Name, a.Spec.Address)
		}
	})
	listWatch(ctx, c, ns, &ipamv1.IPAddressClaimList{}, func(o runtime.Object) {
		if claim, ok := o.(*ipamv1.IPAddressClaim); ok && claim.Status.AddressRef.Name != "" {
			w.addReference(claim.Name)
		}
	})
}

// listWatch lists and then watches the objects of list's kind in ns until
// ctx ends, watching again whenever the API server ends the watch, and
// hands every listed, added or modified object to seen.
func listWatch(ctx context.Context, c client.WithWatch, ns string, list client.ObjectList, seen func(runtime.Object)) {
	for ctx.Err() == nil {
		if err := c.List(ctx, list, client.InNamespace(ns)); err != nil {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		items, err := meta.ExtractList(list)
		if err != nil {
			return
		}
		for _, o := range items {
			seen(o)
		}
		wi, err := c.Watch(ctx, list, client.InNamespace(ns), &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: list.GetResourceVersion()}})
		if err != nil {
			continue
		}
		for ev := range wi.ResultChan() {
			if ev.Type == watch.Added || ev.Type == watch.Modified {
				seen(ev.Object)
			}
		}
		wi.Stop()
	}
}

func (w *boundWatch) addAddress(claim, address string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.addresses[claim]; !ok {
		w.addresses[claim] = address
		w.bindIfComplete(claim)
	}
}

func (w *boundWatch) addReference(claim string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.referenced[claim] {
		w.referenced[claim] = true
		w.bindIfComplete(claim)
	}
}

// bindIfComplete records the claim as bound now if both halves are in.
// The caller holds w.mu.
func (w *boundWatch) bindIfComplete(claim string) {
	address, ok := w.addresses[claim]
	if !ok || !w.referenced[claim] {
		return
	}
	if _, done := w.seen[claim]; done {
		return
	}
	now := time.Now()
	w.seen[claim] = seenAddress{at: now, address: address}
	w.latest = now
	if len(w.seen) == w.want {
		close(w.all)
	}
}

func (w *boundWatch) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.seen)
}

func (w *boundWatch) last() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.latest
}

func (w *boundWatch) snapshot() map[string]seenAddress {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[string]seenAddress, len(w.seen))
	for k, v := range w.seen {
		out[k] = v
	}
	return out
}

func poll(ctx context.Context, interval time.Duration, done func() (bool, error)) error {
	return wait.PollUntilContextCancel(ctx, interval, true, func(context.Context) (bool, error) { return done() })
}

var idInPath = regexp.MustCompile(`/[0-9]+/`)

// callKinds counts calls by method, path (with IDs as {id}) and status,
// so that a report says what a phase's requests were for.
func callKinds(calls []httpfault.Call) map[string]int {
	kinds := map[string]int{}
	for _, c := range calls {
		kinds[fmt.Sprintf("%s %s %d", c.Method, idInPath.ReplaceAllString(c.Path, "/{id}/"), c.Status)]++
	}
	return kinds
}

// lastCreateAnswered is when, after start, the last of NetBox calls that
// creates (a POST) was answered; 0 for none.
func lastCreateAnswered(calls []httpfault.Call, start time.Time) time.Duration {
	var last time.Duration
	for _, c := range calls {
		if c.Method == http.MethodPost && !c.At.IsZero() {
			last = max(last, c.At.Sub(start))
		}
	}
	return last
}
