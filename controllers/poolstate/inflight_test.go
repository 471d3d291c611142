package poolstate

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/types"
)

func TestInFlightClosesAPoolToNewAllocationsAndCountsTheRest(t *testing.T) {
	var f InFlight
	pool, other := types.UID("pool"), types.UID("other")

	first, ok := f.Start(pool)
	assert.True(t, ok)
	second, ok := f.Start(pool)
	assert.True(t, ok)
	_, ok = f.Start(other)
	assert.True(t, ok)

	assert.Equal(t, 2, f.Close(pool), "two allocations from the pool are under way")
	late, ok := f.Start(pool)
	assert.False(t, ok, "a closed pool refuses new allocations")
	late() // a no-op, and safe to call

	first()
	assert.Equal(t, 1, f.Close(pool))
	second()
	assert.Equal(t, 0, f.Close(pool), "the deleted pool may go")
	_, ok = f.Start(pool)
	assert.False(t, ok, "a pool stays closed")
	_, ok = f.Start(other)
	assert.True(t, ok, "other pools are not affected")
}
