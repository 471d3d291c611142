package integration

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/api/v1alpha1"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/controllers/reservation"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/pkg/poolkind"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/netboxsim"
)

func TestHundredClaimsAtOnceGetDistinctAddresses(t *testing.T) {
	forEachSystem(t, func(t *testing.T, f *fixture) {
		f.seedNetwork("10.30.0.0/24")
		pool := f.createPool("pool", "10.30.0.0/24")
		f.waitPoolReady(pool)

		const n = 100
		claims := f.createClaimsAtOnce(n, "pool")

		seen := map[string]string{}
		for _, claim := range claims {
			address := f.waitBound(claim)
			if other, dup := seen[address.Spec.Address]; dup {
				t.Errorf("%s and %s share %s", other, claim.Name, address.Spec.Address)
			}
			seen[address.Spec.Address] = claim.Name
		}
		assert.Len(t, seen, n)
		assert.Len(t, f.markedRecords(), n, "one reservation per claim in NetBox")
		// NetBox shares one request among the claims that arrive together
		// (--max-batch-size); Infoblox sends one per claim. A resent or
		// duplicated reservation would show as more.
		assert.LessOrEqual(t, f.sys.allocationRequests(), n, "at most one reservation request per claim")
	})
}

func TestExhaustedPoolReportsPoolExhaustedAndBindsWhenSpaceFrees(t *testing.T) {
	forEachSystem(t, func(t *testing.T, f *fixture) {
		// A /29 has six usable addresses; the gateway holds one.
		f.seedNetwork("10.31.0.0/29")
		pool := f.createPool("pool", "10.31.0.0/29")
		f.waitPoolReady(pool)

		var bound []*ipamv1.IPAddressClaim
		for i := range 5 {
			claim := f.createClaim(fmt.Sprintf("machine-%d", i), "pool")
			f.waitBound(claim)
			bound = append(bound, claim)
		}
		waiting := f.createClaim("machine-5", "pool")
		cond := f.waitClaimReason(waiting, ipamv1.IPAddressClaimReadyPoolExhaustedReason)
		assert.Contains(t, cond.Message, "10.31.0.0/29")
		assert.Contains(t, cond.Message, f.sys.exhaustedText(), "the IPAM system's own words")
		f.waitEvent(f.ns, waiting.Name, ipamv1.IPAddressClaimReadyPoolExhaustedReason)

		// Releasing one address wakes the waiting claim (its own retry is ten
		// minutes away in this suite).
		f.deleteClaim(bound[0])
		address := f.waitBound(waiting)
		assert.Equal(t, "10.31.0.2", address.Spec.Address, "the freed address")
	})
}

func TestSourcesAreTriedInOrder(t *testing.T) {
	f := newFixture(t)
	f.seedNetwork("10.32.0.0/30")
	f.sim.AddIPAddress("10.32.0.2/30", netboxsim.IPOptions{}) // the /30 is full
	f.seedNetwork("10.32.1.0/24")
	f.createNetboxPool("pool", "", withSources(prefixSource("10.32.0.0/30"), prefixSource("10.32.1.0/24")))

	address := f.waitBound(f.createClaim("machine", "pool"))
	assert.Equal(t, "10.32.1.2", address.Spec.Address)
	assert.Equal(t, "10.32.1.1", address.Spec.Gateway, "the gateway of the source the address came from")
}

func TestBoundClaimResyncMakesNoBackendCall(t *testing.T) {
	forEachSystem(t, func(t *testing.T, f *fixture) {
		f.seedNetwork("10.33.0.0/24")
		pool := f.createPool("pool", "10.33.0.0/24")
		cluster := f.createCluster("workload")
		claim := f.createClaim("machine", "pool", inCluster(cluster.Name))
		f.waitBound(claim)
		// The pool refreshes its counts after the IPAddress appears; that is
		// the pool's cost, so let it finish first.
		f.waitCounts(pool, v1alpha1.AddressCounts{Total: 254, Used: 2, Free: 252})
		f.sys.resetCalls()

		// Pausing and unpausing the Cluster makes the claim reconcile twice,
		// visibly (its Paused condition flips), without touching the pool.
		require.NoError(t, k8s.Get(f.ctx, client.ObjectKeyFromObject(cluster), cluster))
		cluster.Spec.Paused = ptr.To(true)
		require.NoError(t, k8s.Update(f.ctx, cluster))
		f.waitPaused(claim)
		unpause(t, f, cluster.Name)
		f.waitNotPaused(claim)

		assert.Zero(t, f.sys.callCount(), "a bound claim costs the IPAM system nothing")
	})
}

// A burst of claims costs a number of count refreshes that depends on how
// long it lasts, not on how many claims it holds: one per refresh interval
// (2s in this suite), and one after the burst settles.
func TestBurstOfClaimsCostsFewCountRefreshes(t *testing.T) {
	forEachSystem(t, func(t *testing.T, f *fixture) {
		f.seedNetwork("10.38.0.0/24")
		pool := f.createPool("pool", "10.38.0.0/24")
		f.waitPoolReady(pool)
		before := f.sys.countRequests()

		const n = 60
		start := time.Now()
		claims := f.createClaimsAtOnce(n, "pool")
		for _, claim := range claims {
			f.waitBound(claim)
		}
		burst := time.Since(start)
		refreshes := f.sys.countRequests() - before
		// The last change of the burst is counted too: the counts end equal
		// to what the IPAM system holds (the claims' records and the
		// gateway). A real NetBox under the burst can be slow enough for a
		// request the client gave up on to land later, as a second record
		// of its claim that no IPAddress announces (the audit of issue 13
		// is for those): the next sync, a minute in this suite, counts it.
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			got := pool.DeepCopyObject().(poolkind.Pool)
			require.NoError(c, k8s.Get(f.ctx, client.ObjectKeyFromObject(pool), got))
			require.NotNil(c, got.GetPoolStatus().Addresses)
			held := int64(len(f.markedRecords()) + 1)
			assert.Equal(c, v1alpha1.AddressCounts{Total: 254, Used: held, Free: 254 - held}, *got.GetPoolStatus().Addresses)
		}, 2*time.Minute, pollInterval)
		if records := len(f.markedRecords()); records != n {
			t.Logf("%d records for %d claims: late duplicates", records, n)
		}

		t.Logf("%d claims bound in %s with %d count refreshes", n, burst.Round(time.Millisecond), refreshes)
		// Generous for a slow machine, and still far below one per claim.
		assert.LessOrEqual(t, refreshes, 3+int(burst/(2*time.Second))*2, "count refreshes grow with the burst's length only")
	})
}

// A new claim costs the API server three writes from the manager, besides
// the allocation's event: its finalizer (with the Machine's name, in one
// write) before anything is reserved, so that nothing is reserved for a
// claim that could go without a release; its IPAddress; and one status
// write, conditions included. Reconciles that read the claim from a cache
// that has not caught up write nothing. Events go through the event
// recorder and are not counted here.
func TestNewClaimsWriteTheirFinalizerThenTheirIPAddressAndOneStatus(t *testing.T) {
	f := newFixture(t)
	f.filter = "writes-" + f.ns
	var mu sync.Mutex
	var statusBeforeAllocation []string
	statusWrites := map[string]int{}
	creates := map[string]int{}
	var firstMetadata []*ipamv1.IPAddressClaim
	metadataSeen := map[string]bool{}
	_, err := startManager(f.ctx, f.filter, "", func(c client.WithWatch) client.Client {
		return interceptor.NewClient(c, interceptor.Funcs{
			Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
				err := c.Create(ctx, obj, opts...)
				if _, ok := obj.(*ipamv1.IPAddress); ok && obj.GetNamespace() == f.ns && err == nil {
					mu.Lock()
					creates[obj.GetName()]++
					mu.Unlock()
				}
				return err
			},
			Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
				if claim, ok := obj.(*ipamv1.IPAddressClaim); ok && claim.Namespace == f.ns {
					mu.Lock()
					if !metadataSeen[claim.Name] {
						metadataSeen[claim.Name] = true
						firstMetadata = append(firstMetadata, claim.DeepCopy())
					}
					mu.Unlock()
				}
				return c.Patch(ctx, obj, patch, opts...)
			},
			SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
				claim, ok := obj.(*ipamv1.IPAddressClaim)
				if !ok || claim.Namespace != f.ns {
					return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
				}
				// A status write of a claim that has neither an address nor
				// a Ready condition says nothing a consumer waits for.
				empty := claim.Status.AddressRef.Name == "" && conditions.Get(claim, ipamv1.IPAddressClaimReadyCondition) == nil
				name := claim.Name
				err := c.SubResource(sub).Patch(ctx, obj, patch, opts...)
				mu.Lock()
				defer mu.Unlock()
				if empty {
					statusBeforeAllocation = append(statusBeforeAllocation, name)
				}
				if err == nil {
					statusWrites[name]++
				}
				return err
			},
		})
	})
	require.NoError(t, err)
	f.seedNetwork("10.140.0.0/24")
	pool := f.createPool("pool", "10.140.0.0/24")
	f.waitPoolReady(pool)

	const n = 10
	claims := f.createClaimsAtOnce(n, "pool")
	for _, claim := range claims {
		f.waitBound(claim)
	}
	// Late reconciles of the burst would write now, if they wrote at all.
	time.Sleep(2 * time.Second)
	mu.Lock()
	defer mu.Unlock()
	assert.Empty(t, statusBeforeAllocation, "status written before anything was allocated")
	for _, claim := range claims {
		assert.Equal(t, 1, creates[claim.Name], "one IPAddress for %s", claim.Name)
		assert.Equal(t, 1, statusWrites[claim.Name], "one status write for %s", claim.Name)
	}
	require.Len(t, firstMetadata, n)
	for _, claim := range firstMetadata {
		assert.Contains(t, claim.Finalizers, reservation.ClaimFinalizer, "%s: the first write is the finalizer", claim.Name)
		assert.NotEmpty(t, claim.Annotations[v1alpha1.MachineNameAnnotation], "%s: with the Machine's name", claim.Name)
		assert.Nil(t, conditions.Get(claim, ipamv1.IPAddressClaimReadyCondition), "%s: and nothing of an allocation", claim.Name)
	}
}
