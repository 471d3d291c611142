package backends

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestTurns: claims requesting one address take turns; other addresses do
// not wait for them, and nothing is kept once every turn is over.
func TestTurns(t *testing.T) {
	tt := &turns{held: map[string]*turn{}}
	var inside, most atomic.Int32
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			unlock := tt.lock("nb|10.0.0.5")
			defer unlock()
			n := inside.Add(1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			time.Sleep(time.Millisecond)
			inside.Add(-1)
		})
	}
	unlockA := tt.lock("nb|10.0.0.5")
	done := make(chan struct{})
	go func() {
		unlock := tt.lock("nb|10.0.0.6")
		unlock()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("another address waited for 10.0.0.5's turn")
	}
	unlockA()
	wg.Wait()
	assert.Equal(t, int32(1), most.Load(), "one claim at a time")
	assert.Empty(t, tt.held)
}
