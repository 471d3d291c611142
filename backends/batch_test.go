package backends_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
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

// A claim that calls twice in one batch is fresh only if both calls say
// so: the one that does not may know of a reservation.
func TestDeduplicatedClaimIsFreshOnlyIfEveryCallIs(t *testing.T) {
	for _, tt := range []struct {
		name  string
		fresh []bool
		want  bool
	}{
		{name: "alone, fresh", fresh: []bool{true}, want: true},
		{name: "both fresh", fresh: []bool{true, true}, want: true},
		{name: "the second not", fresh: []bool{true, false}, want: false},
		{name: "the first not", fresh: []bool{false, true}, want: false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var claims []backends.Claim
			for _, f := range tt.fresh {
				claims = append(claims, backends.Claim{Marker: "a", Fresh: f})
			}
			backends.Deduplicated(claims, func(unique []backends.Claim) []backends.Result[string] {
				require.Len(t, unique, 1)
				assert.Equal(t, tt.want, unique[0].Fresh)
				return make([]backends.Result[string], len(unique))
			})
		})
	}
}

// stagedBatcher answers batches of two calls in two stages (Batcher.Look)
// and records what happens: "look a b" when a batch looks, "rest a b" when
// its second stage starts. A second stage waits until the test opens it.
type stagedBatcher struct {
	*backends.Batcher[string, string]
	mu     sync.Mutex
	events []string
	gates  map[string]chan struct{}
}

func newStagedBatcher() *stagedBatcher {
	s := &stagedBatcher{gates: map[string]chan struct{}{}}
	look := func(_ context.Context, ins []string) func() []backends.Result[string] {
		batch := strings.Join(sortedBatches([][]string{slices.Clone(ins)})[0], " ")
		s.record("look " + batch)
		gate := s.gate(batch)
		return func() []backends.Result[string] {
			s.record("rest " + batch)
			<-gate
			out := make([]backends.Result[string], len(ins))
			for i, in := range ins {
				out[i].Value = in + "!"
			}
			return out
		}
	}
	s.Batcher = backends.NewStagedBatcher(backends.BatchOptions{MaxSize: 2, Window: time.Hour}, "allocate", look,
		func(in string) string { return strings.TrimSuffix(in, "'") })
	return s
}

func (s *stagedBatcher) record(event string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.events = append(s.events, event)
}

func (s *stagedBatcher) seen(event string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Contains(s.events, event)
}

// gate is the gate of a batch's second stage.
func (s *stagedBatcher) gate(batch string) chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gates[batch] == nil {
		s.gates[batch] = make(chan struct{})
	}
	return s.gates[batch]
}

// call makes the calls of one batch, each answered in the background.
func (s *stagedBatcher) call(t *testing.T, wg *sync.WaitGroup, ins ...string) {
	for _, in := range ins {
		wg.Go(func() {
			got, err := s.Do(context.Background(), in)
			assert.NoError(t, err)
			assert.Equal(t, in+"!", got)
		})
	}
}

func (s *stagedBatcher) eventually(t *testing.T, event string) {
	t.Helper()
	require.Eventually(t, func() bool { return s.seen(event) }, 10*time.Second, time.Millisecond, "waiting for %q; seen %q", event, s.events)
}

// While one batch is in its second stage (a backend's creates), the next
// one looks (its marker search): the IPAM system does not wait for a search
// between two batches' creates. The second stages still run one at a time,
// in order, and no third batch looks before the second's turn.
func TestStagedBatcherLooksWhileTheBatchBeforeCreates(t *testing.T) {
	s := newStagedBatcher()
	var wg sync.WaitGroup
	s.call(t, &wg, "a", "b")
	s.eventually(t, "rest a b")
	s.call(t, &wg, "c", "d")
	s.eventually(t, "look c d")

	s.call(t, &wg, "e", "f")
	time.Sleep(100 * time.Millisecond)
	assert.False(t, s.seen("rest c d"), "the second batch's creates wait for the first's")
	assert.False(t, s.seen("look e f"), "two batches under way at most")

	close(s.gate("a b"))
	s.eventually(t, "rest c d")
	s.eventually(t, "look e f")
	close(s.gate("c d"))
	s.eventually(t, "rest e f")
	close(s.gate("e f"))
	wg.Wait()
	assert.Equal(t, []string{"look a b", "rest a b", "look c d", "rest c d", "look e f", "rest e f"}, s.events)
}

// A call that names what the batch before it still works on (a claim
// asking again after its caller gave up) looks only once that batch is
// done: its search must see the record that batch makes for it.
func TestStagedBatcherLooksAfterABatchOfTheSameKey(t *testing.T) {
	s := newStagedBatcher()
	var wg sync.WaitGroup
	s.call(t, &wg, "a", "b")
	s.eventually(t, "rest a b")
	s.call(t, &wg, "a'", "c")
	time.Sleep(100 * time.Millisecond)
	assert.False(t, s.seen("look a' c"), "the batch of a's second call looks after a's first batch is done")

	close(s.gate("a b"))
	s.eventually(t, "look a' c")
	close(s.gate("a' c"))
	wg.Wait()
	assert.Equal(t, []string{"look a b", "rest a b", "look a' c", "rest a' c"}, s.events)
}

// Calls that arrive while the last batch is in its second stage, with no
// batch waiting, still look at once.
func TestStagedBatcherLooksForCallsArrivingDuringTheLastBatch(t *testing.T) {
	s := newStagedBatcher()
	var wg sync.WaitGroup
	s.call(t, &wg, "a", "b")
	s.eventually(t, "rest a b")
	time.Sleep(50 * time.Millisecond) // the queue is empty: the batcher waits
	s.call(t, &wg, "c", "d")
	s.eventually(t, "look c d")
	close(s.gate("a b"))
	close(s.gate("c d"))
	wg.Wait()
	// And once all is done, a new call starts the batcher again.
	s.call(t, &wg, "e", "f")
	close(s.gate("e f"))
	wg.Wait()
	assert.Equal(t, []string{"look a b", "rest a b", "look c d", "rest c d", "look e f", "rest e f"}, s.events)
}
