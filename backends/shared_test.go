package backends

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A listing serves the callers of its key that accept its age, and no
// other: a caller that asks for a fresh one, another key, a listing older
// than it accepts, or one that failed lists itself.
func TestSharedListingServesOnlyWhoAcceptsIt(t *testing.T) {
	key := uniqueKey(t)
	var calls atomic.Int32
	list := func(answer string) func(context.Context) ([]string, error) {
		return func(context.Context) ([]string, error) {
			calls.Add(1)
			return []string{answer}, nil
		}
	}
	ctx := context.Background()

	got, err := SharedListing(ctx, key, time.Minute, list("first"))
	require.NoError(t, err)
	assert.Equal(t, []string{"first"}, got)

	got, err = SharedListing(ctx, key, time.Minute, list("second"))
	require.NoError(t, err)
	assert.Equal(t, []string{"first"}, got, "a listing within the age accepted serves again")
	assert.EqualValues(t, 1, calls.Load())

	got, err = SharedListing(ctx, key+"/other", time.Minute, list("other"))
	require.NoError(t, err)
	assert.Equal(t, []string{"other"}, got, "another key lists")

	got, err = SharedListing(ctx, key, 0, list("fresh"))
	require.NoError(t, err)
	assert.Equal(t, []string{"fresh"}, got, "maxAge 0 lists")
	got, err = SharedListing(ctx, key, time.Minute, list("after"))
	require.NoError(t, err)
	assert.Equal(t, []string{"fresh"}, got, "and the fresh listing serves those after it")

	time.Sleep(20 * time.Millisecond)
	got, err = SharedListing(ctx, key, 10*time.Millisecond, list("aged"))
	require.NoError(t, err)
	assert.Equal(t, []string{"aged"}, got, "a listing older than accepted does not serve")

	failing := key + "/failing"
	_, err = SharedListing(ctx, failing, time.Minute, func(context.Context) ([]string, error) { return nil, errors.New("refused") })
	require.Error(t, err)
	got, err = SharedListing(ctx, failing, time.Minute, list("retried"))
	require.NoError(t, err)
	assert.Equal(t, []string{"retried"}, got, "a failed listing is not kept")
}

// Callers that arrive while a listing is under way wait for it instead of
// listing too; when it fails, each lists itself.
func TestSharedListingJoinsAListingUnderWay(t *testing.T) {
	for _, tc := range []struct {
		name      string
		fail      bool
		wantCalls int32
	}{
		{name: "answered", wantCalls: 1},
		{name: "failed", fail: true, wantCalls: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := uniqueKey(t)
			release := make(chan struct{})
			var calls atomic.Int32
			leader := func(context.Context) ([]int, error) {
				calls.Add(1)
				<-release
				if tc.fail {
					return nil, errors.New("refused")
				}
				return []int{1}, nil
			}
			follower := func(context.Context) ([]int, error) {
				calls.Add(1)
				return []int{2}, nil
			}
			var wg sync.WaitGroup
			var leaderErr error
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, leaderErr = SharedListing(context.Background(), key, time.Minute, leader)
			}()
			require.Eventually(t, func() bool { return calls.Load() == 1 }, 5*time.Second, time.Millisecond)
			done := make(chan []int)
			go func() {
				got, err := SharedListing(context.Background(), key, time.Minute, follower)
				assert.NoError(t, err)
				done <- got
			}()
			select {
			case <-done:
				t.Fatal("the follower did not wait for the listing under way")
			case <-time.After(50 * time.Millisecond):
			}
			close(release)
			got := <-done
			wg.Wait()
			assert.Equal(t, tc.wantCalls, calls.Load())
			if tc.fail {
				assert.Error(t, leaderErr)
				assert.Equal(t, []int{2}, got, "the follower listed itself")
			} else {
				assert.Equal(t, []int{1}, got)
			}
		})
	}
}

// A caller that gives up while it waits returns its context's error; the
// listing goes on for the others.
func TestSharedListingWaiterGivesUp(t *testing.T) {
	key := uniqueKey(t)
	release := make(chan struct{})
	started := make(chan struct{})
	go func() {
		_, _ = SharedListing(context.Background(), key, time.Minute, func(context.Context) ([]int, error) {
			close(started)
			<-release
			return []int{1}, nil
		})
	}()
	<-started
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := SharedListing(ctx, key, time.Minute, func(context.Context) ([]int, error) { return []int{2}, nil })
	assert.ErrorIs(t, err, context.Canceled)
	close(release)
	got, err := SharedListing(context.Background(), key, time.Minute, func(context.Context) ([]int, error) { return []int{3}, nil })
	require.NoError(t, err)
	assert.Equal(t, []int{1}, got)
}

// uniqueKey is a key no other test, or other run of this one, uses: the
// listings are the process's.
func uniqueKey(t *testing.T) string {
	return fmt.Sprintf("%s/%d", t.Name(), time.Now().UnixNano())
}
