package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/api/v1alpha1"
)

// metrics is one scrape of the manager's metrics endpoint: what the bench
// reads of it.
type metrics struct {
	// apiRequests counts the manager's requests to the API server by HTTP
	// verb (controller-runtime's rest_client_requests_total).
	apiRequests map[string]float64
	// claimReconciles counts the claim controller's reconciles.
	claimReconciles float64
	// batches sums the manager's batches to the IPAM system by operation
	// (capi_ipam_bridge_backend_batch_size).
	batches map[string]batchSizes
}

// batchSizes is a batch-size histogram's count and sum.
type batchSizes struct{ count, claims float64 }

// meanBatch is the mean size of the batches of op between two scrapes; 0
// when none ran.
func meanBatch(m0, m1 metrics, op string) float64 {
	n := m1.batches[op].count - m0.batches[op].count
	if n <= 0 {
		return 0
	}
	return (m1.batches[op].claims - m0.batches[op].claims) / n
}

var (
	metricLine  = regexp.MustCompile(`^([a-z_]+)\{([^}]*)\} ([0-9.e+-]+)$`)
	methodLabel = regexp.MustCompile(`method="([A-Z]+)"`)
	opLabel     = regexp.MustCompile(`operation="([a-z]+)"`)
)

func scrape(ctx context.Context, addr string) (metrics, error) {
	m := metrics{apiRequests: map[string]float64{}, batches: map[string]batchSizes{}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return m, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return m, fmt.Errorf("scraping the manager's metrics: %w", err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		f := metricLine.FindStringSubmatch(sc.Text())
		if f == nil {
			continue
		}
		v, err := strconv.ParseFloat(f[3], 64)
		if err != nil {
			continue
		}
		switch f[1] {
		case "rest_client_requests_total":
			if verb := methodLabel.FindStringSubmatch(f[2]); verb != nil {
				m.apiRequests[verb[1]] += v
			}
		case "capi_ipam_bridge_backend_batch_size_count", "capi_ipam_bridge_backend_batch_size_sum":
			if op := opLabel.FindStringSubmatch(f[2]); op != nil {
				b := m.batches[op[1]]
				if strings.HasSuffix(f[1], "_count") {
					b.count += v
				} else {
					b.claims += v
				}
				m.batches[op[1]] = b
			}
		case "controller_runtime_reconcile_total":
			if strings.Contains(f[2], `controller="ipaddressclaim"`) {
				m.claimReconciles += v
			}
		}
	}
	return m, sc.Err()
}

// waitForMetrics scrapes a manager's metrics until it answers: until it is up.
func waitForMetrics(ctx context.Context, addr string) (metrics, error) {
	var m metrics
	err := poll(ctx, 100*time.Millisecond, func() (bool, error) {
		var err error
		m, err = scrape(ctx, addr)
		return err == nil, nil
	})
	return m, err
}

// quietFor is how long a manager must make no API-server request for the
// work of a phase to count as done.
const quietFor = 2 * time.Second

// waitForQuiet scrapes a manager's metrics until its API-server requests
// stop for quietFor, so that a phase's count includes the requests that
// trail it (a pool's status, for example), and returns the last scrape.
func waitForQuiet(ctx context.Context, addr string) (metrics, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	last, err := scrape(ctx, addr)
	if err != nil {
		return last, err
	}
	since := time.Now()
	err = poll(ctx, quietFor/4, func() (bool, error) {
		m, err := scrape(ctx, addr)
		if err != nil {
			return false, err
		}
		if requests(m.apiRequests) != requests(last.apiRequests) {
			last, since = m, time.Now()
		}
		return time.Since(since) >= quietFor, nil
	})
	if err != nil {
		return last, fmt.Errorf("waiting for the manager's API-server requests to stop: %w", err)
	}
	return last, nil
}

// perClaim is the API-server requests by verb between two scrapes, per claim.
func perClaim(before, after metrics, claims int) map[string]float64 {
	out := map[string]float64{}
	for verb, n := range after.apiRequests {
		if d := n - before.apiRequests[verb]; d > 0 {
			out[verb] = d / float64(claims)
		}
	}
	return out
}

// writes sums the verbs that write.
func writes(byVerb map[string]float64) float64 {
	return byVerb["POST"] + byVerb["PUT"] + byVerb["PATCH"] + byVerb["DELETE"]
}

func formatVerbs(byVerb map[string]float64) string {
	var verbs []string
	for v := range byVerb {
		verbs = append(verbs, v)
	}
	sort.Strings(verbs)
	var parts []string
	for _, v := range verbs {
		parts = append(parts, fmt.Sprintf("%s %.2f", v, byVerb[v]))
	}
	return strings.Join(parts, ", ")
}

// peakRSS reads a process's peak resident memory (VmHWM) in bytes.
func peakRSS(pid int) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	data, err := io.ReadAll(f)
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no VmHWM in /proc/%d/status", pid)
}

// writeCost measures the API server's cost of one write at a given number
// of concurrent writers: each of n claims is created, then patched, by
// writers goroutines, and the wall time is divided by the 2n writes. The
// claims carry no watch-filter label, so no manager reconciles them.
func writeCost(ctx context.Context, c client.Client, namespace string, writers, n int) (time.Duration, error) {
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}); err != nil {
		return 0, err
	}
	start := time.Now()
	err := parallel(n, writers, func(i int) error {
		claim := &ipamv1.IPAddressClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: fmt.Sprintf("w-%05d", i)},
			Spec:       ipamv1.IPAddressClaimSpec{PoolRef: ipamv1.IPPoolReference{APIGroup: v1alpha1.GroupVersion.Group, Kind: "NetboxIPPool", Name: "none"}},
		}
		if err := c.Create(ctx, claim); err != nil {
			return err
		}
		return c.Patch(ctx, claim, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"bench/write":"1"}}}`)))
	})
	if err != nil {
		return 0, fmt.Errorf("measuring the API server's write cost: %w", err)
	}
	return time.Since(start) / time.Duration(2*n), nil
}

// parallel runs do(0…n-1) on workers goroutines and returns the first error.
func parallel(n, workers int, do func(i int) error) error {
	var (
		wg    sync.WaitGroup
		once  sync.Once
		first error
		next  = make(chan int)
	)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := do(i); err != nil {
					once.Do(func() { first = err })
				}
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	return first
}

func percentile(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, len(sorted)*p/100)]
}
