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

func TestSetupMemoryChecksOnceAndForgetsFailures(t *testing.T) {
	m := backends.NewSetupMemory[string]()
	ctx := context.Background()
	var checks atomic.Int32
	release := make(chan struct{})
	slowCheck := func(context.Context) (string, error) {
		checks.Add(1)
		<-release
		return "confirmed", nil
	}

	// Callers that ask at the same moment share one check.
	var wg sync.WaitGroup
	answers := make([]string, 5)
	for i := range answers {
		wg.Go(func() {
			v, err := m.Confirm(ctx, "a", slowCheck)
			assert.NoError(t, err)
			answers[i] = v
		})
	}
	// A caller that gives up fails alone, and the check goes on.
	gaveUp, cancel := context.WithCancel(ctx)
	cancel()
	_, err := m.Confirm(gaveUp, "a", slowCheck)
	require.ErrorIs(t, err, context.Canceled)
	close(release)
	wg.Wait()
	assert.Equal(t, []string{"confirmed", "confirmed", "confirmed", "confirmed", "confirmed"}, answers)
	assert.Equal(t, int32(1), checks.Load())

	// A confirmation is remembered; another key is checked.
	_, err = m.Confirm(ctx, "a", slowCheck)
	require.NoError(t, err)
	assert.Equal(t, int32(1), checks.Load())

	// A failure is not remembered.
	failures := 0
	failing := func(context.Context) (string, error) { failures++; return "", errors.New("no such field") }
	_, err = m.Confirm(ctx, "b", failing)
	require.Error(t, err)
	_, err = m.Confirm(ctx, "b", failing)
	require.Error(t, err)
	assert.Equal(t, 2, failures)

	backends.ForgetConfirmedSetups()
	_, err = m.Confirm(ctx, "a", func(context.Context) (string, error) { checks.Add(1); return "again", nil })
	require.NoError(t, err)
	assert.Equal(t, int32(2), checks.Load(), "forgotten, the setup is checked again")
}
