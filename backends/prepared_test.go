package backends_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/backends"
)

func TestPreparedValidatesOnceForConcurrentFirstUses(t *testing.T) {
	var p backends.Prepared[string]
	var runs atomic.Int32
	validate := func(context.Context) error {
		runs.Add(1)
		p.Set("ready")
		return nil
	}
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			v, err := p.Get(context.Background(), validate)
			assert.NoError(t, err)
			assert.Equal(t, "ready", v)
		})
	}
	wg.Wait()
	assert.Equal(t, int32(1), runs.Load())
}

func TestPreparedRetriesAfterAFailedValidation(t *testing.T) {
	var p backends.Prepared[int]
	_, err := p.Get(context.Background(), func(context.Context) error { return errors.New("grid down") })
	require.Error(t, err)
	v, err := p.Get(context.Background(), func(context.Context) error { p.Set(7); return nil })
	require.NoError(t, err)
	assert.Equal(t, 7, v)
}
