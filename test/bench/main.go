// Command bench measures the provider end to end: a real kube-apiserver
// and etcd, the NetBox simulator answering with a fixed latency and holding
// each prefix's lock for every allocation as NetBox does, and the manager.
// It binds a burst of claims with batching off (--max-batch-size=1) and on,
// then releases them, and prints the time until all are bound and until all
// are released, claims per second, bind latency percentiles and NetBox
// requests per new claim, per resync and per release. Each configuration
// runs several times and the median is reported, since build machines are
// shared and noisy.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/api/v1alpha1"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/pkg/scheme"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/envtestenv"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/netboxsim"
)

var (
	claims     = flag.Int("claims", 1000, "claims per burst")
	runs       = flag.Int("runs", 1, "runs per configuration; the median is reported")
	workers    = flag.Int("workers", 10, "claim workers (--ipaddressclaim-concurrency)")
	latency    = flag.Duration("netbox-latency", 5*time.Millisecond, "latency the simulator adds to every request")
	allocFixed = flag.Duration("netbox-alloc-request", 20*time.Millisecond, "time an allocation request holds its prefix's lock in the simulator")
	allocEach  = flag.Duration("netbox-alloc-object", 2*time.Millisecond, "time each allocated address adds while the prefix's lock is held")
)

type result struct {
	wall            time.Duration
	released        time.Duration
	p50, p95        time.Duration
	perClaim        float64
	perResync       float64
	perRelease      float64
	distinctAddress int
}

func main() {
	flag.Parse()
	ctrl.SetLogger(logr.Discard())
	env, cfg, err := envtestenv.Start()
	if err != nil {
		fail(err)
	}
	defer func() { _ = env.Stop() }()

	fmt.Printf("%d claims per burst, %d workers, NetBox latency %s per request, allocations holding the prefix's lock %s + %s per address, median of %d runs\n\n",
		*claims, *workers, *latency, *allocFixed, *allocEach, *runs)
	fmt.Printf("%-16s %10s %10s %10s %10s %10s %14s %14s %14s\n", "max-batch-size", "bound", "claims/s", "bind p50", "bind p95", "released",
		"req/new claim", "req/resync", "req/release")
	medians := map[int]result{}
	for _, batch := range []int{1, backends.DefaultMaxBatchSize} {
		var rs []result
		for run := range *runs {
			r, err := burst(cfg, batch, run)
			if err != nil {
				fail(err)
			}
			if r.distinctAddress != *claims {
				fail(fmt.Errorf("max batch size %d: %d distinct addresses for %d claims", batch, r.distinctAddress, *claims))
			}
			rs = append(rs, r)
		}
		slices.SortFunc(rs, func(a, b result) int { return int(a.wall - b.wall) })
		m := rs[len(rs)/2]
		medians[batch] = m
		fmt.Printf("%-16d %10s %10.1f %10s %10s %10s %14.2f %14.2f %14.2f\n", batch, m.wall.Round(time.Millisecond),
			float64(*claims)/m.wall.Seconds(), m.p50.Round(time.Millisecond), m.p95.Round(time.Millisecond), m.released.Round(time.Millisecond),
			m.perClaim, m.perResync, m.perRelease)
	}
	off, on := medians[1], medians[backends.DefaultMaxBatchSize]
	fmt.Printf("\nbatching: bound %.1fx faster, released %.1fx faster (median times)\n",
		off.wall.Seconds()/on.wall.Seconds(), off.released.Seconds()/on.released.Seconds())
}

// burst runs one manager with the given batch size, creates the claims at
// once and waits for all to bind, then resyncs and releases them.
func burst(cfg *rest.Config, batch, run int) (result, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	s := scheme.New()
	c, err := client.New(cfg, client.Options{Scheme: s})
	if err != nil {
		return result{}, err
	}
	ns := fmt.Sprintf("bench-%d-%d", batch, run)
	filter := ns

	sim := netboxsim.New()
	defer sim.Close()
	token := "0123456789abcdef0123456789abcdef01234567"
	sim.AddToken(token, true)
	sim.AddPrefixWithGateway("10.0.0.0/16", netboxsim.PrefixOptions{})
	sim.SetLatency(*latency)
	sim.SetAllocationCost(*allocFixed, *allocEach)

	mgrCtx, stop := context.WithCancel(ctx)
	defer stop()
	if _, err := envtestenv.StartManager(mgrCtx, cfg, s, controllers.Options{
		ManagerNamespace: ns, WatchFilterValue: filter, ClaimConcurrency: *workers, SyncPeriod: time.Hour,
		Backend: controllers.BackendOptions{MaxBatchSize: batch},
	}); err != nil {
		return result{}, err
	}

	labels := map[string]string{clusterv1.WatchLabel: filter}
	for _, o := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "netbox",
			Labels: map[string]string{v1alpha1.CredentialsLabel: "true"}}, Data: map[string][]byte{"token": []byte(token)}},
		&v1alpha1.NetboxIPPool{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pool", Labels: labels},
			Spec: v1alpha1.NetboxIPPoolSpec{
				// The bench measures the provider, not the client-side limit.
				Connection: v1alpha1.NetboxConnection{URL: sim.URL(), CredentialsSecretRef: v1alpha1.SecretReference{Name: "netbox"},
					RateLimit: &v1alpha1.RateLimit{RequestsPerSecond: 10000, Burst: 10000, MaxConcurrentRequests: 1000}},
				Sources: []v1alpha1.NetboxAddressSource{{Prefix: &v1alpha1.NetboxPrefixSource{CIDR: "10.0.0.0/16"}}},
			},
		},
	} {
		if err := c.Create(ctx, o); err != nil {
			return result{}, err
		}
	}
	if err := poll(ctx, func() (bool, error) {
		pool := &v1alpha1.NetboxIPPool{}
		err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "pool"}, pool)
		return err == nil && conditions.IsTrue(pool, v1alpha1.ReadyCondition), nil
	}); err != nil {
		return result{}, fmt.Errorf("pool not ready: %w", err)
	}

	// The burst.
	sim.ResetCalls()
	created := make(map[string]time.Time, *claims)
	start := time.Now()
	for i := range *claims {
		claim := &ipamv1.IPAddressClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("m-%03d", i), Labels: labels},
			Spec:       ipamv1.IPAddressClaimSpec{PoolRef: ipamv1.IPPoolReference{APIGroup: v1alpha1.GroupVersion.Group, Kind: "NetboxIPPool", Name: "pool"}},
		}
		if err := c.Create(ctx, claim); err != nil {
			return result{}, err
		}
		created[claim.Name] = time.Now()
	}
	bound := map[string]time.Duration{}
	addresses := map[string]bool{}
	if err := pollFast(ctx, func() (bool, error) {
		list := &ipamv1.IPAddressList{}
		if err := c.List(ctx, list, client.InNamespace(ns)); err != nil {
			return false, err
		}
		for _, a := range list.Items {
			if _, seen := bound[a.Name]; !seen {
				bound[a.Name] = time.Since(created[a.Name])
				addresses[a.Spec.Address] = true
			}
		}
		return len(bound) == *claims, nil
	}); err != nil {
		return result{}, fmt.Errorf("binding: %w", err)
	}
	r := result{wall: time.Since(start), distinctAddress: len(addresses)}
	var latencies []time.Duration
	for _, d := range bound {
		latencies = append(latencies, d)
	}
	sort.Slice(latencies, func(i, j int) bool { return latencies[i] < latencies[j] })
	r.p50, r.p95 = latencies[len(latencies)/2], latencies[len(latencies)*95/100]
	r.perClaim = claimRequests(sim) / float64(*claims)

	// A resync: every claim reconciles once more (pause and unpause would
	// need a Cluster; an annotation on each claim does it directly).
	sim.ResetCalls()
	list := &ipamv1.IPAddressClaimList{}
	if err := c.List(ctx, list, client.InNamespace(ns)); err != nil {
		return result{}, err
	}
	for i := range list.Items {
		claim := &list.Items[i]
		patch := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"bench/resync":"1"}}}`))
		if err := c.Patch(ctx, claim, patch); err != nil {
			return result{}, err
		}
	}
	time.Sleep(2 * time.Second)
	r.perResync = claimRequests(sim) / float64(*claims)

	// Release them all.
	sim.ResetCalls()
	start = time.Now()
	if err := c.DeleteAllOf(ctx, &ipamv1.IPAddressClaim{}, client.InNamespace(ns)); err != nil {
		return result{}, err
	}
	if err := pollFast(ctx, func() (bool, error) {
		l := &ipamv1.IPAddressClaimList{}
		err := c.List(ctx, l, client.InNamespace(ns))
		return err == nil && len(l.Items) == 0, err
	}); err != nil {
		return result{}, fmt.Errorf("releasing: %w", err)
	}
	r.released = time.Since(start)
	r.perRelease = claimRequests(sim) / float64(*claims)
	return r, nil
}

// claimRequests counts the requests made for claims, leaving out the pool
// reconciler's count refreshes.
func claimRequests(sim *netboxsim.Server) float64 {
	n := 0
	for _, call := range sim.Calls() {
		if call.Method != "GET" || containsMarkerFilter(call.Query) {
			n++
		}
	}
	return float64(n)
}

func containsMarkerFilter(q string) bool {
	return strings.Contains(q, "cf_capi_ipam_claim=") || strings.Contains(q, "address=")
}

func poll(ctx context.Context, done func() (bool, error)) error {
	return wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(context.Context) (bool, error) { return done() })
}

func pollFast(ctx context.Context, done func() (bool, error)) error {
	return wait.PollUntilContextCancel(ctx, 10*time.Millisecond, true, func(context.Context) (bool, error) { return done() })
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "bench:", err)
	os.Exit(1)
}
