package httpfault_test

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/test/httpfault"
)

// A gathering is complete only when every request arrived before any
// stopped waiting: requests that take turns, the later arriving after the
// earlier gave up, were not gathered, though all of them arrived.
func TestGatheringIsCompleteOnlyWhenTheRequestsMet(t *testing.T) {
	for _, tc := range []struct {
		name string
		// inTurns: the second request arrives after the first stopped
		// waiting.
		inTurns bool
		want    bool
	}{
		{name: "together", want: true},
		{name: "in turns", inTurns: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wait := 10 * time.Second
			if tc.inTurns {
				wait = 10 * time.Millisecond
			}
			g := httpfault.NewGathering(2, wait)
			var wg sync.WaitGroup
			for range 2 {
				if tc.inTurns {
					g.Arrive()
					continue
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					g.Arrive()
				}()
			}
			wg.Wait()
			assert.Equal(t, 2, g.Arrived())
			assert.Equal(t, tc.want, g.Complete())
		})
	}
}
