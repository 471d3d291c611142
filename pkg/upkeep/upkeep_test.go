package upkeep

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestUpkeepIsMarkedAndUnmarked(t *testing.T) {
	ctx := context.Background()
	assert.False(t, Is(ctx), "unmarked")
	assert.True(t, Is(With(ctx)))
	assert.False(t, Is(Without(With(ctx))), "a claim's wait inside upkeep")
	assert.True(t, Is(With(Without(With(ctx)))))
	assert.Equal(t, ctx, Without(ctx), "nothing to unmark")
}
