package main

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/api/v1alpha1"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/managerproc"
)

// config is one bench configuration.
type config struct {
	backend string
	claims  int
	workers int
	// batch is the manager's --max-batch-size: 1 turns batching off.
	batch int
	// restartWindow, when set, restarts the manager with every claim bound
	// and counts the IPAM requests in this window after the restart.
	restartWindow time.Duration
	// release deletes the claims at the end and counts what that costs.
	release bool
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
	// releaseWall is from deleting the claims until the last is gone.
	releaseWall time.Duration
	perClaim    float64
	perResync   float64
	perRelease  float64
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
const settle = controllers.DefaultRefreshInterval + 2*time.Second

func (b *bench) run(ctx context.Context, cfg config) (*result, error) {
	// A stuck configuration fails instead of holding the machine.
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute+time.Duration(cfg.claims)*100*time.Millisecond+2*cfg.restartWindow)
	defer cancel()
	sys, err := newSystem(cfg.backend, b.latency)
	if err != nil {
		return nil, err
	}
	defer sys.close()
	res := &result{config: cfg, title: sys.title(), simulated: sys.simulated()}
	ns := fmt.Sprintf("bench-%s-%d-%d-b%d", cfg.backend, cfg.claims, cfg.workers, cfg.batch)
	labels := map[string]string{clusterv1.WatchLabel: ns}

	metricsAddr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	mgr := &managerproc.Process{Bin: b.managerBin, Kubeconfig: b.kubeconfig, LogPath: filepath.Join(b.workDir, ns+".log"),
		Args: []string{
			"--watch-filter=" + ns,
			"--manager-namespace=" + ns,
			"--metrics-bind-address=" + metricsAddr,
			"--health-probe-bind-address=0",
			fmt.Sprintf("--ipaddressclaim-concurrency=%d", cfg.workers),
			fmt.Sprintf("--max-batch-size=%d", cfg.batch),
			"--graceful-shutdown-timeout=5s",
		}}
	if err := mgr.Start(); err != nil {
		return nil, err
	}
	defer mgr.Stop()
	up := func() (metrics, error) {
		var m metrics
		err := poll(ctx, 100*time.Millisecond, func() (bool, error) {
			var err error
			m, err = scrape(ctx, metricsAddr)
			return err == nil, nil
		})
		return m, err
	}
	if _, err := up(); err != nil {
		return nil, fmt.Errorf("manager not up (log %s): %w", mgr.LogPath, err)
	}

	// The pool's first validation, with no claims yet.
	before := sys.requests()
	pool := sys.newPool(ns, "pool", "ipam", labels)
	for _, o := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ipam", Labels: map[string]string{v1alpha1.CredentialsLabel: "true"}},
			Data: sys.secretData()},
		pool,
	} {
		if err := b.c.Create(ctx, o); err != nil {
			return nil, err
		}
	}
	readyCtx, cancelReady := context.WithTimeout(ctx, time.Minute)
	defer cancelReady()
	if err := poll(readyCtx, 100*time.Millisecond, func() (bool, error) {
		err := b.c.Get(ctx, client.ObjectKeyFromObject(pool), pool)
		return err == nil && conditions.IsTrue(pool.(conditions.Getter), v1alpha1.ReadyCondition), nil
	}); err != nil {
		return nil, fmt.Errorf("pool not ready (log %s): %w", mgr.LogPath, err)
	}
	time.Sleep(2 * time.Second)
	res.validation = sys.requests() - before

	// The burst.
	m0, err := scrape(ctx, metricsAddr)
	if err != nil {
		return nil, err
	}
	before = sys.requests()
	bound := newBoundWatch(cfg.claims)
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	go bound.run(watchCtx, b.c, ns)
	var created sync.Map
	start := time.Now()
	if err := parallel(cfg.claims, b.creators, func(i int) error {
		claim := &ipamv1.IPAddressClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("m-%05d", i), Labels: labels},
			Spec:       ipamv1.IPAddressClaimSpec{PoolRef: ipamv1.IPPoolReference{APIGroup: v1alpha1.GroupVersion.Group, Kind: sys.poolKind(), Name: "pool"}},
		}
		t := time.Now()
		created.Store(claim.Name, t)
		return b.c.Create(ctx, claim)
	}); err != nil {
		return nil, fmt.Errorf("creating claims: %w", err)
	}
	select {
	case <-bound.all:
	case <-ctx.Done():
		return nil, fmt.Errorf("binding: %d of %d bound (log %s): %w", bound.count(), cfg.claims, mgr.LogPath, ctx.Err())
	}
	res.wall = bound.last().Sub(start)
	var latencies []time.Duration
	addresses := map[string]bool{}
	for name, seen := range bound.snapshot() {
		t, _ := created.Load(name)
		latencies = append(latencies, seen.at.Sub(t.(time.Time)))
		addresses[seen.address] = true
	}
	if len(addresses) != cfg.claims {
		return nil, fmt.Errorf("%d distinct addresses for %d claims", len(addresses), cfg.claims)
	}
	slices.Sort(latencies)
	res.p50, res.p95 = percentile(latencies, 50), percentile(latencies, 95)
	time.Sleep(settle)
	res.perClaim = float64(sys.requests()-before) / float64(cfg.claims)
	m1, err := scrape(ctx, metricsAddr)
	if err != nil {
		return nil, err
	}
	res.apiPerClaim = perClaim(m0, m1, cfg.claims)

	// A forced resync: an annotation makes every bound claim reconcile once more.
	before = sys.requests()
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
	res.perResync = float64(sys.requests()-before) / float64(cfg.claims)

	if res.peakRSS, err = peakRSS(mgr.Pid()); err != nil {
		return nil, err
	}
	if cfg.restartWindow > 0 {
		mgr.Stop()
		before = sys.requests()
		restarted := time.Now()
		if err := mgr.Start(); err != nil {
			return nil, err
		}
		if _, err := up(); err != nil {
			return nil, fmt.Errorf("manager not up after the restart: %w", err)
		}
		time.Sleep(time.Until(restarted.Add(cfg.restartWindow)))
		res.restartRequests = sys.requests() - before
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
		before = sys.requests()
		deleted := time.Now()
		if err := b.c.DeleteAllOf(ctx, &ipamv1.IPAddressClaim{}, client.InNamespace(ns)); err != nil {
			return nil, err
		}
		if err := poll(ctx, 100*time.Millisecond, func() (bool, error) {
			l := &metav1.PartialObjectMetadataList{}
			l.SetGroupVersionKind(ipamv1.GroupVersion.WithKind("IPAddressClaimList"))
			err := b.c.List(ctx, l, client.InNamespace(ns))
			return err == nil && len(l.Items) == 0, nil
		}); err != nil {
			return nil, fmt.Errorf("releasing (log %s): %w", mgr.LogPath, err)
		}
		res.releaseWall = time.Since(deleted)
		time.Sleep(settle)
		res.perRelease = float64(sys.requests()-before) / float64(cfg.claims)
		m1, err := scrape(ctx, metricsAddr)
		if err != nil {
			return nil, err
		}
		res.apiPerRelease = perClaim(m0, m1, cfg.claims)
	}
	return res, nil
}

// boundWatch records when each claim's IPAddress first appears, from a
// watch, so that the bench does not load the API server it measures with
// repeated lists.
type boundWatch struct {
	want int
	all  chan struct{}

	mu     sync.Mutex
	seen   map[string]seenAddress
	latest time.Time
}

type seenAddress struct {
	at      time.Time
	address string
}

func newBoundWatch(want int) *boundWatch {
	return &boundWatch{want: want, all: make(chan struct{}), seen: map[string]seenAddress{}}
}

// run watches until ctx ends, watching again whenever the API server ends
// the watch (IPAddresses are named after their claims).
func (w *boundWatch) run(ctx context.Context, c client.WithWatch, ns string) {
	for ctx.Err() == nil {
		list := &ipamv1.IPAddressList{}
		if err := c.List(ctx, list, client.InNamespace(ns)); err != nil {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		for i := range list.Items {
			w.add(&list.Items[i])
		}
		wi, err := c.Watch(ctx, &ipamv1.IPAddressList{}, client.InNamespace(ns), &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: list.ResourceVersion}})
		if err != nil {
			continue
		}
		for ev := range wi.ResultChan() {
			if a, ok := ev.Object.(*ipamv1.IPAddress); ok && (ev.Type == watch.Added || ev.Type == watch.Modified) {
				w.add(a)
			}
		}
		wi.Stop()
	}
}

func (w *boundWatch) add(a *ipamv1.IPAddress) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.seen[a.Name]; ok {
		return
	}
	now := time.Now()
	w.seen[a.Name] = seenAddress{at: now, address: a.Spec.Address}
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
