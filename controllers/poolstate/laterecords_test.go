package poolstate

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
	next, ok := l.Next(pool.UID)
	assert.True(t, ok)
	assert.Equal(t, started.Add(window/4), next, "a quarter of the window after the start")
	assert.False(t, l.Sweeping(pool.UID, started.Add(window/8)), "not yet due")
	l.Swept(pool.UID, started.Add(window/8))
	assert.Equal(t, started.Add(window/4), must(l.Next(pool.UID)), "an audit before the sweep is due changes nothing")

	for i, at := range []time.Duration{window / 4, window / 2, 3 * window / 4} {
		assert.True(t, l.Sweeping(pool.UID, started.Add(at)), "sweep %d", i)
		l.Swept(pool.UID, started.Add(at))
		assert.Equal(t, started.Add(at+window/4), must(l.Next(pool.UID)), "every quarter of the window")
	}
	l.Swept(pool.UID, started.Add(window))
	_, ok = l.Next(pool.UID)
	assert.False(t, ok, "no create of the predecessor can land after the window")

	// A create of this process whose answer was lost.
	before := time.Now()
	l.Uncertain(kind, pool)
	next, ok = l.Next(pool.UID)
	assert.True(t, ok)
	assert.WithinRange(t, next, before.Add(window/4), time.Now().Add(window/4))
	assert.Len(t, l.wake.channel(kind), 1, "the audit is woken")
	l.Uncertain(kind, pool)
	assert.Len(t, l.wake.channel(kind), 1, "a second create does not bring the sweep forward")
	l.Swept(pool.UID, next)
	assert.Equal(t, next.Add(window/4), must(l.Next(pool.UID)))

	// A pool seen long after the start is swept once, at its first audit.
	late := NewLateRecords(window, started.Add(-time.Hour))
	assert.True(t, late.Sweeping(pool.UID, time.Now()))
	late.Swept(pool.UID, time.Now())
	_, ok = late.Next(pool.UID)
	assert.False(t, ok)

	var none *LateRecords
	none.Uncertain(kind, pool)
	_, ok = none.Next(pool.UID)
	assert.False(t, ok, "a nil LateRecords plans nothing")
}

func must(t time.Time, ok bool) time.Time {
	if !ok {
		return time.Time{}
	}
	return t
}
