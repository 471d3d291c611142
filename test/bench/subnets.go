package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/api/v1alpha1"
)

// subnetResult is what a fleet of ClusterSubnets measured.
type subnetResult struct {
	config
	title     string
	simulated bool
	// carved is from the first create until every subnet had its child;
	// ready until every nodes pool was validated (the gateway held).
	carved, ready      time.Duration
	readyP50, readyP95 time.Duration
	// perCluster is every IPAM request of the roll-out, per cluster: the
	// carves, the gateways, and the validations of each gateway pool and
	// nodes pool.
	perCluster float64
	// kinds counts the roll-out's IPAM requests by kind (see callKinds).
	kinds map[string]int
	// carveBatch is the mean size of the manager's allocation batches
	// (the children's and the gateways').
	carveBatch float64
	// released is from deleting the subnets until the last was gone;
	// perRelease its IPAM requests per cluster.
	released   time.Duration
	perRelease float64
}

// runSubnets creates cfg.claims Clusters and their ClusterSubnets of a
// carving pool at once, as a fleet roll-out does, and measures until every
// subnet is ready, then deletes them.
func (b *bench) runSubnets(ctx context.Context, cfg config) (*subnetResult, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute+time.Duration(cfg.claims)*time.Second)
	defer cancel()
	st, err := b.setUp(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer st.close()
	res := &subnetResult{config: cfg, title: st.sys.title(), simulated: st.sys.simulated()}
	labels := map[string]string{clusterv1.WatchLabel: st.ns}
	name := func(i int) string { return fmt.Sprintf("c-%05d", i) }

	m0, err := scrape(ctx, st.metricsAddr)
	if err != nil {
		return nil, err
	}
	before := received(st.sys)
	created := make([]time.Time, cfg.claims)
	start := time.Now()
	if err := parallel(cfg.claims, b.creators, func(i int) error {
		cluster := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: st.ns, Name: name(i), Labels: labels},
			Spec: clusterv1.ClusterSpec{ClusterNetwork: clusterv1.ClusterNetwork{ServiceDomain: "cluster.local"}}}
		if err := b.c.Create(ctx, cluster); err != nil {
			return err
		}
		created[i] = time.Now()
		return b.c.Create(ctx, &v1alpha1.ClusterSubnet{
			ObjectMeta: metav1.ObjectMeta{Namespace: st.ns, Name: name(i), Labels: labels},
			Spec: v1alpha1.ClusterSubnetSpec{ClusterName: name(i),
				ParentPoolRef: v1alpha1.SubnetParentReference{Kind: st.sys.poolKind(), Name: "pool"}},
		})
	}); err != nil {
		return nil, fmt.Errorf("creating the clusters and their subnets: %w", err)
	}

	carvedAt, readyAt := map[string]time.Time{}, map[string]time.Time{}
	prefixes := map[string]string{}
	if err := poll(ctx, 100*time.Millisecond, func() (bool, error) {
		subnets := &v1alpha1.ClusterSubnetList{}
		if err := b.c.List(ctx, subnets, client.InNamespace(st.ns)); err != nil {
			return false, nil
		}
		now := time.Now()
		for _, s := range subnets.Items {
			if _, ok := carvedAt[s.Name]; !ok && s.Status.Prefix != "" {
				carvedAt[s.Name], prefixes[s.Name] = now, s.Status.Prefix
			}
			if _, ok := readyAt[s.Name]; !ok && meta.IsStatusConditionTrue(s.Status.Conditions, v1alpha1.ReadyCondition) {
				readyAt[s.Name] = now
			}
		}
		return len(readyAt) == cfg.claims, nil
	}); err != nil {
		return nil, fmt.Errorf("%d of %d subnets carved, %d ready (log %s): %w", len(carvedAt), cfg.claims, len(readyAt), st.mgr.LogPath, err)
	}
	distinct := map[string]bool{}
	for _, p := range prefixes {
		distinct[p] = true
	}
	if len(distinct) != cfg.claims {
		return nil, fmt.Errorf("%d distinct children for %d subnets", len(distinct), cfg.claims)
	}
	var latencies []time.Duration
	for i := range cfg.claims {
		at := readyAt[name(i)]
		latencies = append(latencies, at.Sub(created[i]))
		res.ready = max(res.ready, at.Sub(start))
		res.carved = max(res.carved, carvedAt[name(i)].Sub(start))
	}
	slices.Sort(latencies)
	res.readyP50, res.readyP95 = percentile(latencies, 50), percentile(latencies, 95)
	time.Sleep(settle)
	res.perCluster = float64(received(st.sys)-before) / float64(cfg.claims)
	if calls := st.sys.calls(); len(calls) >= before {
		res.kinds = callKinds(calls[before:])
	}
	m1, err := scrape(ctx, st.metricsAddr)
	if err != nil {
		return nil, err
	}
	res.carveBatch = meanBatch(m0, m1, "allocate")

	// The fleet goes: each subnet lets its nodes pool, its gateway and its
	// child go, in that order.
	before = received(st.sys)
	deleted := time.Now()
	if err := b.c.DeleteAllOf(ctx, &v1alpha1.ClusterSubnet{}, client.InNamespace(st.ns)); err != nil {
		return nil, fmt.Errorf("deleting the subnets: %w", err)
	}
	if err := poll(ctx, 100*time.Millisecond, func() (bool, error) {
		subnets := &v1alpha1.ClusterSubnetList{}
		err := b.c.List(ctx, subnets, client.InNamespace(st.ns))
		return err == nil && len(subnets.Items) == 0, nil
	}); err != nil {
		return nil, fmt.Errorf("releasing the subnets (log %s): %w", st.mgr.LogPath, err)
	}
	res.released = time.Since(deleted)
	time.Sleep(settle)
	res.perRelease = float64(received(st.sys)-before) / float64(cfg.claims)
	return res, nil
}

// printSubnets prints the fleet rows: Clusters and their ClusterSubnets
// created at once, beside the real NetBox alone carving as many children.
func printSubnets(w io.Writer, rows []*subnetResult, floor *netboxFloor, latency time.Duration) {
	if len(rows) == 0 {
		return
	}
	fmt.Fprintf(w, "\nSubnets: %d Clusters and their ClusterSubnets created at once, /%d children of a /16, gateway held, nodes pool made; the pool's default rate limit but in the rows marked tuned (the parent's, which its subnets' pools copy); simulators answer at %s per request\n\n",
		rows[0].claims, rows[0].carve, latency)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "system\trate limit\tall carved\tall ready\tready p50\tready p95\tIPAM req/cluster\tmean batch\tall released\treq/release\tcarved to NetBox's floor\t")
	for _, r := range rows {
		ratio := "-"
		if !r.simulated && floor != nil && floor.records == r.claims {
			ratio = fmt.Sprintf("%.2f", r.carved.Seconds()/floor.create.Seconds())
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%.2f\t%.1f\t%s\t%.2f\t%s\t\n", r.title, settingsLabel(&result{config: r.config}), round(r.carved), round(r.ready),
			round(r.readyP50), round(r.readyP95), r.perCluster, r.carveBatch, round(r.released), r.perRelease, ratio)
	}
	_ = tw.Flush()
	for _, r := range rows {
		fmt.Fprintf(w, "%s (%s), the roll-out's IPAM requests per cluster by kind:", r.title, settingsLabel(&result{config: r.config}))
		type kind struct {
			name string
			n    int
		}
		var kinds []kind
		for k, n := range r.kinds {
			kinds = append(kinds, kind{k, n})
		}
		slices.SortFunc(kinds, func(a, b kind) int { return b.n - a.n })
		for _, k := range kinds[:min(len(kinds), 8)] {
			fmt.Fprintf(w, " %s %.2f;", k.name, float64(k.n)/float64(r.claims))
		}
		fmt.Fprintln(w)
	}
}
