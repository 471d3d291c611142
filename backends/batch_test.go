package backends_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends"
)

// recordingBatcher answers "x" with "x!" and "bad" with an error, and
// records the batches it ran. Its window is long enough that only a full
// queue starts a batch, so the tests do not depend on timing.
func recordingBatcher(maxSize int) (*backends.Batcher[string, string], func() [][]string) {
	var mu sync.Mutex
	var batches [][]string
	b := &backends.Batcher[string, string]{
		Max:    maxSize,
		Window: time.Hour,
		Run: func(_ context.Context, ins []string) []backends.Result[string] {
			mu.Lock()
			batches = append(batches, append([]string(nil), ins...))
			mu.Unlock()
			out := make([]backends.Result[string], len(ins))
			for i, in := range ins {
				if in == "bad" {
					out[i].Err = errors.New("refused")
					continue
				}
				out[i].Value = in + "!"
			}
			return out
		},
	}
	return b, func() [][]string {
		mu.Lock()
		defer mu.Unlock()
		return batches
	}
}

func TestBatcherCoalescesConcurrentCalls(t *testing.T) {
	for _, tc := range []struct {
		name        string
		max         int
		calls       int
		wantBatches []int // sizes, in order
	}{
		{name: "off: every call alone", max: 1, calls: 4, wantBatches: []int{1, 1, 1, 1}},
		{name: "one full batch", max: 5, calls: 5, wantBatches: []int{5}},
		{name: "capped at max", max: 3, calls: 6, wantBatches: []int{3, 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, batches := recordingBatcher(tc.max)
			results := make([]string, tc.calls)
			errs := make([]error, tc.calls)
			var wg sync.WaitGroup
			for i := range tc.calls {
				wg.Go(func() { results[i], errs[i] = b.Do(context.Background(), fmt.Sprint(i)) })
			}
			wg.Wait()
			for i := range tc.calls {
				require.NoError(t, errs[i])
				assert.Equal(t, fmt.Sprintf("%d!", i), results[i], "each caller gets its own result")
			}
			var sizes []int
			for _, batch := range batches() {
				sizes = append(sizes, len(batch))
			}
			assert.Equal(t, tc.wantBatches, sizes)
		})
	}
}

func TestBatcherGivesEachCallerItsOwnError(t *testing.T) {
	b, _ := recordingBatcher(3)
	ins := []string{"a", "bad", "c"}
	results := make([]string, len(ins))
	errs := make([]error, len(ins))
	var wg sync.WaitGroup
	for i, in := range ins {
		wg.Go(func() { results[i], errs[i] = b.Do(context.Background(), in) })
	}
	wg.Wait()
	assert.Equal(t, []string{"a!", "", "c!"}, results)
	assert.NoError(t, errs[0])
	assert.EqualError(t, errs[1], "refused")
	assert.NoError(t, errs[2])
}

func TestBatcherLeavesOutCallersThatGaveUp(t *testing.T) {
	b, batches := recordingBatcher(3)
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := b.Do(gone, "gone")
	require.ErrorIs(t, err, context.Canceled)

	var wg sync.WaitGroup
	for _, in := range []string{"a", "b"} {
		wg.Go(func() {
			got, err := b.Do(context.Background(), in)
			assert.NoError(t, err)
			assert.Equal(t, in+"!", got)
		})
	}
	wg.Wait()
	assert.Equal(t, [][]string{{"a", "b"}}, sortedBatches(batches()), "the batch filled with the caller that gave up, which it then left out")
}

// sortedBatches sorts each batch: callers join in no set order.
func sortedBatches(batches [][]string) [][]string {
	for _, b := range batches {
		slices.Sort(b)
	}
	return batches
}

// A batch that has not filled starts once its calls stop coming, not at
// the end of its window: a stream of calls closer together than Quiet
// shares one batch, and the calls after a quiet gap make the next.
func TestBatcherStartsABatchOnceItsCallsStop(t *testing.T) {
	b, batches := recordingBatcher(100)
	b.Quiet = time.Second // Window is an hour: only the quiet rule starts these batches.
	var sizes []int
	b.Observe = func(size int) { sizes = append(sizes, size) } // one batch runs at a time
	stream := func(prefix string, n int) {
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				got, err := b.Do(context.Background(), fmt.Sprintf("%s%d", prefix, i))
				assert.NoError(t, err)
				assert.Equal(t, fmt.Sprintf("%s%d!", prefix, i), got)
			})
			time.Sleep(20 * time.Millisecond)
		}
		wg.Wait()
	}
	stream("a", 5)
	stream("b", 3)
	assert.Equal(t, [][]string{{"a0", "a1", "a2", "a3", "a4"}, {"b0", "b1", "b2"}}, sortedBatches(batches()))
	assert.Equal(t, []int{5, 3}, sizes, "every batch is observed with its size")
}

// The defaults: a window long enough for a burst to fill batches, and a
// quiet rule so that a lone call is not kept for the whole window.
func TestNewBatcherDefaults(t *testing.T) {
	run := func(context.Context, []string) []backends.Result[string] { return nil }
	for _, tc := range []struct {
		name       string
		opts       backends.BatchOptions
		wantMax    int
		wantWindow time.Duration
		wantQuiet  time.Duration
	}{
		{"defaults", backends.BatchOptions{}, backends.DefaultMaxBatchSize, backends.DefaultBatchWindow, backends.DefaultBatchQuiet},
		{"a window given waits for it whole", backends.BatchOptions{MaxSize: 3, Window: time.Hour}, 3, time.Hour, 0},
		{"both given", backends.BatchOptions{Window: time.Second, Quiet: time.Millisecond}, backends.DefaultMaxBatchSize, time.Second, time.Millisecond},
		{"a carving pool's", backends.CarvingBatch(backends.BatchOptions{MaxSize: 7}), 7, backends.DefaultCarveWindow, backends.DefaultCarveQuiet},
		{"a carving pool's, a window given", backends.CarvingBatch(backends.BatchOptions{Window: time.Hour}), backends.DefaultMaxBatchSize, time.Hour, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := backends.NewBatcher(tc.opts, "allocate", run)
			assert.Equal(t, tc.wantMax, b.Max)
			assert.Equal(t, tc.wantWindow, b.Window)
			assert.Equal(t, tc.wantQuiet, b.Quiet)
			assert.Less(t, backends.DefaultBatchQuiet, backends.DefaultBatchWindow)
			assert.Less(t, backends.DefaultCarveQuiet, backends.DefaultCarveWindow)
		})
	}
}

func TestDeduplicatedRunsEachMarkerOnce(t *testing.T) {
	tests := []struct {
		name    string
		markers []string
		runs    []string
	}{
		{name: "distinct", markers: []string{"a", "b"}, runs: []string{"a", "b"}},
		{name: "a retried claim beside the first", markers: []string{"a", "b", "a"}, runs: []string{"a", "b"}},
		{name: "one claim three times", markers: []string{"c", "c", "c"}, runs: []string{"c"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var claims []backends.Claim
			for _, m := range tt.markers {
				claims = append(claims, backends.Claim{Marker: m})
			}
			var ran []string
			results := backends.Deduplicated(claims, func(unique []backends.Claim) []backends.Result[string] {
				out := make([]backends.Result[string], len(unique))
				for i, c := range unique {
					ran = append(ran, c.Marker)
					out[i].Value = "record of " + c.Marker
				}
				return out
			})
			assert.Equal(t, tt.runs, ran)
			require.Len(t, results, len(claims))
			for i, m := range tt.markers {
				assert.Equal(t, "record of "+m, results[i].Value, "call %d gets its marker's result", i)
			}
		})
	}
}
