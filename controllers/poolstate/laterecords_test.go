package poolstate

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/api/v1alpha1"
	"github.com/ipam-bridge/cluster-api-ipam-provider-bridge/pkg/poolkind"
)

func TestLateRecordsSweepAPoolWhileCreatesMayLand(t *testing.T) {
	const window = 80 * time.Second
	kind := poolkind.Kind{Kind: "NetboxIPPool"}
	pool := &v1alpha1.NetboxIPPool{ObjectMeta: metav1.ObjectMeta{Name: "pool", UID: "pool"}}
	started := time.Now()
	l := NewLateRecords(window, started)

	// The creates of the process before this one.
	next, ok := l.Next(pool)
	assert.True(t, ok)
	assert.Equal(t, started.Add(window/4), next, "a quarter of the window after the start")
	assert.False(t, l.Sweeping(pool, started.Add(window/8)), "not yet due")
	l.Swept(pool, started.Add(window/8))
	assert.Equal(t, started.Add(window/4), must(l.Next(pool)), "an audit before the sweep is due changes nothing")

	for i, at := range []time.Duration{window / 4, window / 2, 3 * window / 4} {
		assert.True(t, l.Sweeping(pool, started.Add(at)), "sweep %d", i)
		l.Swept(pool, started.Add(at))
		assert.Equal(t, started.Add(at+window/4), must(l.Next(pool)), "every quarter of the window")
	}
	l.Swept(pool, started.Add(window))
	_, ok = l.Next(pool)
	assert.False(t, ok, "no create of the predecessor can land after the window")

	// A create of this process whose answer was lost.
	before := time.Now()
	l.Uncertain(kind, pool)
	next, ok = l.Next(pool)
	assert.True(t, ok)
	assert.WithinRange(t, next, before.Add(window/4), time.Now().Add(window/4))
	assert.Len(t, l.wake.channel(kind), 1, "the audit is woken")
	l.Uncertain(kind, pool)
	assert.Len(t, l.wake.channel(kind), 1, "a second create does not bring the sweep forward")
	l.Swept(pool, next)
	assert.Equal(t, next.Add(window/4), must(l.Next(pool)))

	// A pool first seen long after the start (a controller that looks at it
	// late) is swept once, at its first audit.
	late := NewLateRecords(window, started.Add(-time.Hour))
	assert.True(t, late.Sweeping(pool, time.Now()))
	late.Swept(pool, time.Now())
	_, ok = late.Next(pool)
	assert.False(t, ok)

	var none *LateRecords
	none.Uncertain(kind, pool)
	_, ok = none.Next(pool)
	assert.False(t, ok, "a nil LateRecords plans nothing")
}

// A pool the API server created after this process started to act was
// never served by the one before: it has no predecessor's creates to wait
// for. One created before, or within the clocks' skew of the start, does.
// A process given no start starts at its first look at a pool: it looks
// only once it leads.
func TestLateRecordsOfThePredecessorOnlyForPoolsItServed(t *testing.T) {
	const window = 80 * time.Second
	started := time.Now().Add(-time.Second)
	pool := func(uid string, created time.Time) *v1alpha1.NetboxIPPool {
		return &v1alpha1.NetboxIPPool{ObjectMeta: metav1.ObjectMeta{Name: uid, UID: types.UID(uid), CreationTimestamp: metav1.NewTime(created)}}
	}
	for _, tc := range []struct {
		name    string
		created time.Time
		swept   bool
	}{
		{name: "created long before", created: started.Add(-time.Hour), swept: true},
		{name: "created just before", created: started.Add(-time.Second), swept: true},
		{name: "created within the clocks' skew after", created: started.Add(clockSkew / 2), swept: true},
		{name: "created after", created: started.Add(2 * clockSkew)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := NewLateRecords(window, started)
			p := pool("p", tc.created)
			next, ok := l.Next(p)
			assert.Equal(t, tc.swept, ok)
			if tc.swept {
				assert.Equal(t, started.Add(window/4), next)
				return
			}
			// Its own creates still plan sweeps.
			l.Uncertain(poolkind.Kind{Kind: "NetboxIPPool"}, p)
			_, ok = l.Next(p)
			assert.True(t, ok, "a create of this process whose answer was lost")
		})
	}

	t.Run("started at the first look", func(t *testing.T) {
		l := NewLateRecords(window, time.Time{})
		before := time.Now()
		next, ok := l.Next(pool("old", before.Add(-time.Hour)))
		assert.True(t, ok)
		assert.WithinRange(t, next, before.Add(window/4), time.Now().Add(window/4), "a quarter of the window after the first look")
		_, ok = l.Next(pool("new", time.Now().Add(2*clockSkew)))
		assert.False(t, ok, "a pool created after the first look")
		time.Sleep(10 * time.Millisecond)
		later, ok := l.Next(pool("another old", before.Add(-time.Hour)))
		assert.True(t, ok)
		assert.Equal(t, next, later, "the start stays that of the first look")
	})
}

func must(t time.Time, ok bool) time.Time {
	if !ok {
		return time.Time{}
	}
	return t
}
