package claim

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/event"

	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
)

func testClaim(name string, uid types.UID) *ipamv1.IPAddressClaim {
	c := &ipamv1.IPAddressClaim{}
	c.Namespace, c.Name, c.UID = "ns", name, uid
	return c
}

// awaitWake returns the claim an answer woke, or fails.
func awaitWake(t *testing.T, wake <-chan event.GenericEvent) types.NamespacedName {
	t.Helper()
	select {
	case e := <-wake:
		return types.NamespacedName{Namespace: e.Object.GetNamespace(), Name: e.Object.GetName()}
	case <-time.After(10 * time.Second):
		t.Fatal("no answer woke the claim")
		return types.NamespacedName{}
	}
}

func TestBackgroundCallAnswerWakesTheClaimAndIsTakenOnce(t *testing.T) {
	wake := make(chan event.GenericEvent, 1)
	calls := newBackgroundCalls[int](context.Background(), wake)
	claim := testClaim("a", "uid-a")
	var released atomic.Int32
	proceed := make(chan struct{})

	_, state := calls.take(claim)
	require.Equal(t, noCall, state)
	calls.start(context.Background(), claim, func() { released.Add(1) }, func(context.Context) (int, error) {
		<-proceed
		return 42, errors.New("answer")
	})
	_, state = calls.take(claim)
	assert.Equal(t, callRunning, state, "a running call is reported, not started again")

	close(proceed)
	assert.Equal(t, types.NamespacedName{Namespace: "ns", Name: "a"}, awaitWake(t, wake))
	call, state := calls.take(claim)
	require.Equal(t, callDone, state)
	assert.Equal(t, 42, call.value)
	assert.EqualError(t, call.err, "answer")
	assert.Zero(t, released.Load(), "what the call holds is the taker's until it finishes")
	call.Finish()
	call.Finish()
	assert.EqualValues(t, 1, released.Load(), "released once")

	_, state = calls.take(claim)
	assert.Equal(t, noCall, state, "an answer is taken once")
}

func TestBackgroundCallForgottenOrNotTaken(t *testing.T) {
	tests := []struct {
		name string
		// act runs once the call has started, and returns when the
		// release is expected to have happened.
		act func(t *testing.T, calls *backgroundCalls[int], proceed chan struct{}, wake chan event.GenericEvent)
		// after is the state a take of a claim of the same name and UID
		// then sees.
		after callState
	}{
		{
			name: "forgotten while it runs: released when it ends, and running until then",
			act: func(t *testing.T, calls *backgroundCalls[int], proceed chan struct{}, wake chan event.GenericEvent) {
				calls.forget(types.NamespacedName{Namespace: "ns", Name: "a"})
				_, state := calls.take(testClaim("a", "uid-a"))
				assert.Equal(t, callRunning, state, "no second call for the marker while the first runs")
				close(proceed)
				awaitWake(t, wake)
			},
			after: noCall,
		},
		{
			name: "forgotten once answered: released at once",
			act: func(t *testing.T, calls *backgroundCalls[int], proceed chan struct{}, wake chan event.GenericEvent) {
				close(proceed)
				awaitWake(t, wake)
				calls.forget(types.NamespacedName{Namespace: "ns", Name: "a"})
			},
			after: noCall,
		},
		{
			name: "a new claim of the same name: the predecessor's answer is let go",
			act: func(t *testing.T, calls *backgroundCalls[int], proceed chan struct{}, wake chan event.GenericEvent) {
				close(proceed)
				awaitWake(t, wake)
				_, state := calls.take(testClaim("a", "uid-successor"))
				assert.Equal(t, noCall, state)
			},
			after: noCall,
		},
		{
			name: "never taken: released after its memory",
			act: func(t *testing.T, calls *backgroundCalls[int], proceed chan struct{}, wake chan event.GenericEvent) {
				close(proceed)
				awaitWake(t, wake)
				time.Sleep(3 * calls.memory)
			},
			after: noCall,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wake := make(chan event.GenericEvent, 1)
			calls := newBackgroundCalls[int](context.Background(), wake)
			calls.memory = 50 * time.Millisecond
			released := make(chan struct{})
			proceed := make(chan struct{})
			calls.start(context.Background(), testClaim("a", "uid-a"), func() { close(released) }, func(context.Context) (int, error) {
				<-proceed
				return 1, nil
			})
			tt.act(t, calls, proceed, wake)
			select {
			case <-released:
			case <-time.After(10 * time.Second):
				t.Fatal("what the call held was never released")
			}
			_, state := calls.take(testClaim("a", "uid-a"))
			assert.Equal(t, tt.after, state)
		})
	}
}

func TestBackgroundCallEndsWhenTheManagerStops(t *testing.T) {
	lifetime, stop := context.WithCancel(context.Background())
	wake := make(chan event.GenericEvent) // nobody reads it
	calls := newBackgroundCalls[int](lifetime, wake)
	ended := make(chan struct{})
	calls.start(context.Background(), testClaim("a", "uid-a"), nil, func(ctx context.Context) (int, error) {
		<-ctx.Done()
		close(ended)
		return 0, ctx.Err()
	})
	stop()
	select {
	case <-ended:
	case <-time.After(10 * time.Second):
		t.Fatal("the call's context did not end with the manager's")
	}
}

func TestBackgroundCallsBeyondTheLimitWaitAndAreWokenInTurn(t *testing.T) {
	wake := make(chan event.GenericEvent, 10)
	calls := newBackgroundCalls[int](context.Background(), wake)
	calls.limit = 2
	proceed := make(chan struct{})
	run := func(context.Context) (int, error) { <-proceed; return 0, nil }

	require.True(t, calls.start(context.Background(), testClaim("a", "a"), nil, run))
	require.True(t, calls.start(context.Background(), testClaim("b", "b"), nil, run))
	assert.False(t, calls.start(context.Background(), testClaim("c", "c"), nil, run), "a third call waits for a free one")
	assert.False(t, calls.start(context.Background(), testClaim("c", "c"), nil, run), "refused again, it waits once")
	assert.False(t, calls.start(context.Background(), testClaim("d", "d"), nil, run))
	_, state := calls.take(testClaim("c", "c"))
	assert.Equal(t, noCall, state, "a refused call never ran")

	close(proceed)
	woken := map[string]int{}
	for range 4 {
		woken[awaitWake(t, wake).Name]++
	}
	assert.Equal(t, map[string]int{"a": 1, "b": 1, "c": 1, "d": 1}, woken,
		"each ended call wakes its own claim and one waiting claim, in turn")
	assert.True(t, calls.start(context.Background(), testClaim("c", "c"), nil, run), "a woken claim starts its call")
}

// A call that runs for slowAfter wakes its claim once, to say that it waits
// for the IPAM system, and reports itself slow; one answered sooner wakes
// it only with its answer.
func TestBackgroundCallWakesItsClaimOnceWhenSlow(t *testing.T) {
	for _, tc := range []struct {
		name      string
		slowAfter time.Duration
		wantSlow  bool
	}{
		{name: "slow", slowAfter: 50 * time.Millisecond, wantSlow: true},
		{name: "answered sooner", slowAfter: time.Hour, wantSlow: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wake := make(chan event.GenericEvent, 4)
			calls := newBackgroundCalls[int](context.Background(), wake)
			calls.slowAfter = tc.slowAfter
			claim := testClaim("a", "uid-a")
			proceed := make(chan struct{})
			require.True(t, calls.start(context.Background(), claim, nil, func(context.Context) (int, error) {
				<-proceed
				return 1, nil
			}))
			if tc.wantSlow {
				assert.Equal(t, types.NamespacedName{Namespace: "ns", Name: "a"}, awaitWake(t, wake), "woken while it runs")
			}
			call, state := calls.take(claim)
			require.Equal(t, callRunning, state)
			assert.Equal(t, tc.wantSlow, call.Slow())

			close(proceed)
			awaitWake(t, wake) // the answer
			call, state = calls.take(claim)
			require.Equal(t, callDone, state)
			call.Finish()
			select {
			case e := <-wake:
				t.Fatalf("woken again for %s", e.Object.GetName())
			case <-time.After(100 * time.Millisecond):
			}
		})
	}
}
